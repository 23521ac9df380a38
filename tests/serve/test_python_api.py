"""`from fitprobe import plan, check, probe`: typed results (the contract's classes), the same answers
as the CLI, errors with the CLI's kinds; and `import fitprobe` stays cheap."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from fitprobe.cli import main


def test_plan_returns_the_contract_the_cli_prints():
    from fitprobe import plan
    from fitprobe.contract import to_json
    from fitprobe.schema import PlanOutput

    out = plan("llama-3.1-8b-instruct", "RTX 4090", gpus=2, context="max", batch=4)
    assert isinstance(out, PlanOutput)
    assert out.hardware.count == 2 and out.recommended.batch == 4
    cli = CliRunner().invoke(main, ["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--gpus", "2",
                                    "--ctx", "max", "--batch", "4", "--json"])
    assert json.loads(to_json(out)) == json.loads(cli.stdout)


def test_a_request_object_and_keyword_options_are_the_same_call():
    from fitprobe import PlanRequest, plan

    by_request = plan(PlanRequest(model="qwen3-8b", gpu="RTX 3060", quant="Q8_0", require_tps=5.0))
    by_keywords = plan("qwen3-8b", "RTX 3060", quant="Q8_0", require_tps=5.0)
    assert by_request.recommended == by_keywords.recommended and by_request.gate.passed == by_keywords.gate.passed


def test_check_and_probe_on_a_probed_gpu(monkeypatch):
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent.parent / "probe"))
    from fake_pynvml import FakeNVML
    from test_probe_nvml import H200

    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([H200]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    from fitprobe import check, probe
    from fitprobe.probe.types import ProbeReport

    report = probe()
    assert isinstance(report, ProbeReport) and report.gpus[0].name == "NVIDIA H200"
    out = check("qwen3-30b-a3b")
    assert out.hardware.source == "probe" and out.hardware.devices[0].catalog_key == "h200-sxm"
    assert out.verdict.status == "fits" and out.verdict_now.status == "fits"


@pytest.mark.parametrize("call, kind, code", [
    (lambda api: api.plan("no-such-model-xyz", "RTX 4090"), "model_not_found", 3),
    (lambda api: api.plan("qwen3-8b", "RTX 4090", colour="red"), "usage", 2),
    (lambda api: api.plan("qwen3-8b", None), "usage", 2),
    (lambda api: api.plan("qwen3-8b", "RTX 4090", context=-1), "usage", 2),
])
def test_errors_carry_the_cli_kind(call, kind, code):
    import fitprobe
    from fitprobe.errors import FitprobeError

    with pytest.raises(FitprobeError) as info:
        call(fitprobe)
    assert info.value.kind.name == kind and info.value.code == code
    assert "\n" not in str(info.value)


def _modules_after(code: str) -> set[str]:
    run = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return set(run.stdout.split())


SERVER_STACK = {"starlette", "uvicorn", "prometheus_client", "anyio", "httpx", "fitprobe.server",
                "fitprobe.server_metrics", "fitprobe.openapi"}


def test_import_fitprobe_loads_nothing_else():
    loaded = _modules_after("import fitprobe")
    assert not {m for m in loaded if m.startswith("fitprobe.")}
    assert not loaded & (SERVER_STACK | {"pydantic", "huggingface_hub", "click"})


def test_plain_plan_does_not_import_the_server_stack():
    loaded = _modules_after("import sys\nfrom fitprobe import cli\nsys.argv=['fitprobe','plan','qwen3-8b','--gpu',"
                            "'RTX 4090']\ntry:\n    cli.entry()\nexcept SystemExit:\n    pass")
    assert "fitprobe.usecases" in loaded  # the one path
    assert not loaded & SERVER_STACK and "huggingface_hub" not in loaded


def test_fit_returns_the_ranking_the_cli_prints():
    from fitprobe import FitRequest, fit
    from fitprobe.contract import fit_to_json
    from fitprobe.fit_schema import FitOutput

    out = fit("RTX 3060", ram_gib=32, limit=4)
    assert isinstance(out, FitOutput) and len(out.rows) == 4 and [r.rank for r in out.rows] == [1, 2, 3, 4]
    assert fit(FitRequest(gpu="RTX 3060", ram_gib=32, limit=4)).rows == out.rows
    cli = CliRunner().invoke(main, ["fit", "--gpu", "RTX 3060", "--ram-gib", "32", "--limit", "4", "--json"])
    assert json.loads(fit_to_json(out)) == json.loads(cli.stdout)
