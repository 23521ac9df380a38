"""Command bodies behind the click definitions: errors become one line and an exit code."""
from __future__ import annotations

import os
import sys

import click

from fitprobe.estimator.fields import replace

from .cli import EXIT_EXCEEDS, EXIT_FITS, parse_bytes
from .errors import HardwareError, UsageError


def build_settings(fmt, hw, opts: dict):
    from fitprobe.app import UsageError, default_engine
    from fitprobe.estimator.settings import RunSettings

    engine = opts.get("engine") or default_engine(fmt, hw)
    kv = opts.get("kv_cache") or ("auto" if engine in ("vllm", "sglang") else "f16")
    if opts["context"] <= 0:
        raise UsageError(f"--ctx must be a positive number of tokens, got {opts['context']}")
    if opts["batch"] <= 0:
        raise UsageError(f"--batch must be at least 1, got {opts['batch']}")
    try:
        return RunSettings(quant=fmt.name, context=opts["context"], kv_cache_dtype=kv, batch=opts["batch"],
                           engine=engine, ubatch=opts["ubatch"], flash_attention=not opts["no_flash_attn"],
                           gpu_layers=opts["gpu_layers"], gpu_memory_utilization=opts["gpu_util"])
    except ValueError as exc:  # a bound or choice RunSettings checks
        raise UsageError(f"invalid setting: {exc}") from None


def resolve_context(opts: dict, spec) -> bool:
    """Turn `--ctx max` into the model's maximum context (the planners then find the longest that
    fits); True when it was asked."""
    from fitprobe.app import UsageError

    if opts["context"] != "max":
        return False
    if not spec.max_context or spec.max_context <= 1:
        raise UsageError("--ctx max needs the model's maximum context (max_position_embeddings), which its config "
                         "does not give: pass a number of tokens")
    opts["context"] = spec.max_context
    return True


def with_host_speed(hw, opts: dict):
    """--ram-bw and --threads: the host's RAM bandwidth and CPU cores for offloaded or CPU-only decode."""
    from fitprobe.app import UsageError

    bw, threads = opts.get("ram_bw"), opts.get("cpu_threads")
    if bw is not None and bw <= 0:
        raise UsageError(f"--ram-bw must be positive (GB/s), got {bw:g}")
    if threads is not None and threads <= 0:
        raise UsageError(f"--threads must be at least 1, got {threads}")
    if bw:
        hw = replace(hw, ram_bandwidth_gbs=bw)
    if threads:
        hw = replace(hw, cpu_threads=threads)
    return hw


def emit(sized, as_json: bool, also_text: bool = False, full: bool = False, *, brief: bool = False,
         fields: tuple[str, ...] | None = None) -> None:
    """JSON to stdout (the whole contract, --brief or --fields; with --text, the human report on stderr
    too), or the human report alone. The report's module is imported only when it is printed."""
    as_json = as_json or brief or fields is not None
    if as_json:
        from fitprobe.contract import to_json

        click.echo(to_json(sized.output, brief=brief, fields=fields))
    if also_text or not as_json:
        from fitprobe.render import render_plan

        click.echo(render_plan(sized.output, full=full), err=as_json)


def json_selection(opts: dict) -> dict:
    """--brief / --fields as emit() keywords; UsageError for both at once or an unknown field name."""
    from fitprobe.app import UsageError

    if opts.get("brief") and opts.get("fields"):
        raise UsageError("--brief and --fields exclude each other: pick one")
    if not opts.get("fields"):
        return {"brief": bool(opts.get("brief")), "fields": None}
    from fitprobe.contract import parse_fields

    try:
        return {"brief": False, "fields": parse_fields(opts["fields"])}
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def requirements_from(opts: dict, min_margin: int):
    """The gate's requirements when any gate option is given (else None: plain verdict exit codes)."""
    from fitprobe.app import UsageError

    ctx, tps = opts.get("require_context"), opts.get("require_tps")
    if opts["context"] == "max" and ctx:
        raise UsageError("--ctx max and --require-context together: give the context the gate requires")
    if ctx is not None and ctx <= 0:
        raise UsageError(f"--require-context must be a positive number of tokens, got {ctx}")
    if tps is not None and tps <= 0:
        raise UsageError(f"--require-tps must be positive, got {tps:g}")
    if not (ctx or tps or opts.get("strict") or min_margin):
        return None
    if ctx:
        opts["context"] = max(opts["context"], ctx)  # size at least at the context required
    from fitprobe.estimator.gate import Requirements

    return Requirements(context=ctx, tps=tps, min_margin_bytes=min_margin, strict=bool(opts.get("strict")))


def attach_verify(sized, opts: dict) -> None:
    from fitprobe.app import UsageError
    from fitprobe.verify import find_tool, verify_plan

    inp = sized.launch_input
    tool = find_tool(opts.get("fit_params_path"))
    if tool is None:
        raise UsageError("--verify needs llama-fit-params on PATH or --llama-fit-params PATH")
    sized.output.verify = verify_plan(tool, inp)


def probed_hardware(usable_fraction: float, expect_gpus: int | None = None):
    """Probe this machine; (Hardware, per-device readings, probe notes). Raises HardwareError when a
    vendor tool or library is present but failed or hung (never a silent CPU-only plan), or when
    fewer GPUs than `expect_gpus` are seen."""
    from fitprobe.probe.registry import probe_machine
    from fitprobe.probe.to_hardware import probe_hardware
    from fitprobe.record_json import record_data, without_none

    try:
        report = probe_machine()
        hw = probe_hardware(report)
    except Exception as exc:  # the probe promises not to raise; if it does, say so in one line
        raise HardwareError(f"could not probe this machine: {type(exc).__name__}: {exc}") from exc
    failed = [b for b in report.backends if b.failed]
    if failed:
        why = "; ".join(f"{b.name}: {b.reason}" for b in failed)
        raise HardwareError(f"hardware not probeable: {why} (fix the driver, or name the hardware with --gpu)")
    if expect_gpus is not None and len(hw.devices) < expect_gpus:
        seen = ", ".join(f"{b.name}: {b.reason}" for b in report.backends if b.reason and not b.present)
        raise HardwareError(f"the probe sees {len(hw.devices)} GPU(s), --expect-gpus {expect_gpus}"
                            + (f" ({seen})" if seen else ""))
    hw = replace(hw, usable_fraction=usable_fraction)
    readings = [without_none(record_data(g)) for g in report.gpus if g.visible]
    notes = list(report.notes)
    if not hw.devices:
        notes.insert(0, "no GPU: CPU/RAM only" + (f" ({_ram(hw.system_ram_bytes)} RAM)" if hw.system_ram_bytes else ""))
    return hw, readings, notes


def cpu_hardware(usable_fraction: float):
    """`check --gpu cpu`: this machine's RAM (total and available, capped by its cgroup), no GPU probing."""
    from fitprobe.estimator.hardware import Hardware
    from fitprobe.probe.cpu import host_ram

    total, available = host_ram()
    if not total:
        raise HardwareError("could not read this machine's RAM: pass --ram-gib, or use plan --gpu cpu --ram-gib N")
    hw = Hardware(devices=[], system_ram_bytes=total, ram_available_bytes=available, usable_fraction=usable_fraction)
    return hw, [], [f"CPU only, as asked: {_ram(total)} RAM probed"]


def _ram(n: int | None) -> str:
    return f"{(n or 0) / (1 << 30):.1f} GiB"


def run_check(model: str, *, gpu: str | None, gpus: int, expect_gpus: int | None = None, gate_on: str = "now",
              **opts) -> None:
    """plan on the probed machine: the idle verdict (total memory) and the right-now verdict (free
    memory); the exit code and the gate follow `gate_on` (right now unless --gate-on idle)."""
    from fitprobe.app import is_cpu

    if gpu and expect_gpus is not None:
        raise UsageError("--expect-gpus checks the probed machine: drop --gpu")
    if gpu and not is_cpu(gpu):
        run_plan("check", model, gpu=gpu, gpus=gpus, **opts)
        return
    if gpu:
        hw, readings, notes = cpu_hardware(opts["usable_fraction"])
    else:
        hw, readings, notes = probed_hardware(opts["usable_fraction"], expect_gpus)
    if opts.get("ram_gib"):
        hw = replace(hw, system_ram_bytes=int(opts["ram_gib"] * (1 << 30)))
    run_plan("check", model, gpu=None, gpus=0, hardware=hw, readings=readings, probe_notes=notes, gate_on=gate_on,
             **opts)


def hub_lookup(model: str, opts: dict):
    """The Hub budget of this command (--timeout, -v), with a progress line on a terminal after 1 s."""
    from fitprobe.deadline import Lookup

    lookup = Lookup(timeout=opts.get("hub_timeout") or Lookup.timeout, verbose=bool(opts.get("verbose")))
    if sys.stderr.isatty():
        def on_slow() -> None:
            sys.stderr.write(f"asking the Hugging Face Hub about {model} (at most {lookup.timeout:g} s, --timeout)...")
            sys.stderr.flush()
            lookup.progress_shown = True

        lookup.on_slow = on_slow
    return lookup


def end_lookup(lookup) -> None:
    """Clear the progress line; with -v say what the lookup cost."""
    if lookup.progress_shown:
        sys.stderr.write("\r\033[K")
    if lookup.verbose and lookup.deadline is not None:
        click.echo(f"hub: {lookup.requests} request(s) in {lookup.deadline.elapsed():.2f} s", err=True)


def run_plan(command: str, model: str, *, gpu: str | None, gpus: int, hardware=None, readings=None,
             probe_notes=None, gate_on: str = "idle", **opts) -> None:
    from fitprobe.app import catalog_hardware, check_settings, pick_format, require_known_ram, size_plan
    from fitprobe.catalogs.resolve import resolve

    ram = int(opts["ram_gib"] * (1 << 30)) if opts.get("ram_gib") else None
    min_margin = parse_bytes(opts["min_margin"])
    requirements = requirements_from(opts, min_margin)
    selection = json_selection(opts)
    hw = hardware or catalog_hardware(gpu, gpus, usable_fraction=opts["usable_fraction"], ram_bytes=ram,
                                      memory_gib=opts.get("memory_gib"))
    hw = with_host_speed(hw, opts)
    token = opts.get("token") or os.environ.get("HF_TOKEN")
    lookup = hub_lookup(model, opts)
    try:
        resolved = resolve(model, token=token, revision=opts.get("revision"), lookup=lookup)
    finally:
        end_lookup(lookup)
    longest = resolve_context(opts, resolved.spec)
    fmt = pick_format(resolved, opts.get("quant"), opts.get("engine"), hw)
    settings = build_settings(fmt, hw, opts)
    check_settings(settings, fmt, hw)
    source = "probe" if hardware is not None else "catalog"
    now = hardware is not None and gate_on == "now"
    sized = size_plan(command, resolved, fmt, settings, hw, min_margin_bytes=min_margin,
                      hardware_source=source, device_readings=readings, engine_option=opts.get("engine"),
                      kv_explicit=opts.get("kv_cache") is not None, requirements=requirements,
                      longest_context=longest)
    require_known_ram(sized, hw)
    if opts.get("verify"):
        attach_verify(sized, opts)
    if hardware is not None:
        add_now_verdict(sized, min_margin)
        sized.output.notes[:0] = probe_notes or []
        if requirements is not None and now:
            gate_right_now(sized, requirements)
    emit(sized, opts["as_json"], opts.get("also_text", False), opts.get("full", False), **selection)
    if sized.output.gate is not None:
        sys.exit(EXIT_FITS if sized.output.gate.passed else EXIT_EXCEEDS)
    verdict = (sized.output.verdict_now if now else None) or sized.output.verdict
    sys.exit(EXIT_EXCEEDS if verdict.status == "exceeds" else EXIT_FITS)


def gate_right_now(sized, requirements) -> None:
    """The gate judged on the engine's launch plan sized against memory free right now (other
    processes counted), not on the idle devices: a busy GPU fails the gate."""
    from fitprobe.estimator.fields import replace as with_fields
    from fitprobe.estimator.gate import evaluate
    from fitprobe.estimator.launch import LaunchInput, plan_all

    inp = sized.launch_input
    if not any(d.free_bytes is not None for d in inp.hw.devices) and inp.hw.ram_available_bytes is None:
        return  # nothing is known about "now": the idle gate stands
    now = LaunchInput(**{**inp.__dict__, "now": True})
    plan = plan_all(now, [inp.settings.engine])[inp.settings.engine]
    sized.output.gate = with_fields(evaluate(requirements, plan), on="now")


def add_now_verdict(sized, min_margin: int) -> None:
    """The recommended command against free memory right now (other processes counted)."""
    from fitprobe.app import error_band, verdict_info
    from fitprobe.estimator.fields import replace
    from fitprobe.estimator.plan import Sizer

    inp = sized.launch_input
    hw = inp.hw
    if not any(d.free_bytes is not None for d in hw.devices) and hw.ram_available_bytes is None:
        return
    plan = sized.output.launch[inp.settings.engine]
    if plan.engine in ("vllm", "sglang"):
        hw = replace(hw, devices=hw.devices[:plan.tensor_parallel])
    fmt = next((f for f in inp.table.formats if f.name == plan.quant), inp.fmt)
    sizer = Sizer(inp.spec, inp.table, hw, error_band=error_band(), min_margin_bytes=min_margin,
                  known_weights=inp.sizer.known)
    _, verdict, _ = sizer.size(fmt, plan.settings, now=True)
    sized.output.verdict_now = verdict_info(verdict)
    if verdict.status == "exceeds":
        sized.output.recommended_now = plan_right_now(inp)


def plan_right_now(inp):
    """The deployment that fits the memory free right now (busy GPUs, used RAM), or None."""
    from fitprobe.app import deployment
    from fitprobe.estimator.launch import LaunchInput, plan_all

    now = LaunchInput(**{**inp.__dict__, "now": True})
    alt = plan_all(now, [inp.settings.engine])[inp.settings.engine]
    return deployment(alt, now) if alt.fits else None
