"""The use cases every front end runs: the CLI, the HTTP server (`fitprobe serve`) and the Python API
(`from fitprobe import plan, check, probe`) all come here, so a request is validated, sized and judged
one way and fails with one set of errors (`fitprobe.errors`: a kind, hence an exit code or HTTP status).

A use case takes a typed `PlanRequest` and returns the contract's `PlanOutput` (inside `Sizing`, which
also keeps what the report page builds on) or raises a `FitprobeError`; it never prints or exits.
"""
from __future__ import annotations

import copy
import os
from typing import Literal

from fitprobe.errors import EXCEEDS, FITS, HardwareError, UsageError
from fitprobe.estimator.fields import doc, record, replace
from fitprobe.estimator.message import Num, msg

GIB = 1 << 30
Engine = Literal["llama.cpp", "vllm", "sglang", "ollama", "mlx"]


@record
class PlanRequest:
    """What to size: the options of `fitprobe plan` / `check`, named as their long flags are."""

    model: str = doc(description="catalog name, Hugging Face id (org/name[@revision][:QUANT]), or (CLI and Python "
                                 "only) a directory, config.json or .gguf path")
    gpu: str | None = doc(default=None, description="catalog GPU name or 'cpu'; plan needs it, check probes without it")
    gpus: int = doc(default=1, description="number of identical GPUs named by `gpu`")
    memory_gib: float | None = doc(default=None, description="memory of each named GPU (override, or a "
                                                                   "device the catalog lacks)")
    quant: str | None = doc(default=None, description="Q4_K_M (default), Q8_0, BF16, FP8, AWQ, native, ...")
    context: int | Literal["max"] = doc(default=8192, description="tokens per sequence, or 'max' (the longest "
                                                                  "that fits)")
    kv_cache: str | None = doc(default=None, description="f16, bf16, fp8, q8_0, q4_0 or auto")
    batch: int = doc(default=1, description="concurrent sequences")
    engine: Engine | None = doc(default=None, description="default: llama.cpp for GGUF, vLLM for checkpoints, "
                                                          "MLX on Apple")
    ubatch: int = doc(default=512, description="llama.cpp micro-batch (-ub)")
    flash_attention: bool = doc(default=True, description="llama.cpp flash attention")
    gpu_layers: int | None = doc(default=None, description="llama.cpp -ngl (default: all layers)")
    gpu_util: float = doc(default=0.9, description="vLLM --gpu-memory-utilization")
    usable_fraction: float = doc(default=0.95, description="share of physical memory treated as usable")
    min_margin_bytes: int = doc(default=0, ge=0, description="margin below which the verdict is 'tight'")
    ram_gib: float | None = doc(default=None, description="system RAM for offload (check: overrides the probe)")
    ram_bw: float | None = doc(default=None, description="speed: system RAM bandwidth GB/s for offloaded or "
                                                          "CPU-only decode (default 89.6)")
    cpu_threads: int | None = doc(default=None, description="speed: CPU cores llama.cpp computes on (default: "
                                                            "llama.cpp's own count here: P-cores of a hybrid CPU, "
                                                            "else physical cores)")
    cpu_ghz: float | None = doc(default=None, description="speed: those cores' clock in GHz (default: probed, else "
                                                         "3.5)")
    cpu_class: Literal["x86_64", "atom", "arm64", "apple"] | None = doc(
        default=None, description="speed: those cores' class (default: probed; plan: apple on a Mac, else x86_64); "
                                  "atom: Intel N100-class and Celeron/Pentium N and J parts")
    revision: str | None = doc(default=None, description="Hub revision (branch, tag or commit)")
    hub_timeout: float | None = doc(default=None, description="seconds a Hub lookup may take in all (default 15; "
                                                              "then retry_later)")
    expect_gpus: int | None = doc(default=None, description="check: a hardware error when the probe sees fewer GPUs")
    gate_on: Literal["now", "idle"] = doc(default="now", description="check: judge the verdict and gate on free "
                                                                     "memory right now, or on the idle devices")
    require_context: int | None = doc(default=None, description="gate: tokens per sequence the plan must serve")
    require_tps: float | None = doc(default=None, description="gate: decode tokens/s per sequence the plan must reach")
    strict: bool = doc(default=False, description="gate: a 'tight' verdict fails")


class Probed:
    """One probe of this machine, turned into what sizing needs (taken once, shared by its readers).
    Probed and Sizing are plain classes: a record's generated __init__ would cost the CLI's start-up."""

    __slots__ = ("report", "hardware", "readings", "notes")

    def __init__(self, *, hardware, report=None, readings: list[dict] | None = None, notes: list[str] | None = None):
        self.report = report  # fitprobe.probe.types.ProbeReport (None: RAM read alone, check --gpu cpu)
        self.hardware = hardware  # fitprobe.estimator.hardware.Hardware (usable fraction not yet applied)
        self.readings = readings or []
        self.notes = notes or []


def probe():
    """What this machine has: fitprobe.probe.types.ProbeReport (never raises)."""
    from fitprobe.probe.registry import probe_machine

    return probe_machine()


def probed(report=None, expect_gpus: int | None = None) -> Probed:
    """Probe this machine (or read `report`) into Hardware. Raises HardwareError in one line when a vendor
    tool or library is present but failed or hung (never a silent CPU-only plan), or when fewer GPUs than
    `expect_gpus` are seen."""
    from fitprobe.probe.to_hardware import probe_hardware

    try:
        report = probe() if report is None else copy.deepcopy(report)  # probe_hardware adds notes to it
        hw = probe_hardware(report)
    except Exception as exc:  # the probe promises not to raise; if it does, say so in one line
        raise HardwareError(msg("could not probe this machine: %(error_type)s: %(exc)s",
                                error_type=type(exc).__name__, exc=exc)) from exc
    failed = [b for b in report.backends if b.failed]
    if failed:
        why = "; ".join(f"{b.name}: {b.reason}" for b in failed)
        raise HardwareError(msg("hardware not probeable: %(why)s (fix the driver, or name the hardware with --gpu)",
                                why=why))
    if expect_gpus is not None and len(hw.devices) < expect_gpus:
        seen = ", ".join(f"{b.name}: {b.reason}" for b in report.backends if b.reason and not b.present)
        raise HardwareError(msg("the probe sees %(n)s GPU(s), --expect-gpus %(expected)s (%(seen)s)", n=len(hw.devices),
                                expected=expect_gpus, seen=seen) if seen else
                            msg("the probe sees %(n)s GPU(s), --expect-gpus %(expected)s", n=len(hw.devices),
                                expected=expect_gpus))
    from fitprobe.record_json import record_data, without_none

    readings = [without_none(record_data(g)) for g in report.gpus if g.visible]
    notes = list(report.notes)
    if not hw.devices:
        notes.insert(0, msg("no GPU: CPU/RAM only (%(size)s RAM)", size=_gib(hw.system_ram_bytes))
                     if hw.system_ram_bytes else msg("no GPU: CPU/RAM only"))
    return Probed(report=report, hardware=hw, readings=readings, notes=notes)


def _cpu_probed() -> Probed:
    """`check --gpu cpu`: this machine's RAM (total and available, capped by its cgroup), no GPU probing."""
    from fitprobe.estimator.hardware import Hardware
    from fitprobe.probe.cpu import host_ram

    total, available = host_ram()
    if not total:
        raise HardwareError(msg("could not read this machine's RAM: pass --ram-gib, or use plan --gpu cpu --ram-gib N"))
    hw = Hardware(devices=[], system_ram_bytes=total, ram_available_bytes=available)
    return Probed(report=None, hardware=hw, notes=[msg("CPU only, as asked: %(size)s RAM probed", size=_gib(total))])


def _gib(n: int | None) -> Num:
    return Num((n or 0) / GIB, ".1f", "GiB")


class Sizing:
    """A sized request: the contract (`output`) and what the report page builds on."""

    __slots__ = ("output", "result", "launch_input", "resolved", "fmt", "settings", "hardware")

    def __init__(self, *, output, result, launch_input, resolved, fmt, settings, hardware):
        self.output = output  # fitprobe.schema.PlanOutput
        self.result = result  # estimator.plan.PlanResult of the settings as asked
        self.launch_input = launch_input  # estimator.launch.LaunchInput the launch plans were built from
        self.resolved = resolved  # catalogs.resolve.ResolvedModel
        self.fmt, self.settings, self.hardware = fmt, settings, hardware  # as asked: format, RunSettings, Hardware


def plan(request: PlanRequest, *, command: str = "plan", **options) -> Sizing:
    """Size the request on named hardware (`request.gpu`); `options` as for `size`."""
    if not request.gpu:
        raise UsageError(msg("plan needs a GPU name (gpu: 'RTX 4090', 'H100 SXM', 'cpu', ...); check probes this "
                             "machine"))
    return size(request, command=command, **options)


def check(request: PlanRequest, *, probe_result: Probed | None = None, command: str = "check", **options) -> Sizing:
    """Size the request on this machine: the idle verdict (total memory) and the right-now verdict (free
    memory). A named GPU (other than 'cpu') sizes that instead, like `plan`. `probe_result` reuses a probe
    already taken (the server caches one for a few seconds)."""
    from fitprobe.app import is_cpu

    if request.gpu and request.expect_gpus is not None:
        raise UsageError(msg("--expect-gpus checks the probed machine: drop --gpu"))
    if request.gpu and not is_cpu(request.gpu):
        return size(request, command=command, **options)
    if probe_result is not None and request.expect_gpus is not None:
        probe_result = probed(probe_result.report, request.expect_gpus)
    here = _cpu_probed() if request.gpu else (probe_result or probed(expect_gpus=request.expect_gpus))
    hw = replace(here.hardware, usable_fraction=request.usable_fraction)
    if request.ram_gib:
        hw = replace(hw, system_ram_bytes=int(request.ram_gib * GIB))
    return size(request, command=command, hardware=hw, readings=here.readings, probe_notes=here.notes, **options)


def size(request: PlanRequest, *, command: str, hardware=None, readings=None, probe_notes=None,
         hf_token: str | None = None, resolver=None, verify: bool = False, verify_tool: str | None = None,
         right_now: bool = True, lookup=None) -> Sizing:
    """The one sizing path: validate the request, resolve the model, pick format and settings, plan every
    engine, and (on probed hardware, unless not `right_now`) judge right now. `resolver(model, token=,
    revision=, lookup=)` replaces catalogs.resolve.resolve (the server's is cached and deduplicated);
    `lookup` (fitprobe.deadline.Lookup) bounds the Hub requests, by default `hub_timeout` seconds."""
    from fitprobe.app import catalog_hardware, check_settings, pick_format, require_known_ram, size_plan

    r = request
    _validate(r)
    min_margin = r.min_margin_bytes
    requirements = _requirements(r)
    context = max(r.context, r.require_context) if r.require_context and r.context != "max" else r.context
    ram = int(r.ram_gib * GIB) if r.ram_gib else None
    hw = hardware or catalog_hardware(r.gpu, r.gpus, usable_fraction=r.usable_fraction, ram_bytes=ram,
                                      memory_gib=r.memory_gib)
    hw = replace(hw, **{k: v for k, v in (("ram_bandwidth_gbs", r.ram_bw), ("cpu_threads", r.cpu_threads),
                                          ("cpu_ghz", r.cpu_ghz), ("cpu_arch", r.cpu_class)) if v})
    if resolver is None:
        from fitprobe.catalogs.resolve import resolve as resolver
    if lookup is None and may_ask_hub(r.model):
        from fitprobe.deadline import Lookup

        lookup = Lookup(timeout=r.hub_timeout or Lookup.timeout)
    resolved = resolver(r.model, token=hf_token or os.environ.get("HF_TOKEN"), revision=r.revision, lookup=lookup)
    longest = context == "max"
    if longest:
        if not resolved.spec.max_context or resolved.spec.max_context <= 1:
            raise UsageError(msg("--ctx max needs the model's maximum context (max_position_embeddings), which its "
                                 "config does not give: pass a number of tokens"))
        context = resolved.spec.max_context  # the planners then find the longest that fits
    fmt = pick_format(resolved, r.quant, r.engine, hw)
    settings = _settings(fmt, hw, r, context)
    check_settings(settings, fmt, hw)
    sized = size_plan(command, resolved, fmt, settings, hw, min_margin_bytes=min_margin,
                      hardware_source="probe" if hardware is not None else "catalog", device_readings=readings,
                      engine_option=r.engine, kv_explicit=r.kv_cache is not None, requirements=requirements,
                      longest_context=longest)
    require_known_ram(sized, hw)
    if verify:
        _attach_verify(sized, verify_tool)
    if hardware is not None and right_now:
        _judge_right_now(sized, min_margin, requirements, r.gate_on)
    sized.output.notes[:0] = probe_notes or []
    return Sizing(output=sized.output, result=sized.result, launch_input=sized.launch_input, resolved=resolved,
                 fmt=fmt, settings=settings, hardware=hw)


def may_ask_hub(model: str) -> bool:
    """Only an org/name id (or a Hub URL) can reach the Hub: a catalog name never does (resolve), so the
    lookup's deadline machinery is not even imported for one."""
    return "/" in model


def exit_code(output, gate_on: str = "now") -> int:
    """0 fits (or tight), 1 does not fit or a gate requirement fails: the gate when there is one, else the
    verdict right now when it was judged (check, unless gate_on is 'idle'), else the idle verdict."""
    if output.gate is not None:
        return FITS if output.gate.passed else EXCEEDS
    verdict = (output.verdict_now if gate_on == "now" else None) or output.verdict
    return EXCEEDS if verdict.status == "exceeds" else FITS


def _validate(r: PlanRequest) -> None:
    if not 0 < r.usable_fraction <= 1:
        raise UsageError(msg("--usable must be a fraction in (0, 1]"))
    if not 0 < r.gpu_util <= 1:
        raise UsageError(msg("--gpu-util must be a fraction in (0, 1]"))
    if r.ram_gib is not None and r.ram_gib <= 0:
        raise UsageError(msg("--ram-gib must be positive"))
    if r.context != "max" and (not isinstance(r.context, int) or r.context <= 0):
        raise UsageError(msg("--ctx must be a positive number of tokens or max, got %(context)s", context=r.context))
    if r.ram_bw is not None and r.ram_bw <= 0:
        raise UsageError(msg("--ram-bw must be positive (GB/s), got %(ram_bw)s", ram_bw=Num(r.ram_bw, "g")))
    if r.cpu_threads is not None and r.cpu_threads <= 0:
        raise UsageError(msg("--threads must be at least 1, got %(cpu_threads)s", cpu_threads=r.cpu_threads))
    if r.cpu_ghz is not None and not 0.3 <= r.cpu_ghz <= 10:
        raise UsageError(msg("--cpu-ghz must be a core clock between 0.3 and 10 GHz, got %(ghz)s", ghz=Num(r.cpu_ghz, "g")))
    if r.batch <= 0:
        raise UsageError(msg("--batch must be at least 1, got %(batch)s", batch=r.batch))
    if r.context == "max" and r.require_context:
        raise UsageError(msg("--ctx max and --require-context together: give the context the gate requires"))
    if r.require_context is not None and r.require_context <= 0:
        raise UsageError(msg("--require-context must be a positive number of tokens, got %(require_context)s",
                             require_context=r.require_context))
    if r.require_tps is not None and r.require_tps <= 0:
        raise UsageError(msg("--require-tps must be positive, got %(require_tps)s",
                             require_tps=Num(r.require_tps, "g")))


def _requirements(r: PlanRequest):
    """The gate's requirements when any gate option is given (else None: plain verdict exit codes)."""
    if not (r.require_context or r.require_tps or r.strict or r.min_margin_bytes):
        return None
    from fitprobe.estimator.gate import Requirements

    return Requirements(context=r.require_context, tps=r.require_tps, min_margin_bytes=r.min_margin_bytes,
                        strict=r.strict)


def _settings(fmt, hw, r: PlanRequest, context: int):
    from fitprobe.app import default_engine
    from fitprobe.estimator.settings import RunSettings

    engine = r.engine or default_engine(fmt, hw)
    kv = r.kv_cache or ("auto" if engine in ("vllm", "sglang") else "f16")
    try:
        return RunSettings(quant=fmt.name, context=context, kv_cache_dtype=kv, batch=r.batch, engine=engine,
                           ubatch=r.ubatch, flash_attention=r.flash_attention, gpu_layers=r.gpu_layers,
                           gpu_memory_utilization=r.gpu_util)
    except ValueError as exc:  # a bound or choice RunSettings checks
        raise UsageError(msg("invalid setting: %(exc)s", exc=exc)) from None


def _attach_verify(sized, tool_path: str | None) -> None:
    """--verify: llama.cpp's own fitter on this model and quant (a local GGUF, or a sparse one written
    from the model description), beside fitprobe's plan."""
    from fitprobe.verify import find_tool, verify_plan

    tool = find_tool(tool_path)
    if tool is None:
        raise UsageError(msg("--verify needs llama-fit-params on PATH or --llama-fit-params PATH"))
    sized.output.verify = verify_plan(tool, sized.launch_input)


def _judge_right_now(sized, min_margin: int, requirements, gate_on: str) -> None:
    """The recommended command against the memory free right now (other processes counted); when it
    does not fit, the deployment that does (`recommended_now`, planned on free memory). With gate
    requirements judged right now, the gate's subject is the command that runs now: the recommended
    one when it fits now, else `recommended_now` (a busy GPU with no plan that fits fails the gate)."""
    from fitprobe.app import deployment, error_band, verdict_info
    from fitprobe.estimator.gate import evaluate
    from fitprobe.estimator.launch import LaunchInput, plan_all, sized_on
    from fitprobe.estimator.plan import Sizer

    inp, out = sized.launch_input, sized.output
    if not any(d.free_bytes is not None for d in inp.hw.devices) and inp.hw.ram_available_bytes is None:
        return  # nothing is known about "now": the idle verdict and gate stand
    engine = inp.settings.engine
    plan_ = out.launch[engine]
    fmt, hw = sized_on(inp, plan_)
    sizer = Sizer(inp.spec, inp.table, hw, error_band=error_band(), min_margin_bytes=min_margin,
                  known_weights=inp.sizer.known)
    _, verdict, _ = sizer.size(fmt, plan_.settings, now=True)
    out.verdict_now = verdict_info(verdict, sizer.band(fmt, plan_.settings.engine), sizer.spread(fmt))
    subject = replace(plan_, status=verdict.status, fits=verdict.status != "exceeds", margin_bytes=verdict.margin_bytes)
    if verdict.status == "exceeds":
        now = LaunchInput(**{**inp.__dict__, "now": True})
        alt = plan_all(now, [engine])[engine]
        if alt.fits:
            out.recommended_now = deployment(alt, now)
            subject = alt
    if requirements is not None and gate_on == "now":
        gate = evaluate(requirements, subject)
        out.gate = replace(gate, on="now", subject="recommended_now" if subject is not plan_ and
                           out.recommended_now is not None else gate.subject)


def fit(request, *, probe_result: Probed | None = None, subjects=None, source: str = "bundled catalog",
        command: str = "fit"):
    """Which models run on the hardware, ranked: fitprobe.fitting.FitRun (its `output` is the FitOutput
    contract) for a fitprobe.fitting.FitRequest. `subjects` replaces the bundled catalog (the CLI's --hub
    listing)."""
    from fitprobe.app import catalog_hardware
    from fitprobe.catalogs.model_uses import USE_CASES
    from fitprobe.estimator.rank import SORTS
    from fitprobe.fitting import FitOptions, catalog_subjects, run_fit

    r = request
    checks = [(r.min_ctx is not None and r.min_ctx <= 0, f"--min-ctx must be a positive number of tokens, got "
                                                          f"{r.min_ctx}"),
              (r.min_tps is not None and r.min_tps <= 0, f"--min-tps must be positive, got {r.min_tps}"),
              (r.max_params is not None and r.max_params <= 0,
               "--max-params must be positive (billions of parameters)"),
              (r.limit is not None and r.limit < 1, "--limit must be at least 1"),
              (not 0 < r.usable_fraction <= 1, "--usable must be a fraction in (0, 1]"),
              (r.ram_gib is not None and r.ram_gib <= 0, "--ram-gib must be positive"),
              (r.sort not in SORTS, f"--sort must be one of: {', '.join(SORTS)}"),
              (r.use_case is not None and r.use_case not in USE_CASES,
               f"--use-case must be one of: {', '.join(USE_CASES)}")]
    for failed, message in checks:
        if failed:
            raise UsageError(message)
    ram = int(r.ram_gib * GIB) if r.ram_gib else None
    if r.gpu:
        hw = catalog_hardware(r.gpu, r.gpus, usable_fraction=r.usable_fraction, ram_bytes=ram, memory_gib=r.memory_gib)
        if not hw.devices and hw.system_ram_bytes is None:
            raise UsageError(msg("--gpu cpu sizes on system RAM: pass --ram-gib"))
    else:
        hw = replace((probe_result or probed()).hardware, usable_fraction=r.usable_fraction)
        if ram:
            hw = replace(hw, system_ram_bytes=ram)
    options = FitOptions(min_ctx=r.min_ctx, min_tps=r.min_tps, use_case=r.use_case, engine=r.engine, family=r.family,
                         max_params_b=r.max_params, include_all=r.include_all, sort=r.sort, limit=r.limit,
                         min_margin_bytes=r.min_margin_bytes)
    return run_fit(catalog_subjects() if subjects is None else subjects, hw, opts=options,
                   hardware_source="catalog" if r.gpu else "probe", source=source, command=command)
