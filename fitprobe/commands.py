"""Command bodies behind the click definitions: options become a `PlanRequest`, the use case
(`fitprobe.usecases`, shared with the server and the Python API) sizes it, and this module prints the
answer. Errors are `fitprobe.errors` kinds: the command group prints them as one line and exits with
the kind's code."""
from __future__ import annotations

import sys

import click

from .errors import UsageError
from .estimator.message import msg


def request_from(model: str, gpu: str | None, gpus: int, opts: dict):
    """The PlanRequest the options describe (every bound is checked by the use case)."""
    from fitprobe.usecases import PlanRequest

    try:
        return PlanRequest(
            model=model, gpu=gpu, gpus=gpus, memory_gib=opts.get("memory_gib"), quant=opts.get("quant"),
            context=opts["context"], kv_cache=opts.get("kv_cache"), batch=opts["batch"], engine=opts.get("engine"),
            ubatch=opts["ubatch"], flash_attention=not opts["no_flash_attn"], gpu_layers=opts["gpu_layers"],
            gpu_util=opts["gpu_util"], usable_fraction=opts["usable_fraction"],
            min_margin_bytes=opts["min_margin"], ram_gib=opts.get("ram_gib"), ram_bw=opts.get("ram_bw"),
            cpu_threads=opts.get("cpu_threads"), cpu_ghz=opts.get("cpu_ghz"), cpu_class=opts.get("cpu_class"),
            revision=opts.get("revision"), hub_timeout=opts.get("hub_timeout"),
            expect_gpus=opts.get("expect_gpus"), gate_on=opts.get("gate_on") or "now",
            require_context=opts.get("require_context"), require_tps=opts.get("require_tps"),
            strict=bool(opts.get("strict")))
    except ValueError as exc:  # a bound the request declares
        raise UsageError(msg("invalid option: %(exc)s", exc=exc)) from None


def emit(output, as_json: bool, also_text: bool = False, full: bool = False, *, brief: bool = False,
         fields: tuple[str, ...] | None = None) -> None:
    """JSON to stdout (the whole contract, --brief or --fields; with --text, the human report on stderr
    too), or the human report alone. The report's module is imported only when it is printed."""
    as_json = as_json or brief or fields is not None
    if as_json:
        from fitprobe.contract import to_json

        click.echo(to_json(output, brief=brief, fields=fields))
    if also_text or not as_json:
        from fitprobe.render import render_plan

        click.echo(render_plan(output, full=full), err=as_json)


def json_selection(opts: dict) -> dict:
    """--brief / --fields as emit() keywords; UsageError for both at once or an unknown field name."""
    if opts.get("brief") and opts.get("fields"):
        raise UsageError(msg("--brief and --fields exclude each other: pick one"))
    if not opts.get("fields"):
        return {"brief": bool(opts.get("brief")), "fields": None}
    from fitprobe.contract import parse_fields

    try:
        return {"brief": False, "fields": parse_fields(opts["fields"])}
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def hub_lookup(model: str, opts: dict):
    """The Hub budget of this command (--timeout, -v), with a progress line on a terminal after 1 s;
    None for a name that cannot reach the Hub (a catalog name)."""
    from fitprobe.usecases import may_ask_hub

    if not may_ask_hub(model):
        return None
    from fitprobe.deadline import Lookup

    lookup = Lookup(timeout=opts.get("hub_timeout") or Lookup.timeout, verbose=bool(opts.get("verbose")))
    if sys.stderr.isatty():
        def on_slow() -> None:
            from fitprobe.i18n import _, spec

            sys.stderr.write(_("asking the Hugging Face Hub about %(model)s (at most %(timeout)s s, --timeout)...")
                             % {"model": model, "timeout": spec(lookup.timeout, "g")})
            sys.stderr.flush()
            lookup.progress_shown = True

        lookup.on_slow = on_slow
    return lookup


def end_lookup(lookup) -> None:
    """Clear the progress line; with -v say what the lookup cost."""
    if lookup is None:
        return
    if lookup.progress_shown:
        sys.stderr.write("\r\033[K")
    if lookup.verbose and lookup.deadline is not None:
        from fitprobe.i18n import _, spec

        click.echo(_("hub: %(requests)s request(s) in %(seconds)s s") % {
            "requests": lookup.requests, "seconds": spec(lookup.deadline.elapsed(), ".2f")}, err=True)


def run_plan(command: str, model: str, *, gpu: str | None, gpus: int, **opts) -> None:
    """`plan` (named hardware) and `check` (this machine) through the Python API's functions: size,
    print, exit with the verdict's code."""
    from fitprobe import api

    request = request_from(model, gpu, gpus, opts)
    selection = json_selection(opts)
    lookup = hub_lookup(model, opts)
    try:
        use_case = api.check if command == "check" else api.plan
        output = use_case(request, hf_token=opts.get("token"), verify=opts.get("verify", False),
                          llama_fit_params=opts.get("fit_params_path"), lookup=lookup)
    finally:
        end_lookup(lookup)
    emit(output, opts["as_json"], opts.get("also_text", False), opts.get("full", False), **selection)
    sys.exit(api.exit_code(output, request.gate_on if command == "check" else "idle"))


def run_check(model: str, *, gpu: str | None, gpus: int, **opts) -> None:
    """plan on the probed machine: the idle verdict (total memory) and the right-now verdict (free
    memory); the exit code and the gate follow --gate-on (right now unless idle)."""
    run_plan("check", model, gpu=gpu, gpus=gpus, **opts)
