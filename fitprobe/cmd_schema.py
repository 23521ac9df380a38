"""`fitprobe schema [plan|fit]`: the JSON Schema of an output contract, for validating gates."""
from __future__ import annotations

import json

import click

from fitprobe.estimator.message import msg
from fitprobe.i18n import N_


@click.command("schema", help=N_("Print the JSON Schema of `plan/check/report --json` (default; or of --brief / "
                                 "--fields) or of `fit --json`."))
@click.argument("which", type=click.Choice(["plan", "fit"]), default="plan")
@click.option("--brief", is_flag=True, help=N_("the schema of the --brief form of plan/check/report"))
@click.option("--fields", default=None, help=N_("the schema of --fields a,b,c of plan/check/report"))
def schema_command(which: str, brief: bool, fields: str | None):
    if which == "fit":
        from fitprobe.contract import fit_json_schema

        click.echo(json.dumps(fit_json_schema(), indent=2))
        return
    from fitprobe.contract import json_schema, parse_fields

    if brief and fields:
        raise click.UsageError(msg("--brief and --fields exclude each other: pick one"))
    try:
        names = parse_fields(fields) if fields else None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(json.dumps(json_schema(brief=brief, fields=names), indent=2))
