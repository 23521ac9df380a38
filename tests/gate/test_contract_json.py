"""`--json` is written without pydantic (fitprobe.record_json); these tests hold it to pydantic's own
validate-then-dump output, byte for byte, across every bundled model and the report, gate and fix paths."""
import json
import math

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from fitprobe import contract
from fitprobe.catalogs.models import load_models
from fitprobe.cli import main
from fitprobe.estimator.fields import asdict
from fitprobe.record_json import ContractError, dumps, record_data

GPUS = [("RTX 4090", "1"), ("H100 SXM", "8"), ("M4 Max 128GB", "1"), ("RTX 3060", "2"), ("cpu", "0"),
        ("A100 80GB SXM4", "4")]
QUANTS = ["Q4_K_M", "Q8_0", "UD-Q4_K_XL", "IQ2_XXS", "Q6_K", "BF16"]


def pydantic_json(output) -> str:
    """What `--json` printed before: the records rebuilt and dumped by pydantic."""
    adapter = contract.adapter()
    return adapter.dump_json(adapter.validate_python(asdict(output)), indent=2).decode()


def outputs_of(monkeypatch, args: list[str]) -> list:
    """The PlanOutput records a CLI run printed as JSON."""
    seen = []
    real = contract.to_json
    monkeypatch.setattr(contract, "to_json", lambda output, **kw: seen.append(output) or real(output, **kw))
    result = CliRunner().invoke(main, args + ["--json"])
    assert result.exit_code in (0, 1), result.output
    assert len(seen) == 1
    return seen


def _case(i: int, name: str) -> list[str]:
    gpu, count = GPUS[i % len(GPUS)]
    quant = QUANTS[(i // len(GPUS)) % len(QUANTS)]
    args = ["plan", name, "--gpu", gpu, "--ctx", str(4096 << (i % 5)), "-q", quant, "--ram-gib", "64"]
    if gpu != "cpu":
        args += ["--gpus", count]
    if quant == "BF16" and gpu not in ("cpu", "M4 Max 128GB"):
        args += ["--engine", "vllm"]
    return args


PLANS = [_case(i, m.name) for i, m in enumerate(load_models())] + [
    ["plan", "llama-3.1-70b-instruct", "--gpu", "RTX 4090", "--require-context", "65536", "--require-tps", "30",
     "--min-margin", "1GiB", "--strict"],
    ["plan", "deepseek-v3", "--gpu", "RTX 3090", "--gpus", "2", "-q", "Q4_K_M"],  # exceeds: fixes
    ["plan", "qwen3-30b-a3b", "--gpu", "RTX 4090", "--engine", "sglang", "-q", "FP8", "--kv-cache", "fp8"],
    ["report", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--ctx", "16384"],
    ["report", "qwen3-235b-a22b", "--gpu", "H100 SXM", "--gpus", "2", "-q", "Q3_K_M"],
]


@pytest.mark.parametrize("args", PLANS, ids=[" ".join(a[:4]) for a in PLANS])
def test_writer_matches_pydantic_byte_for_byte(monkeypatch, args):
    (output,) = outputs_of(monkeypatch, args)
    assert contract.to_json(output) == pydantic_json(output)


def test_any_typed_readings_and_non_finite_numbers_match(monkeypatch):
    (output,) = outputs_of(monkeypatch, ["plan", "qwen3-8b", "--gpu", "H100 SXM", "--gpus", "2"])
    output.hardware.devices[0].readings = {"source": "nvml", "temp_c": 41, "power_w": 312.5, "clock": float("inf"),
                                           "mig": None, "ids": (0, 1), "nested": {"ok": True, "bw": 3.35e-5}}
    output.memory.per_device[0].usable_bytes = 80.0 * (1 << 30)  # an integral float in an int field
    output.verdict.utilization = 1  # an int in a float field
    assert contract.to_json(output) == pydantic_json(output)
    assert json.loads(contract.to_json(output))["verdict"]["utilization"] == 1.0


@given(st.lists(st.floats(allow_nan=False), max_size=50))
def test_floats_are_formatted_as_pydantic_formats_them(values):
    from pydantic import TypeAdapter

    assert dumps(values, indent=None) == TypeAdapter(list[float]).dump_json(values).decode()


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=20))
def test_layout_and_strings_match_pydantic(value):
    from typing import Any

    from pydantic import TypeAdapter

    adapter = TypeAdapter(Any)
    expected = json.loads(adapter.dump_json(value).decode())  # inf became null on both sides
    assert json.loads(dumps(_finite(value), indent=2)) == expected
    assert dumps(_finite(value), indent=2) == adapter.dump_json(_finite(value), indent=2).decode()


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def test_a_value_of_the_wrong_type_is_named_by_its_path(monkeypatch):
    (output,) = outputs_of(monkeypatch, ["plan", "qwen3-8b", "--gpu", "RTX 4090"])
    output.memory.per_device[0].layers = 3.5
    with pytest.raises(ContractError, match=r"\$\.memory\.per_device\[0\]\.layers: expected an integer"):
        contract.to_json(output)
    output.memory.per_device[0].layers = 3
    output.settings.quant = None
    with pytest.raises(ContractError, match=r"\$\.settings\.quant: expected a string"):
        record_data(output)


@pytest.mark.parametrize("args", [["fit", "--gpu", "RTX 4090", "--all", "--limit", "12"],
                                  ["fit", "--gpu", "cpu", "--ram-gib", "32", "--sort", "speed"]])
def test_fit_output_matches_pydantic_byte_for_byte(monkeypatch, args):
    seen = []
    real = contract.fit_to_json
    monkeypatch.setattr(contract, "fit_to_json", lambda output, **kw: seen.append(output) or real(output, **kw))
    result = CliRunner().invoke(main, args + ["--json"])
    assert result.exit_code in (0, 1), result.output
    (output,) = seen
    adapter = contract.fit_adapter()
    assert result.stdout.rstrip("\n") == adapter.dump_json(adapter.validate_python(asdict(output)), indent=2).decode()
