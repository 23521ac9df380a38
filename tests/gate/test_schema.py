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
