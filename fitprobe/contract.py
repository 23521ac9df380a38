"""The JSON contract through pydantic: `PlanOutput` validated, serialized and described as JSON Schema.

`fitprobe.schema` declares the contract as typed records (field types, descriptions, bounds); this
module is the only place pydantic handles it, so the human-readable path never pays for importing
pydantic. Every `--json` document is validated against the contract before it is printed.
"""
from __future__ import annotations

from functools import lru_cache

from fitprobe.estimator.fields import asdict
from fitprobe.schema import SCHEMA_VERSION, PlanOutput, bind_section_types


@lru_cache(maxsize=1)
def adapter():
    from pydantic import TypeAdapter

    bind_section_types()
    return TypeAdapter(PlanOutput)


def validated(output: PlanOutput) -> PlanOutput:
    """A copy of `output` rebuilt through pydantic: raises ValidationError if it breaks the contract."""
    return adapter().validate_python(asdict(output))


def to_json(output: PlanOutput, *, indent: int | None = 2) -> str:
    return adapter().dump_json(validated(output), indent=indent).decode()


def json_schema() -> dict:
    doc = adapter().json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = f"fitprobe PlanOutput {SCHEMA_VERSION}"
    return doc


@lru_cache(maxsize=1)
def fit_adapter():
    from pydantic import TypeAdapter

    from fitprobe.fit_schema import FitOutput

    return TypeAdapter(FitOutput)


def fit_to_json(output, *, indent: int | None = 2) -> str:
    """`fitprobe fit --json`: the FitOutput validated against its contract, then printed."""
    adapter = fit_adapter()
    return adapter.dump_json(adapter.validate_python(asdict(output)), indent=indent).decode()


def fit_json_schema() -> dict:
    from fitprobe.fit_schema import FIT_SCHEMA_VERSION

    doc = fit_adapter().json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = f"fitprobe FitOutput {FIT_SCHEMA_VERSION}"
    return doc
