"""`fitprobe fit`: what runs on this machine (probed) or on named hardware, ranked (docs/fit.md)."""
from __future__ import annotations

import sys

import click

from .cli import EXIT_EXCEEDS, EXIT_FITS, SIZE, fail

from fitprobe.catalogs.model_uses import USE_CASES
from fitprobe.estimator.rank import SORTS
from fitprobe.estimator.message import msg
from fitprobe.i18n import N_


def fit_options(f):
    """Options shared by `fit` and the report's hardware page."""
    opts = [
        click.option("--gpu", default=None, help=N_("catalog GPU name or 'cpu' (default: probe this machine)")),
        click.option("--gpus", type=int, default=1, show_default=True, help=N_("with --gpu: number of identical GPUs")),
        click.option("--memory-gib", type=float, default=None,
                     help=N_("memory of each GPU (a device the catalog lacks)")),
        click.option("--ram-gib", type=float, default=None,
                     help=N_("system RAM for offload (default: probed, or unknown)")),
        click.option("--usable", "usable_fraction", type=float, default=0.95, show_default=True,
                     help=N_("share of physical memory treated as usable")),
        click.option("--min-ctx", type=int, default=None, help=N_("plans must serve at least this many tokens (and the "
                                                                   "context factor saturates there; default 32K)")),
        click.option("--min-tps", type=float, default=None, help=N_("plans must decode at least this many tokens/s")),
        click.option("--use-case", type=click.Choice(USE_CASES), default=None,
                     help=N_("only models tagged for this use")),
        click.option("--engine", type=click.Choice(["llama.cpp", "vllm", "sglang", "ollama", "mlx"]), default=None,
                     help=N_("plans for this engine only (default: llama.cpp, vLLM on NVIDIA/AMD, MLX on Apple)")),
        click.option("--family", default=None, help=N_("only this model family (qwen3, llama, gemma3, ...)")),
        click.option("--max-params", type=float, default=None,
                     help=N_("only models up to this many billion parameters")),
        click.option("--all", "include_all", is_flag=True,
                     help=N_("include models that do not fit, with what would make them fit")),
        click.option("--sort", type=click.Choice(SORTS), default="score", show_default=True, help=N_("ranking key")),
        click.option("--limit", type=int, default=None, help=N_("show the first N models")),
        click.option("--min-margin", type=SIZE, default="0", help=N_("margin below which a plan is 'tight', e.g. 2GiB")),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@click.command("fit", help=N_("Which models run here, at which format, context and speed: every catalog model "
                              "ranked.\n\nExit code 0 when at least one model runs, 1 when none does, 2 usage error, "
                              "3 no Hub listing (offline, nothing cached), 4 no probe."))
@fit_options
@click.option("--hub", is_flag=True, help=N_("rank popular text-generation models from the Hugging Face Hub"))
@click.option("--hub-limit", type=int, default=50, show_default=True, help=N_("with --hub: how many listed models"))
@click.option("--hub-search", default=None, help=N_("with --hub: only repos whose name contains this"))
@click.option("--hub-timeout", type=float, default=20.0, show_default=True,
              help=N_("with --hub: seconds for the listing and every config together"))
@click.option("--token", default=None, help=N_("Hugging Face token (or HF_TOKEN)"))
@click.option("--json", "as_json", is_flag=True, help=N_("print the FitOutput contract (fitprobe schema fit)"))
def fit_command(as_json: bool, hub: bool, hub_limit: int, hub_search: str | None, hub_timeout: float,
                token: str | None, **opts):
    run = build(opts, hub=hub, hub_limit=hub_limit, hub_search=hub_search, hub_timeout=hub_timeout, token=token)
    if as_json:
        from fitprobe.contract import fit_to_json

        click.echo(fit_to_json(run.output))
    else:
        from fitprobe.fitting import render_table

        click.echo(render_table(run.output))
    sys.exit(EXIT_FITS if any(r.runs for r in run.output.rows) else EXIT_EXCEEDS)


def build(opts: dict, *, hub: bool = False, hub_limit: int = 50, hub_search: str | None = None,
          hub_timeout: float = 20.0, token: str | None = None, command: str = "fit"):
    """The fit use case (fitprobe.usecases.fit) on the catalog, or on a Hub listing with --hub."""
    from fitprobe import usecases
    from fitprobe.errors import UsageError
    from fitprobe.fitting import FitRequest

    request = FitRequest(
        gpu=opts.get("gpu"), gpus=opts.get("gpus", 1), memory_gib=opts.get("memory_gib"),
        ram_gib=opts.get("ram_gib"), usable_fraction=opts.get("usable_fraction", 0.95), min_ctx=opts.get("min_ctx"),
        min_tps=opts.get("min_tps"), use_case=opts.get("use_case"), engine=opts.get("engine"),
        family=opts.get("family"), max_params=opts.get("max_params"), include_all=opts.get("include_all", False),
        sort=opts.get("sort", "score"), limit=opts.get("limit"),
        min_margin_bytes=opts.get("min_margin") or 0)
    subjects, label, notes = None, "bundled catalog", []
    if hub:
        if hub_limit < 1:
            raise UsageError(msg("--hub-limit must be at least 1"))
        if hub_timeout <= 0:
            raise UsageError(msg("--hub-timeout must be positive"))
        import os

        from fitprobe.catalogs.hub_list import HubListError, hub_subjects

        try:
            listing = hub_subjects(limit=hub_limit, search=hub_search, timeout=hub_timeout,
                                   token=token or os.environ.get("HF_TOKEN"))
        except HubListError as exc:  # the Hub could not be listed now and nothing is cached: retry later
            from fitprobe.errors import RETRY_LATER

            fail(str(exc), RETRY_LATER.code)
        subjects, label, notes = listing.subjects, listing.label, listing.notes
    run = usecases.fit(request, subjects=subjects, source=label, command=command)
    run.output.notes[:0] = notes
    return run
