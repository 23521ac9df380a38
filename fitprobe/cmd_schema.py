"""`fitprobe schema`: the JSON Schema of the output contract (PlanOutput), for validating gates."""
from __future__ import annotations

import json

import click


@click.command("schema")
def schema_command():
    """Print the JSON Schema of `plan --json` / `check --json` output."""
    from fitprobe.contract import json_schema

    click.echo(json.dumps(json_schema(), indent=2))
