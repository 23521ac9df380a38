"""`fitprobe list models|gpus|quants`: what the bundled catalogs hold, so names can be found."""
from __future__ import annotations

import click

from fitprobe.i18n import N_, _, ljust, say

COLUMNS = {"name": N_("name"), "hf_id": N_("hf_id"), "params_b": N_("params_b"), "key": N_("key"),
           "memory_gib": N_("memory_gib"), "bandwidth_gbs": N_("bandwidth_gbs"), "kind": N_("kind"),
           "label": N_("label")}  # the text table's headers; the JSON keeps the keys


@click.command("list", help=N_("List the bundled models, GPUs or quantization formats."))
@click.argument("what", type=click.Choice(["models", "gpus", "quants"]))
@click.option("--json", "as_json", is_flag=True, help=N_("machine-readable list"))
def list_command(what: str, as_json: bool):
    import json

    rows = _rows(what)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from fitprobe.i18n import width

    head = [_(COLUMNS.get(k, k)) for k in rows[0]] if rows else []
    shown = [{**row, "label": say(row["label"])} if "label" in row else row for row in rows]  # catalog labels
    cells = [head] + [["" if v is None else str(v) for v in row.values()] for row in shown] if rows else []
    widths = [max(width(r[i]) for r in cells) for i in range(len(cells[0]))] if cells else []
    for r in cells:  # whole names, columns aligned: a name is never cut
        click.echo("  ".join(ljust(c, w) for c, w in zip(r, widths)).rstrip())


def _rows(what: str) -> list[dict]:
    if what == "models":
        from fitprobe.catalogs.models import load_models

        return [{"name": e.name, "hf_id": e.hf_id, "params_b": round(e.published_params / 1e9, 2)}
                for e in load_models()]
    if what == "gpus":
        from fitprobe.catalogs.gpus import load_gpus

        return [{"name": g.name, "key": g.key, "memory_gib": g.memory_gib, "bandwidth_gbs": g.bandwidth_gbs}
                for g in load_gpus()]
    from fitprobe.catalogs.quants import quant_table

    return [{"name": f.name, "kind": f.kind, "label": f.label} for f in quant_table().formats]
