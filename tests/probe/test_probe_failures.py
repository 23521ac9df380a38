"""Vendor tools that are there but fail, hang or flood: real programs on PATH (shell scripts replaying
recorded output), the real runner and registry. A machine that cannot be read is exit 4 with the
tool's own reason, never a silent CPU-only plan (issue #10 item 3, issue #12 kind 5)."""
import json
import sys
import time

import pytest
from click.testing import CliRunner
from fake_pynvml import FakeNVML, NVMLError_LibraryNotFound
from probe_fixtures import fixture_text
from test_probe_nvml import H200

from fitprobe.cli import main
from fitprobe.probe.registry import probe_machine
from fitprobe.probe.types import MiB

NO_DRIVER = fixture_text("wsl2_nvidia-smi-failures.txt").split("---")[0].strip("\n")


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """A bin folder first on PATH; `add(name, body)` puts a shell-script tool there."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()

    def add(name: str, body: str) -> None:
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\n" + body + "\n")
        tool.chmod(0o755)

    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([], init_error=NVMLError_LibraryNotFound("no libnvidia-ml")))
    return add


def check(*args):
    return CliRunner().invoke(main, ["check", "llama-3.1-8b-instruct", *args])


def test_nvidia_smi_that_cannot_reach_the_driver_is_exit_4(tools, tmp_path):
    (tmp_path / "msg.txt").write_text(NO_DRIVER + "\n")
    tools("nvidia-smi", f"cat {tmp_path / 'msg.txt'}; exit 9")
    r = check("--require-context", "8192")
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 4 and len(lines) == 1, r.output
    assert "couldn't communicate with the NVIDIA driver" in lines[0] and "exited 9" in lines[0]
    r = check("--json")
    assert r.exit_code == 4 and json.loads(r.stdout)["error"]["kind"] == "hardware"


def test_no_devices_found_is_a_cpu_machine_not_a_failure(tools):
    tools("nvidia-smi", "echo 'No devices were found'; exit 6")
    r = check("--json")
    assert r.exit_code in (0, 1) and json.loads(r.stdout)["hardware"]["count"] == 0


def test_four_hung_tools_cost_one_deadline_not_four(tools, tmp_path):
    for name in ("nvidia-smi", "rocm-smi", "xpu-smi", "npu-smi"):
        tools(name, "sleep 30")
    t0 = time.monotonic()
    report = probe_machine(env={}, sys_root=tmp_path, proc_root=tmp_path, catalog=[], deadline_s=1.0)
    took = time.monotonic() - t0
    assert took < 6, took  # one shared deadline (they ran at once), not 4 x 8 s one after another
    failed = {b.name: b.reason for b in report.backends if b.failed}
    assert set(failed) == {"nvidia-smi", "amd", "intel", "ascend"}, report.backends
    assert all("timed out" in why for why in failed.values())


def test_a_flood_of_garbage_is_a_failed_tool_not_thousands_of_gpus(tools, tmp_path):
    tools("nvidia-smi", f"{sys.executable} -c \"import os, sys; sys.stdout.buffer.write(os.urandom(4 << 20))\"")
    t0 = time.monotonic()
    report = probe_machine(env={}, sys_root=tmp_path, proc_root=tmp_path, catalog=[], deadline_s=5.0)
    smi = next(b for b in report.backends if b.name == "nvidia-smi")
    assert smi.failed and "4.0 MiB" in smi.reason and report.gpus == []
    assert time.monotonic() - t0 < 8


def test_thousands_of_rows_are_not_believed(tools, tmp_path):
    rows = "\\n".join(f"{i}, NVIDIA H100, 81559 MiB" for i in range(5000))
    tools("nvidia-smi", f"printf 'index, name, memory.total [MiB]\\n{rows}\\n'")
    report = probe_machine(env={}, sys_root=tmp_path, proc_root=tmp_path, catalog=[], deadline_s=5.0)
    smi = next(b for b in report.backends if b.name == "nvidia-smi")
    assert smi.failed and "5,000 GPUs" in smi.reason and report.gpus == []


def test_expect_gpus_fails_a_node_that_shows_fewer(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([H200]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    r = check("--expect-gpus", "2")
    assert r.exit_code == 4 and "sees 1 GPU(s), --expect-gpus 2" in r.stderr
    r = check("--expect-gpus", "1", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["hardware"]["count"] == 1
    r = CliRunner().invoke(main, ["check", "llama-3.1-8b-instruct", "--gpu", "H100 SXM", "--expect-gpus", "1"])
    assert r.exit_code == 2 and "drop --gpu" in r.stderr


def test_the_gate_judges_memory_free_right_now(monkeypatch):
    """A busy card: the idle device would pass, right now it does not (the gate used to pass here)."""
    busy = {**H200, "memory": {**H200["memory"], "used": 130_000 * MiB, "free": 13_158 * MiB}}
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([busy]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    args = ["check", "qwen3-30b-a3b", "--require-context", "8192", "--strict", "--json", "--engine", "vllm"]
    r = CliRunner().invoke(main, args)  # vLLM cannot offload: 13 GB free does not hold it now
    data = json.loads(r.stdout)
    assert data["verdict"]["status"] == "fits" and data["verdict_now"]["status"] == "exceeds"
    assert r.exit_code == 1 and data["gate"]["on"] == "now" and not data["gate"]["passed"]
    r = CliRunner().invoke(main, [*args, "--gate-on", "idle"])
    data = json.loads(r.stdout)
    assert r.exit_code == 0 and data["gate"]["on"] == "idle" and data["gate"]["passed"]
    r = CliRunner().invoke(main, [*args[:-2], "--ram-gib", "2"])  # llama.cpp, and no RAM to offload to
    assert r.exit_code == 1 and json.loads(r.stdout)["gate"]["on"] == "now"


def test_probe_command_shows_the_failure_and_exits_4(tools, tmp_path):
    (tmp_path / "msg.txt").write_text(NO_DRIVER + "\n")
    tools("nvidia-smi", f"cat {tmp_path / 'msg.txt'}; exit 9")
    r = CliRunner().invoke(main, ["probe"])
    assert r.exit_code == 4 and "nvidia-smi  FAILED" in r.stdout
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "exited 9" in r.stderr
