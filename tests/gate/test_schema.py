"""`fitprobe schema` is a JSON Schema that real outputs validate against (a small validator for
the keywords pydantic emits: the project has no jsonschema dependency)."""
import json

import pytest
from click.testing import CliRunner

from fitprobe.cli import main


def validate(value, schema, root, path="$"):
    if "$ref" in schema:
        ref = schema["$ref"].split("/")[-1]
        return validate(value, root["$defs"][ref], root, path)
    if "anyOf" in schema:
        errors = []
        for option in schema["anyOf"]:
            try:
                return validate(value, option, root, path)
            except AssertionError as exc:
                errors.append(str(exc))
        raise AssertionError(f"{path}: matches no anyOf option: {errors}")
    kind = schema.get("type")
    checks = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    if kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), f"{path}: not an integer"
    elif kind == "number":
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{path}: not a number"
    elif kind:
        assert isinstance(value, checks[kind]), f"{path}: not {kind}"
    if "enum" in schema:
        assert value in schema["enum"], f"{path}: {value} not in enum"
    if "const" in schema:
        assert value == schema["const"], f"{path}: not {schema['const']}"
    if kind == "object":
        for key in schema.get("required", []):
            assert key in value, f"{path}: missing {key}"
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                validate(item, props[key], root, f"{path}.{key}")
            elif isinstance(extra, dict):
                validate(item, extra, root, f"{path}.{key}")
            else:
                assert extra is not False, f"{path}: unexpected {key}"
    if kind == "array" and "items" in schema:
        for i, item in enumerate(value):
            validate(item, schema["items"], root, f"{path}[{i}]")


@pytest.fixture(scope="module")
def schema():
    r = CliRunner().invoke(main, ["schema"])
    assert r.exit_code == 0
    return json.loads(r.stdout)


CASES = [
    ["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--require-context", "32768", "--require-tps", "5"],
    ["plan", "qwen3-30b-a3b", "--gpu", "RTX 3060", "-q", "Q8_0", "--ctx", "16384"],
    ["plan", "deepseek-v3", "--gpu", "H100 SXM", "--gpus", "16", "-q", "FP8"],
    ["plan", "qwen3-235b-a22b", "--gpu", "M4 Max 128GB", "-q", "Q3_K_M", "--ctx", "32768"],
    ["plan", "llama-3.1-8b-instruct", "--gpu", "cpu", "--ram-gib", "32"],
]


def test_schema_names_the_new_sections(schema):
    assert {"schema_version", "launch", "fixes", "gate", "verify"} <= set(schema["properties"])


@pytest.mark.parametrize("args", CASES)
def test_real_outputs_validate(schema, args):
    r = CliRunner().invoke(main, args + ["--json"])
    assert r.exit_code in (0, 1), r.output
    validate(json.loads(r.stdout), schema, schema)


def test_validator_rejects_a_broken_output(schema):
    r = CliRunner().invoke(main, CASES[0] + ["--json"])
    doc = json.loads(r.stdout)
    doc["launch"]["llama.cpp"]["fits"] = "yes"
    with pytest.raises(AssertionError):
        validate(doc, schema, schema)


def _schema(*args):
    r = CliRunner().invoke(main, ["schema", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("args", [CASES[0], CASES[2], CASES[4]])
def test_brief_outputs_validate_and_hold_the_verdict_deployment_memory_speed(args):
    from fitprobe.contract import BRIEF_FIELDS, field_names

    brief = _schema("--brief")
    r = CliRunner().invoke(main, args + ["--brief"])  # --brief implies --json
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(r.stdout)
    validate(doc, brief, brief)
    assert list(doc) == [f for f in BRIEF_FIELDS if f in field_names()]  # "recommended" once the contract has it
    full = json.loads(CliRunner().invoke(main, args + ["--json"]).stdout)
    engine = full["settings"]["engine"]
    assert doc["launch"] == {engine: {"command": full["launch"][engine]["command"]}}
    assert {k: v for k, v in doc.items() if k != "launch"} == {k: full[k] for k in doc if k != "launch"}
    assert len(r.stdout) * 4 < len(json.dumps(full, indent=2))


def test_fields_output_validates_against_its_schema():
    schema_ = _schema("--fields", "verdict,speed,gate")
    assert set(schema_["properties"]) == {"verdict", "speed", "gate"}
    assert "FinetuneMethod" not in schema_["$defs"]  # only the definitions these fields use
    r = CliRunner().invoke(main, CASES[0] + ["--fields", "verdict,speed,gate"])
    doc = json.loads(r.stdout)
    assert list(doc) == ["verdict", "speed", "gate"] and doc["gate"]["checks"]
    validate(doc, schema_, schema_)


@pytest.mark.parametrize("extra,message", [
    (["--fields", "verdict,nope"], "--fields: unknown field 'nope' (choose from: schema_version"),
    (["--brief", "--fields", "verdict"], "--brief and --fields exclude each other"),
])
def test_bad_field_selection_is_a_usage_error(extra, message):
    r = CliRunner().invoke(main, CASES[0] + extra)
    assert r.exit_code == 2 and message in r.stderr and not r.stdout
