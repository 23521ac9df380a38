"""Typed records (estimator.fields), the catalog validation memo and the type-checked JSON contract."""
import json
import os
import subprocess
import sys

import pytest

from fitprobe.catalogs import validated
from fitprobe.catalogs.validated import CatalogValidationError, load_json_file
from fitprobe.estimator.fields import doc, record, replace
from fitprobe.estimator.hardware import Device, Hardware
from fitprobe.estimator.settings import RunSettings


@record
class Part:
    name: str
    size: int = doc("bytes", gt=0)
    share: float = doc(default=0.5, ge=0, le=1)
    tags: list[str] = doc(default_factory=list)


@record
class Box:
    parts: list[Part]
    label: str | None = None


def test_bounds_are_checked_on_construction_and_on_replace():
    assert Part(name="a", size=1).share == 0.5
    with pytest.raises(ValueError, match="size must be greater than 0"):
        Part(name="a", size=0)
    with pytest.raises(ValueError, match="share must be at most 1"):
        replace(Part(name="a", size=1), share=1.5)
    with pytest.raises(TypeError):
        Part("a", 1)  # keyword-only, like the pydantic models they replace


def test_the_shared_constructor_keeps_the_generated_one_s_rules():
    """record() gives every class one keyword __init__ (no generated source): field order, fresh
    default_factory values, the dataclass machinery (fields, replace, pydantic) and its TypeErrors."""
    a, b = Part(name="a", size=1), Part(name="b", size=2)
    a.tags.append("x")
    assert b.tags == [] and list(vars(a)) == ["name", "size", "share", "tags"]
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument.*'size'"):
        Part(name="a")
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        Part(name="a", size=1, colour="red")
    box = replace(Box(parts=[a]), label="y")
    assert box.parts == [a] and box.label == "y" and box != Box(parts=[a], label="z")
    pydantic = pytest.importorskip("pydantic")
    assert pydantic.TypeAdapter(Box).validate_python({"parts": [{"name": "c", "size": 4}]}).parts[0].share == 0.5


def test_run_settings_normalise_and_reject():
    assert RunSettings(kv_cache_dtype="fp16").kv_cache_dtype == "f16"
    with pytest.raises(ValueError, match="unknown engine"):
        RunSettings(engine="tgi")
    with pytest.raises(ValueError, match="context must be greater than 0"):
        RunSettings(context=0)
    with pytest.raises(ValueError, match="usable_fraction must be at most 1"):
        Hardware(devices=[Device(name="x", memory_bytes=1)], usable_fraction=1.2)


def _write(tmp_path, data):
    path = tmp_path / "box.json"
    path.write_text(json.dumps(data))
    return path


def test_new_content_is_validated_then_remembered(tmp_path, monkeypatch):
    monkeypatch.setenv("FITPROBE_CACHE_DIR", str(tmp_path / "cache"))
    path = _write(tmp_path, {"parts": [{"name": "a", "size": 3}], "label": "x"})
    calls = []
    real = validated._validate
    monkeypatch.setattr(validated, "_validate", lambda *a: calls.append(a) or real(*a))
    first = load_json_file(Box, path)
    second = load_json_file(Box, path)
    assert first == second == Box(parts=[Part(name="a", size=3)], label="x")
    assert isinstance(second.parts[0], Part)
    assert len(calls) == 1  # the second load is a memo hit
    path.write_text(json.dumps({"parts": [{"name": "a", "size": 4}]}))
    assert load_json_file(Box, path).parts[0].size == 4
    assert len(calls) == 2  # changed content: validated again


@pytest.mark.parametrize("data,message", [
    ({"parts": [{"name": "a", "size": "big"}]}, "parts.0.size"),
    ({"parts": [{"name": "a", "size": 0}]}, "size must be greater than 0"),
    ({"parts": [{"name": "a", "size": 1, "colour": "red"}]}, "parts.0.colour"),
    ({"label": "no parts"}, "parts"),
])
def test_invalid_content_names_file_and_place(tmp_path, monkeypatch, data, message):
    monkeypatch.setenv("FITPROBE_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(CatalogValidationError, match="box.json") as exc:
        load_json_file(Box, _write(tmp_path, data))
    assert message in str(exc.value)
    assert not list((tmp_path / "cache").glob("validated-catalogs/*"))  # nothing remembered


def test_unwritable_cache_still_validates(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("FITPROBE_CACHE_DIR", str(blocker / "sub"))
    assert load_json_file(Box, _write(tmp_path, {"parts": []})).parts == []


def test_human_plan_path_skips_pydantic_once_catalogs_are_validated(tmp_path):
    """The first run validates the bundled catalogs (pydantic); later runs on the same files do not."""
    code = ("import sys\nfrom fitprobe import cli\nsys.argv=['fitprobe','plan','qwen3-8b','--gpu','rtx-4090']\n"
            "try:\n    cli.entry()\nexcept SystemExit:\n    pass\n"
            "print('PYDANTIC' if 'pydantic' in sys.modules else 'CLEAN', file=sys.stderr)")
    env = {**os.environ, "FITPROBE_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
            for _ in range(2)]
    assert all("Verdict" in run.stdout for run in runs)
    assert [run.stderr.strip().splitlines()[-1] for run in runs] == ["PYDANTIC", "CLEAN"]


def test_json_output_is_checked_against_the_contract(plan_output):
    from fitprobe.contract import json_schema, to_json
    from fitprobe.record_json import ContractError

    doc_ = json.loads(to_json(plan_output))
    assert doc_["memory"]["total_bytes"] == plan_output.memory.total_bytes
    assert json_schema()["$defs"]["MemoryInfo"]["properties"]["weights_bytes"]["description"]
    plan_output.verdict.utilization = "most of it"
    with pytest.raises(ContractError, match=r"\$\.verdict\.utilization: expected a number"):
        to_json(plan_output)


@pytest.fixture
def plan_output():
    from fitprobe.app import catalog_hardware, size_plan
    from fitprobe.catalogs.quants import find_quant
    from fitprobe.catalogs.resolve import resolve

    hw = catalog_hardware("rtx-4090", 1, usable_fraction=0.95, ram_bytes=None)
    return size_plan("plan", resolve("qwen3-8b"), find_quant("Q4_K_M"), RunSettings(), hw).output


def test_a_catalog_check_runs_only_with_the_validation(tmp_path, monkeypatch):
    monkeypatch.setenv("FITPROBE_CACHE_DIR", str(tmp_path / "cache"))

    def unique(box):
        names = [p.name for p in box.parts]
        if len(set(names)) != len(names):
            raise ValueError("two parts share a name")

    path = _write(tmp_path, {"parts": [{"name": "a", "size": 3}, {"name": "a", "size": 4}]})
    with pytest.raises(CatalogValidationError, match="box.json is invalid: two parts share a name"):
        load_json_file(Box, path, check=unique)
    assert not list((tmp_path / "cache").glob("validated-catalogs/*"))  # a failed check is not remembered
    path.write_text(json.dumps({"parts": [{"name": "a", "size": 3}]}))
    checked = []
    for _ in range(2):
        load_json_file(Box, path, check=checked.append)
    assert len(checked) == 1  # the second load is a memo hit


def test_two_gpus_answering_to_one_name_fail_the_catalog(tmp_path, monkeypatch):
    from fitprobe.catalogs import gpus

    monkeypatch.setenv("FITPROBE_CACHE_DIR", str(tmp_path / "cache"))
    data = json.loads(gpus.PATH.read_text())
    first = next(d for d in data["devices"] if not d.get("memory_variants"))
    data["devices"].append({**first, "key": first["key"] + "-copy", "aliases": []})
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(gpus, "PATH", path)
    loaders = (gpus.load_gpus, gpus._device_data, gpus._entries_of)
    for loader in loaders:
        loader.cache_clear()
    try:
        with pytest.raises(CatalogValidationError, match=f"gpus.json is invalid: .* also names {first['key']}"):
            gpus.load_gpus()
        with pytest.raises(CatalogValidationError, match="also names"):
            gpus.match_gpus("RTX 4090")  # the one-record path checks the whole file as well
    finally:
        for loader in loaders:
            loader.cache_clear()
