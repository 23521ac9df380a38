"""The JSON contract: `PlanOutput` written as JSON without pydantic, and described as JSON Schema with it.

`fitprobe.schema` declares the contract as typed records. `--json` writes them through
`fitprobe.record_json`, which checks each value against its declared type and writes what pydantic
would (a test holds the two to the same bytes), so no `--json` run imports pydantic. pydantic turns the
same records into the JSON Schema that `fitprobe schema` prints, and real outputs are tested against it.

`--brief` and `--fields` print a subset of the top-level fields, for gates that parse the answer often.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache

from fitprobe.record_json import dumps, record_data
from fitprobe.schema import SCHEMA_VERSION, PlanOutput, bind_section_types

# The verdict, the recommended deployment, memory and speed, in the contract's order. A name PlanOutput does
# not have is skipped, so the brief form follows the contract as fields come and go.
BRIEF_FIELDS = ("schema_version", "command", "recommended", "settings", "memory", "verdict", "asked", "verdict_now",
                "recommended_now", "launch", "gate", "speed")
BRIEF_LAUNCH_DESCRIPTION = "--brief: the command of the recommended engine (settings.engine) only"


def field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(PlanOutput)]


def parse_fields(text: str) -> tuple[str, ...]:
    """`--fields a,b,c` as top-level PlanOutput names; ValueError names the unknown ones and the choices."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    known = field_names()
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"--fields: unknown field {', '.join(map(repr, unknown)) or '(none given)'} "
                         f"(choose from: {', '.join(known)})")
    return names


def to_json(output: PlanOutput, *, indent: int | None = 2, fields: tuple[str, ...] | None = None,
            brief: bool = False) -> str:
    """The whole contract, or only `fields`, or the brief form. Raises ContractError on a value that
    breaks its declared type."""
    if brief:
        engine = output.settings.engine
        data = {}
        for name in BRIEF_FIELDS:
            if name == "launch":
                data[name] = {engine: {"command": output.launch[engine].command}} if engine in output.launch else {}
            else:
                data.update(record_data(output, [name]))
    else:
        data = record_data(output, fields)
    return dumps(data, indent=indent)


@lru_cache(maxsize=None)
def request_adapter(name: str = "PlanRequest"):
    """The request side of the contract (fitprobe.usecases.PlanRequest, fitprobe.fitting.FitRequest): the
    server validates bodies with it."""
    from pydantic import TypeAdapter

    if name == "FitRequest":
        from fitprobe.fitting import FitRequest as request_type
    else:
        from fitprobe.usecases import PlanRequest as request_type
    return TypeAdapter(request_type)


@lru_cache(maxsize=1)
def adapter():
    from pydantic import TypeAdapter

    bind_section_types()
    return TypeAdapter(PlanOutput)


def json_schema(*, fields: tuple[str, ...] | None = None, brief: bool = False) -> dict:
    """The JSON Schema of the whole contract, of `--fields` (those properties) or of `--brief`."""
    doc = adapter().json_schema()
    title = "PlanOutput"
    doc["description"] = ("The --json output of fitprobe plan, check and report. --brief prints a subset "
                          "(fitprobe schema --brief); --fields a,b,c the named top-level fields.")
    if brief or fields:
        title = "BriefOutput" if brief else "FieldsOutput"
        names = [n for n in (BRIEF_FIELDS if brief else fields) if n in doc["properties"]]
        doc["properties"] = {n: doc["properties"][n] for n in names}
        doc["required"] = [n for n in doc.get("required", []) if n in names]
        doc["description"] = f"fitprobe {'--brief' if brief else '--fields ' + ','.join(names)} output"
        if brief:
            command = doc["$defs"]["LaunchPlan"]["properties"]["command"]
            doc["$defs"]["BriefLaunch"] = {"type": "object", "title": "BriefLaunch", "properties": {"command": command},
                                           "required": ["command"], "additionalProperties": False}
            doc["properties"]["launch"] = {"type": "object", "title": "Launch", "description": BRIEF_LAUNCH_DESCRIPTION,
                                           "additionalProperties": {"$ref": "#/$defs/BriefLaunch"}}
        doc["$defs"] = _reachable(doc)
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = f"fitprobe {title} {SCHEMA_VERSION}"
    return doc


def _reachable(doc: dict) -> dict:
    """The $defs a schema still refers to, after some properties were dropped."""
    defs, keep, todo = doc.get("$defs", {}), {}, [doc["properties"]]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            name = ref.rsplit("/", 1)[-1] if ref.startswith("#/$defs/") else None
            if name and name not in keep:
                keep[name] = defs[name]
                todo.append(defs[name])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return {name: defs[name] for name in defs if name in keep}


@lru_cache(maxsize=1)
def fit_adapter():
    from pydantic import TypeAdapter

    from fitprobe.fit_schema import FitOutput

    return TypeAdapter(FitOutput)


def fit_to_json(output, *, indent: int | None = 2) -> str:
    """`fitprobe fit --json`: the FitOutput, each value checked against its declared type as it is written."""
    return dumps(record_data(output), indent=indent)


def fit_json_schema() -> dict:
    from fitprobe.fit_schema import FIT_SCHEMA_VERSION

    doc = fit_adapter().json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = f"fitprobe FitOutput {FIT_SCHEMA_VERSION}"
    return doc
