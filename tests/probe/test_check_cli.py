"""`fitprobe check` end to end on a probed GPU: the stand-in pynvml (values of the real H200 capture)
is the only thing replaced; probing, catalog matching, sizing and the verdicts run for real."""
import json
import sys

from click.testing import CliRunner
from fake_pynvml import FakeNVML
from test_probe_nvml import H200

from fitprobe.cli import main
from fitprobe.probe.types import MiB


def run_check(monkeypatch, device, *args):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([device]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result = CliRunner().invoke(main, ["check", *args, "--json"])
    return result.exit_code, result.output


def test_check_sizes_on_the_probed_gpu(monkeypatch):
    code, out = run_check(monkeypatch, H200, "qwen3-30b-a3b")
    data = json.loads(out)
    assert code == 0
    hw = data["hardware"]
    assert hw["source"] == "probe" and hw["count"] == 1
    dev = hw["devices"][0]
    assert dev["catalog_key"] == "h200-sxm" and dev["memory_bytes"] == 143771 * MiB
    assert dev["readings"]["source"] == "nvml" and dev["readings"]["driver"] == "590.48.01"
    assert data["verdict"]["status"] == "fits" and data["verdict_now"]["status"] == "fits"


def test_memory_used_by_other_processes_decides_right_now(monkeypatch):
    busy = {**H200, "memory": {**H200["memory"], "used": 130_000 * MiB, "free": 13_158 * MiB}}
    code, out = run_check(monkeypatch, busy, "qwen3-30b-a3b")
    data = json.loads(out)
    assert data["verdict"]["status"] == "fits"  # the idle card would hold it
    assert data["verdict_now"]["status"] == "exceeds"  # but not with 130 GB taken
    assert code == 1  # a gate cares about now


def test_a_busy_gpu_gets_the_deployment_that_fits_right_now(monkeypatch):
    busy = {**H200, "memory": {**H200["memory"], "used": 130_000 * MiB, "free": 13_158 * MiB}}
    code, out = run_check(monkeypatch, busy, "qwen3-30b-a3b", "--ram-gib", "256")
    data = json.loads(out)
    assert data["verdict_now"]["status"] == "exceeds"
    now = data["recommended_now"]
    assert now is not None and now["status"] != "exceeds"
    assert now["cpu_moe_layers"] > 0 or now["gpu_layers"] < data["model"]["n_layers"] + 1  # offload into free room
    assert now["command"] != data["recommended"]["command"]
    code, text = run_check(monkeypatch, {**H200}, "qwen3-30b-a3b")
    assert json.loads(text)["recommended_now"] is None  # an idle card needs no second plan


def test_the_gate_right_now_judges_the_command_that_runs_now(monkeypatch):
    busy = {**H200, "memory": {**H200["memory"], "used": 130_000 * MiB, "free": 13_158 * MiB}}
    code, out = run_check(monkeypatch, busy, "qwen3-30b-a3b", "--ram-gib", "256", "--require-context", "8192")
    data = json.loads(out)
    gate = data["gate"]
    assert gate["on"] == "now" and gate["subject"] == "recommended_now" and gate["passed"] and code == 0
    # the idle card: the recommended command itself, judged on the memory free now
    code, out = run_check(monkeypatch, {**H200}, "qwen3-30b-a3b", "--require-context", "8192")
    gate = json.loads(out)["gate"]
    assert gate["subject"] == "launch.llama.cpp" and gate["on"] == "now" and gate["passed"]
    # nearly everything taken and a model larger than the RAM: nothing fits right now, the gate fails
    full = {**H200, "memory": {**H200["memory"], "used": 143_000 * MiB, "free": 771 * MiB}}
    code, out = run_check(monkeypatch, full, "llama-3.3-70b-instruct", "--ram-gib", "16", "--require-context", "8192")
    data = json.loads(out)
    assert code == 1 and not data["gate"]["passed"] and data["recommended_now"] is None
