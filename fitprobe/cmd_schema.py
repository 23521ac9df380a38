"""`fitprobe schema`: the JSON Schema of the output contract (PlanOutput), for validating gates."""
from __future__ import annotations

import json

import click


@click.command("schema")
def schema_command():
    """Print the JSON Schema of `plan --json` / `check --json` output."""
    from fitprobe.schema import SCHEMA_VERSION, PlanOutput

    doc = PlanOutput.model_json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = f"fitprobe PlanOutput {SCHEMA_VERSION}"
    click.echo(json.dumps(doc, indent=2))
