"""`fitprobe schema [plan|fit]`: the JSON Schema of an output contract, for validating gates."""
from __future__ import annotations

import json

import click


@click.command("schema")
@click.argument("which", type=click.Choice(["plan", "fit"]), default="plan")
def schema_command(which: str):
    """Print the JSON Schema of `plan/check/report --json` (default) or of `fit --json`."""
    if which == "fit":
        from fitprobe.contract import fit_json_schema

        click.echo(json.dumps(fit_json_schema(), indent=2))
        return
    from fitprobe.contract import json_schema

    click.echo(json.dumps(json_schema(), indent=2))
