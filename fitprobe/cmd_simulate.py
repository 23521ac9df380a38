"""`fitprobe simulate MODEL [plan options]`: feel the estimated speed — the wait for the first token,
then tokens appearing at the decode speed (an animation on a TTY; one summary line otherwise)."""
from __future__ import annotations

import os
import sys

import click

from .cli import EXIT_EXCEEDS, EXIT_USAGE, fail, size_options
from .estimator.message import join, msg
from .i18n import N_, _
from .simulate import DEFAULT_MAX_SECONDS, DEFAULT_TOKENS


@click.command("simulate", help=N_("Play MODEL's estimated time to first token and decode speed on named (--gpu) or "
                                   "probed hardware."))
@click.argument("model")
@click.option("--gpu", default=None, help=N_("catalog GPU name or 'cpu' (default: probe this machine)"))
@click.option("--gpus", type=int, default=1, show_default=True, help=N_("number of identical GPUs"))
@click.option("--memory-gib", type=float, default=None, help=N_("memory of each GPU (a device the catalog lacks)"))
@click.option("--tokens", "n_tokens", type=int, default=DEFAULT_TOKENS, show_default=True, help=N_("tokens to generate"))
@click.option("--max-seconds", type=float, default=DEFAULT_MAX_SECONDS, show_default=True,
              help=N_("play faster (and say so) when the run would take longer than this"))
@size_options
def simulate_command(model, gpu, gpus, memory_gib, n_tokens, max_seconds, **opts):
    import time

    from fitprobe.simulate import Playback, play, summary

    sized = _size(model, gpu, gpus, memory_gib, opts)
    out = sized.output
    sp = out.speed
    if sp is None or sp.decode_tps <= 0:
        fail(msg("no speed estimate for this plan: %(why)s", why=join(out.notes[-1:])), EXIT_USAGE)
    if n_tokens <= 0:
        fail(msg("--tokens must be at least 1"), EXIT_USAGE)
    pb = Playback.plan(sp.ttft_ms, sp.decode_tps, n_tokens, max_seconds)
    label = _("%(model)s on %(hardware)s") % {"model": out.model.id, "hardware": out.hardware.name}
    if out.verdict.status == "exceeds":
        click.echo(_("note: %(note)s") % {"note": _(
            "%(model)s does not fit this hardware at these settings; the speed is what it would reach if it did")
            % {"model": out.model.id}}, err=True)
    tty = sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    if not tty:
        click.echo(summary(label, pb, sp.prompt_tokens))
    else:
        click.echo(_("%(label)s — %(backend)s, %(bound)s bound") % {"label": label, "backend": sp.backend,
                                                                    "bound": _(sp.bound)})

        def write(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        play(pb, write=write, sleep=time.sleep, clock=time.monotonic)
    sys.exit(EXIT_EXCEEDS if out.verdict.status == "exceeds" else 0)


def _size(model: str, gpu: str | None, gpus: int, memory_gib: float | None, opts: dict):
    """The plan's sizing through the shared use case (plan, or check on this machine), without the
    right-now verdict or the report extras."""
    from fitprobe import usecases
    from fitprobe.commands import end_lookup, hub_lookup, request_from

    request = request_from(model, gpu, gpus, {**opts, "memory_gib": memory_gib})
    lookup = hub_lookup(model, opts)
    try:
        use_case = usecases.plan if gpu else usecases.check
        return use_case(request, command="simulate", right_now=False, hf_token=opts.get("token"), lookup=lookup)
    finally:
        end_lookup(lookup)
