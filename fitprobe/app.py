"""Glue between the CLI and the pure core: resolve names, build Hardware, size, fill the contract."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import date
from functools import lru_cache

from fitprobe.catalogs.gpus import match_gpus, needs_memory_size, suggest_gpus
from fitprobe.catalogs.quants import quant_table
from fitprobe.catalogs.resolve import ResolvedModel, native_format
from fitprobe.errors import UsageError  # noqa: F401  (re-exported: bad option values, exit code 2)
from fitprobe.estimator.fields import asdict, replace
from fitprobe.estimator.hardware import Device, Hardware
from fitprobe.estimator.message import Num, join, msg
from fitprobe.estimator.plan import PlanResult, Sizer, row_settings
from fitprobe.estimator.quant import QuantFormat
from fitprobe.estimator.settings import ENGINE_KV_DTYPES, MIN_CUDA_CC, RunSettings, too_old_for
from fitprobe.estimator.tensors import param_counts
from fitprobe.i18n import N_

from . import schema


@lru_cache(maxsize=1)
def error_band():
    """The measured error band (per component) that separates 'tight' from 'fits'."""
    from fitprobe.catalogs import data_path
    from fitprobe.estimator.verdict import ErrorBand

    data = json.loads(data_path("error_band.json").read_text())
    p90 = data["p90_abs_error"]
    engines = {name: ErrorBand(weights=b["weights"], kv_cache=b["kv_cache"], buffers=b["buffers"])
               for name, b in (data.get("engines") or {}).items()}
    return ErrorBand(weights=p90["weights"], kv_cache=p90["kv_cache"], buffers=p90["buffers"], engines=engines)


CPU_NAMES = ("cpu", "none", "cpu-only")


def is_cpu(gpu: str | None) -> bool:
    return bool(gpu) and gpu.strip().lower() in CPU_NAMES


def catalog_hardware(gpu: str, count: int, *, usable_fraction: float, ram_bytes: int | None,
                     memory_gib: float | None = None) -> Hardware:
    """Hardware named by the user: `count` identical catalog devices (or CPU only). `memory_gib`
    overrides a catalog device's memory, or describes a device the catalog does not know."""
    if is_cpu(gpu):
        return Hardware(devices=[], system_ram_bytes=ram_bytes, usable_fraction=usable_fraction)
    if count < 1:
        raise UsageError(msg("--gpus must be at least 1"))
    if memory_gib is not None and memory_gib <= 0:
        raise UsageError(msg("--memory-gib must be positive"))
    hits = match_gpus(gpu)
    memory = int(memory_gib * (1 << 30)) if memory_gib else None
    if memory_gib and len(hits) > 1:  # '--gpu "M4 Max" --memory-gib 36' names the 36 GB variant
        hits = [e for e in hits if e.memory_gib == memory_gib] or hits
    if len(hits) > 1 or (needs_memory_size(gpu, hits) and not memory_gib):
        names = ", ".join(e.name for e in hits)
        raise UsageError(msg("'%(gpu)s' is ambiguous: %(names)s; name one, with its memory size", gpu=gpu.strip(),
                             names=names) if len(hits) > 1
                         else msg("'%(gpu)s' needs a memory size (in the catalog: %(names)s)", gpu=gpu.strip(),
                                  names=names))
    entry = hits[0] if hits else None
    if entry is None and memory is None:
        hint = suggest_gpus(gpu)
        raise UsageError(msg("unknown GPU '%(gpu)s'; did you mean: %(hint)s? (fitprobe list gpus, or describe it with "
                             "--memory-gib)", gpu=gpu, hint=", ".join(hint)) if hint else
                         msg("unknown GPU '%(gpu)s' (fitprobe list gpus, or describe it with --memory-gib)", gpu=gpu))
    if entry is None:
        device = Device(name=gpu.strip(), memory_bytes=memory)  # no bandwidth known: speed is not estimated
    elif entry.memory_gib is None and memory is None:
        raise UsageError(msg("the catalog has no memory size for %(name)s: pass --memory-gib", name=entry.name))
    else:
        device = entry.device(memory_bytes=memory)
        count *= entry.devices_per_board  # a dual-chip board is two devices to the software
    return Hardware(devices=[device] * count, system_ram_bytes=ram_bytes, usable_fraction=usable_fraction,
                    cpu_arch="apple" if device.kind == "apple" else None)  # a Mac's CPU cores


def require_known_ram(sized: Sized, hw: Hardware) -> None:
    """A CPU-only plan is judged on system RAM alone: without a RAM size there is no verdict, so
    say what the plan needs and how to get one (a usage error, exit 2) rather than 'does not fit'."""
    if hw.devices or hw.system_ram_bytes is not None:
        return
    m = sized.result.memory
    need = (m.total_bytes + m.host_total_bytes) / (1 << 30)
    raise UsageError(msg("system RAM unknown: this CPU-only plan needs %(need)s GiB of RAM; pass --ram-gib N for a "
                         "verdict (check --gpu cpu uses this machine's RAM)", need=Num(need, ".1f")))


def pick_format(resolved: ResolvedModel, quant: str | None, engine: str | None = None,
                hw: Hardware | None = None) -> QuantFormat:
    """The format asked, else the model's default: a pre-quantized Hub checkpoint as it is, the
    checkpoint itself for vLLM/SGLang and on Gaudi (what their command loads), gpt-oss's native MXFP4, Q4_K_M GGUF
    otherwise."""
    table = quant_table()
    name = quant or resolved.requested_quant
    gaudi = hw is not None and any(d.kind == "hpu" for d in hw.devices)
    if name is None and (engine in ("vllm", "sglang") or gaudi
                         or resolved.entry is None and resolved.spec.prequant is not None):
        name = "native"
    if name is None and resolved.spec.prequant is not None and resolved.spec.prequant.method == "mxfp4":
        name = "MXFP4"  # gpt-oss: MXFP4 experts as released, which its GGUF conversions keep
    name = name or "Q4_K_M"
    for fmt in resolved.extra_formats:
        if fmt.name.lower() == name.lower():
            return fmt
    if name.lower() == "native":
        name = native_format(resolved.spec)
    fmt = table.find(name)
    if fmt is None:
        names = ", ".join(f.name for f in table.formats)
        raise UsageError(msg("unknown quantization '%(name)s' (choose from: %(names)s)", name=name, names=names))
    return fmt


def default_engine(fmt: QuantFormat, hw: Hardware) -> str:
    """llama.cpp for GGUF formats; checkpoint formats need vLLM (MLX on Apple for 16-bit)."""
    apple = any(d.kind == "apple" for d in hw.devices)
    if any(d.kind == "hpu" for d in hw.devices):
        return "vllm"
    if fmt.kind == "mlx":
        return "mlx"
    if fmt.kind == "gguf":
        return "llama.cpp"
    if apple:
        return "mlx"
    return "vllm" if hw.devices else "llama.cpp"


MAX_CONTEXT = 1 << 27  # 134M tokens: far beyond any model's positions; larger is a typo
MAX_SEQUENCES = 65_536
MAX_DEVICES = 4_096


def check_settings(st: RunSettings, fmt: QuantFormat, hw: Hardware) -> None:
    if st.context > MAX_CONTEXT:
        raise UsageError(msg("--ctx %(context)s is not a possible context (at most %(max_context)s tokens)",
                             context=Num(st.context, ","), max_context=Num(MAX_CONTEXT, ",")))
    if st.batch > MAX_SEQUENCES:
        raise UsageError(msg("--batch %(batch)s concurrent sequences is not plausible (at most %(max_sequences)s)",
                             batch=Num(st.batch, ","), max_sequences=Num(MAX_SEQUENCES, ",")))
    if len(hw.devices) > MAX_DEVICES:
        raise UsageError(msg("%(n_devices)s GPUs is not plausible (at most %(max_devices)s)",
                             n_devices=Num(len(hw.devices), ","), max_devices=Num(MAX_DEVICES, ",")))
    if not hw.devices and st.engine in ("vllm", "sglang", "mlx"):
        raise UsageError(msg("%(engine)s needs a GPU and this plan has none: use --engine llama.cpp or ollama for CPU",
                             engine=st.engine))
    allowed = ENGINE_KV_DTYPES[st.engine]
    if st.kv_cache_dtype not in allowed:
        raise UsageError(msg("%(engine)s does not support KV cache type '%(kv_cache_dtype)s' (it takes: %(allowed)s)",
                             engine=st.engine, kv_cache_dtype=st.kv_cache_dtype, allowed=', '.join(allowed)))
    if fmt.kind == "mlx" and st.engine != "mlx":
        raise UsageError(msg("%(name)s is MLX's own format: use --engine mlx, or a GGUF quant for %(engine)s",
                             name=fmt.name, engine=st.engine))
    if fmt.kind == "checkpoint" and st.engine in ("llama.cpp", "ollama"):
        raise UsageError(msg("%(engine)s cannot load %(name)s checkpoints; use --engine vllm or a GGUF quant",
                             engine=st.engine, name=fmt.name))
    if st.engine in ("mlx",) and hw.devices and not all(d.kind == "apple" for d in hw.devices):
        raise UsageError(msg("MLX runs on Apple silicon only"))
    if any(d.kind == "hpu" for d in hw.devices) and (st.engine != "vllm" or fmt.kind not in ("native", "checkpoint")):
        raise UsageError(msg("Intel Gaudi runs vLLM (vllm-gaudi) with checkpoint formats only: %(engine)s with "
                             "%(name)s has no Gaudi backend (use --engine vllm and --quant BF16 or FP8)",
                             engine=st.engine, name=fmt.name))
    if st.engine in ("vllm", "sglang") and any(d.kind == "apple" for d in hw.devices):
        raise UsageError(msg("%(engine)s does not run on Apple silicon; use llama.cpp or mlx", engine=st.engine))
    old = too_old_for(st.engine, hw)
    if old:
        raise UsageError(msg("%(engine)s needs an NVIDIA GPU of compute capability %(cc)s or newer; %(gpu)s is older: "
                             "use llama.cpp or ollama", engine=st.engine, cc=MIN_CUDA_CC[st.engine], gpu=old))
    if st.kv_cache_dtype in ("q8_0", "q4_0") and st.engine in ("llama.cpp", "ollama") and not st.flash_attention:
        raise UsageError(msg("a quantized V cache needs flash attention in llama.cpp (drop --no-flash-attn)"))


@dataclass
class Sized:
    result: PlanResult  # the settings as asked: the matrix, the scaling table, the diagnosis
    output: schema.PlanOutput  # leads with the recommended deployment
    launch_input: object = None  # estimator.launch.LaunchInput the launch plans were built from


def size_plan(command: str, resolved: ResolvedModel, fmt: QuantFormat, st: RunSettings, hw: Hardware, *,
              min_margin_bytes: int = 0, hardware_source: str = "catalog", now: bool = False,
              device_readings: list[dict] | None = None, engine_option: str | None = None,
              kv_explicit: bool = False, requirements=None, longest_context: bool = False) -> Sized:
    """Size the request as asked, plan every engine's command, and answer with the recommended
    deployment: the asked engine's launch plan, whose settings, memory, verdict and speed fill the
    top of the output (what was asked stays in `asked` when it differs)."""
    from fitprobe.estimator.launch import engines_for, plan_all

    band = error_band()
    sizer = Sizer(resolved.spec, quant_table(), hw, error_band=band, min_margin_bytes=min_margin_bytes,
                  known_weights=resolved.known_weights)
    formats = list(quant_table().formats) + resolved.extra_formats
    result = sizer.plan(fmt, st, formats=formats, now=now)
    inp = launch_input(resolved, fmt, st, hw, sizer, kv_explicit=kv_explicit, now=now,
                       longest_context=longest_context)
    engines = engines_for(hw, engine_option)
    if st.engine not in engines:
        engines.append(st.engine)
    launch = plan_all(inp, engines)
    subject = launch[st.engine]
    rec_st, rec = subject.settings, subject.sized
    rec_fmt = find_format(subject.quant, formats) or fmt
    weights_source = sizer.weights(rec_fmt)[1]
    out = schema.PlanOutput(
        command=command,
        model=model_info(resolved),
        recommended=deployment(subject, inp),
        settings=settings_info(rec_st),
        hardware=hardware_info(hw, rec_st, hardware_source, now=now, readings=device_readings),
        memory=memory_info(rec.mem, weights_source),
        verdict=verdict_info(rec.verdict, sizer.band(rec_fmt, rec_st.engine), sizer.spread(rec_fmt)),
        asked=asked_info(st, result, subject, sizer.band(fmt, st.engine), sizer.spread(fmt)),
        matrix=result.matrix, scaling=result.scaling, launch=launch, speed=subject.speed,
        notes=list(dict.fromkeys(resolved.notes + subject.notes + _format_notes(rec_fmt, weights_source)
                                 + _ram_notes(hw, rec.mem) + _driver_total_notes(hw, rec_st))),
    )
    if subject.speed is None and hw.devices and subject.command:
        out.notes.append(msg("speed not estimated: a device has no bandwidth figure in the catalog"))
    if result.verdict.status == "exceeds" or not subject.fits:
        from fitprobe.estimator.fixes import find_fixes

        out.fixes = find_fixes(inp)
    if requirements is not None:
        from fitprobe.estimator.gate import evaluate

        out.gate = evaluate(requirements, subject)
    return Sized(result=result, output=out, launch_input=inp)


def _driver_total_notes(hw: Hardware, st: RunSettings) -> list[str]:
    """vLLM and SGLang take their share of what CUDA reports as total, not of the nominal size: say so."""
    if st.engine not in ("vllm", "sglang"):
        return []
    notes = []
    for d in {d.name: d for d in hw.devices if d.driver_total_bytes}.values():
        notes.append(msg("%(engine)s sizes its share on the %(total)s GiB CUDA reports as %(gpu)s's total (%(physical)s "
                         "GiB physical, less the driver's reserve)", engine=st.engine,
                         total=Num(d.driver_total_bytes / (1 << 30), ".2f"), gpu=d.name,
                         physical=Num(d.memory_bytes / (1 << 30), "g")))
    return notes


def find_format(name: str, formats: list[QuantFormat]) -> QuantFormat | None:
    return next((f for f in formats if f.name == name), None)


def launch_input(resolved: ResolvedModel, fmt: QuantFormat, st: RunSettings, hw: Hardware, sizer: Sizer, *,
                 kv_explicit: bool = False, now: bool = False, longest_context: bool = False):
    from fitprobe.catalogs.speed_calibration import load_calibration
    from fitprobe.estimator.launch import LaunchInput

    path = resolved.source.removeprefix("local GGUF ") if resolved.source.startswith("local GGUF ") else None
    local = path or (resolved.source.removeprefix("local ") if resolved.source.startswith("local ") else None)
    return LaunchInput(spec=resolved.spec, fmt=fmt, settings=st, hw=hw, sizer=sizer, table=quant_table(),
                       calibration=load_calibration(), hf_id=resolved.spec.hf_id, gguf_repo=resolved.gguf_repo, gguf_path=path,
                       model_path=os.path.dirname(local) if local and local.endswith(".json") else local,
                       refs=model_refs(resolved), ollama_name=resolved.entry.ollama if resolved.entry else None,
                       kv_explicit=kv_explicit, now=now, longest_context=longest_context)


def model_refs(resolved: ResolvedModel):
    """The catalog's download facts, plus the GGUF repo a Hub listing showed (its quants are real)."""
    from fitprobe.estimator.launch.refs import GgufRepoRef, ModelRefs

    refs = resolved.entry.refs if resolved.entry and resolved.entry.refs else ModelRefs()
    if resolved.gguf_repo and resolved.source.startswith("Hugging Face"):
        table = quant_table()
        quants = [name for name in resolved.known_weights if (f := table.find(name)) and f.kind == "gguf"]
        listed = GgufRepoRef(repo=resolved.gguf_repo, quants=quants, source="Hub file listing",
                             seen=date.today().isoformat())
        refs = ModelRefs(gguf=[listed, *refs.gguf], ollama=refs.ollama, mlx=refs.mlx, checkpoints=refs.checkpoints)
    return refs


def settings_info(st: RunSettings) -> schema.SettingsInfo:
    fields = asdict(st)
    fields["tensor_split"] = list(st.tensor_split) if st.tensor_split else None
    return schema.SettingsInfo(**fields)


def deployment(plan, inp) -> schema.Deployment:
    """The recommended deployment: the asked engine's launch plan, and how it differs from the request."""
    sp = plan.speed
    return schema.Deployment(
        engine=plan.engine, quant=plan.quant, context=plan.context, kv_cache_dtype=plan.kv_cache_dtype,
        batch=plan.settings.batch, gpu_layers=plan.gpu_layers, cpu_moe_layers=plan.cpu_moe_layers,
        tensor_split=plan.tensor_split, tensor_parallel=plan.tensor_parallel, pipeline_parallel=plan.pipeline_parallel,
        nodes=plan.nodes, status=plan.status, margin_bytes=plan.margin_bytes, total_bytes=plan.total_bytes,
        host_bytes=plan.host_bytes, max_context=plan.max_context,
        decode_tps=round(sp.decode_tps, 2) if sp else None,
        prefill_tps=round(sp.prefill_tps, 1) if sp and sp.prefill_tps else None,
        command=plan.command, changes=changes_from_asked(plan, inp))


def changes_from_asked(plan, inp) -> list[str]:
    """What the recommended plan changes of the request, in words (empty when it runs as asked)."""
    from fitprobe.estimator.launch.common import cap_context, ctx_text, gib

    asked, out = inp.settings, []
    if plan.quant != asked.quant:
        out.append(msg("%(quant)s instead of %(asked)s (%(engine)s loads %(quant)s)", quant=plan.quant,
                       asked=asked.quant, engine=plan.engine))
    want = cap_context(inp, asked, plan.engine)[0].context if not inp.longest_context else None
    if want is not None and plan.context != asked.context:
        out.append(msg("context %(context)s instead of %(asked)s", context=ctx_text(plan.context),
                       asked=ctx_text(asked.context)))
    if plan.kv_cache_dtype != asked.kv_cache_dtype and asked.kv_cache_dtype != "auto":
        out.append(msg("%(kv)s KV cache instead of %(asked)s", kv=plan.kv_cache_dtype, asked=asked.kv_cache_dtype))
    if plan.cpu_moe_layers:
        out.append(msg("routed experts of %(blocks)s blocks in RAM (--n-cpu-moe), %(size)s in RAM",
                       blocks=plan.cpu_moe_layers, size=gib(plan.host_bytes)))
    elif plan.gpu_layers is not None and inp.hw.devices and plan.gpu_layers < inp.spec.n_layers + 1 \
            and plan.engine in ("llama.cpp", "ollama"):
        out.append(msg("-ngl %(ngl)s: %(layers)s layers run from RAM (%(size)s in RAM)", ngl=plan.gpu_layers,
                       layers=inp.spec.n_layers + 1 - plan.gpu_layers, size=gib(plan.host_bytes)))
    offload = next((f.value for f in plan.flags if f.flag == "--cpu-offload-gb"), None)
    if offload:
        out.append(msg("--cpu-offload-gb %(gb)s: weights cross PCIe every step", gb=offload))
    if plan.tensor_parallel < len(inp.hw.devices) and plan.engine in ("vllm", "sglang"):
        out.append(msg("uses %(used)s of %(total)s GPUs", used=plan.tensor_parallel * plan.pipeline_parallel,
                       total=len(inp.hw.devices)))
    return out


def asked_info(st: RunSettings, result: PlanResult, plan, band, spread=None) -> schema.AskedInfo | None:
    """The request as asked, when the recommended plan differs from it (settings or verdict)."""
    same = (plan.quant == st.quant and plan.context == st.context and plan.kv_cache_dtype == st.kv_cache_dtype
            and not plan.cpu_moe_layers and result.verdict.status == plan.status
            and (st.gpu_layers is None or st.gpu_layers == plan.gpu_layers))
    if same:
        return None
    m = result.memory
    return schema.AskedInfo(settings=settings_info(st), verdict=verdict_info(result.verdict, band, spread),
                            total_bytes=m.total_bytes, host_bytes=m.host_total_bytes)


def verdict_info(verdict, band: float | None = None, spread=None) -> schema.VerdictInfo:
    """`band` is the one the verdict was judged with; `spread` (estimator.spread.WeightSpread) says why it
    is wider than the measured one, for a format sized approximately."""
    return schema.VerdictInfo(error_band=float(error_band() if band is None else band), status=verdict.status,
                              margin_bytes=verdict.margin_bytes, utilization=verdict.utilization,
                              reason=verdict.reason, limiting=verdict.limiting,
                              uncertainty_bytes=verdict.uncertainty_bytes,
                              weights_spread=round(spread.excess, 4) if spread else 0.0,
                              band_note=spread.text() if spread else "")


def _ram_notes(hw: Hardware, mem) -> list[str]:
    """Say when host-side needs went unchecked because system RAM is unknown."""
    host = mem.host_total_bytes
    unified = bool(hw.devices) and all(d.unified_memory for d in hw.devices)
    if hw.system_ram_bytes is None and not unified and host > (1 << 30):
        return [msg("system RAM not given: the %(size)s GiB held in RAM was not checked (pass --ram-gib)",
                    size=Num(host / (1 << 30), ".1f"))]
    return []


def _format_notes(fmt: QuantFormat, weights_source: str) -> list[str]:
    if fmt.approximate and weights_source.startswith("approximate"):
        return [f"{fmt.name}: {fmt.source}"]
    return []


def model_info(r: ResolvedModel) -> schema.ModelInfo:
    spec = r.spec
    p = param_counts(spec)
    return schema.ModelInfo(
        id=spec.name, hf_id=spec.hf_id, source=r.source, architecture=spec.architecture, params_total=p.total,
        params_text=p.text, params_active=p.active, params_vision=p.vision, n_layers=spec.n_layers,
        max_context=spec.max_context, attention=attention_summary(spec),
        published_params=r.entry.published_params if r.entry else None,
    )


ATTENTION_KINDS = {  # layer kind -> how the summary counts it ("GQA: 40 full, 40 sliding-window (4096)")
    "full": N_("%(n)s full"), "sliding": N_("%(n)s sliding-window"), "chunked": N_("%(n)s chunked"),
    "compressed": N_("%(n)s compressed (V4)"), "linear": N_("%(n)s linear (gated delta)"), "mamba": N_("%(n)s Mamba"),
    "conv": N_("%(n)s short-conv")}


def attention_summary(spec) -> str:
    """The attention layout as a sentence (English in the JSON, translated where it is shown)."""
    parts = []
    for kind, label in ATTENTION_KINDS.items():
        n = spec.count(kind)
        if n:
            window = next((layer.window for layer in spec.layers if layer.attention == kind and layer.window), None)
            part = msg(label, n=n)
            parts.append(msg("%(layers)s (%(window)s)", layers=part, window=str(window)) if window else part)
    head = "MLA" if spec.mla else ("MHA" if spec.n_kv_heads == spec.n_heads else "MQA" if spec.n_kv_heads == 1 else "GQA")
    if spec.moe:
        return msg("%(head)s, MoE %(used)s/%(experts)s: %(layers)s", head=head, used=str(spec.moe.n_experts_used),
                   experts=str(spec.moe.n_experts), layers=join(parts, ", "))
    return msg("%(head)s: %(layers)s", head=head, layers=join(parts, ", "))


def hardware_info(hw: Hardware, st: RunSettings, source: str, *, now: bool,
                  readings: list[dict] | None = None) -> schema.HardwareInfo:
    from fitprobe.estimator.memory import engine_usable_bytes

    devices = []
    for i, d in enumerate(hw.devices):
        devices.append(schema.DeviceInfo(
            name=d.name, memory_bytes=d.memory_bytes, driver_total_bytes=d.driver_total_bytes,
            usable_bytes=engine_usable_bytes(hw, d, st, now=now),
            free_bytes=d.free_bytes, bandwidth_gbs=d.bandwidth_gbs, catalog_key=d.catalog_key,
            readings=(readings[i] if readings and i < len(readings) else {})))
    return schema.HardwareInfo(
        name=hw.name, count=len(hw.devices), memory_bytes=sum(d.memory_bytes for d in hw.devices),
        usable_bytes=sum(d.usable_bytes for d in devices) if devices else int((hw.system_ram_bytes or 0) * hw.usable_fraction),
        usable_fraction=hw.usable_fraction, system_ram_bytes=hw.system_ram_bytes, source=source, devices=devices)


def memory_info(m, weights_source: str) -> schema.MemoryInfo:
    kv = m.kv
    return schema.MemoryInfo(
        weights_bytes=m.weights_bytes, kv_cache_bytes=m.kv_cache_bytes, buffers_bytes=m.buffers_bytes,
        total_bytes=m.total_bytes, host_weights_bytes=m.host_weights_bytes, host_kv_cache_bytes=m.host_kv_cache_bytes,
        host_buffers_bytes=m.host_buffers_bytes, model_file_bytes=m.model_file_bytes,
        weights_source=weights_source, gpu_layers=m.gpu_layers,
        kv_detail={"full": kv.full, "windowed": kv.windowed, "latent": kv.latent, "indexer": kv.indexer,
                   "recurrent": kv.recurrent, "cells_full": kv.cells_full, "cells_window": kv.cells_window},
        per_device=m.per_device)


def fill_report(sized: Sized, resolved: ResolvedModel, fmt: QuantFormat, st: RunSettings, hw: Hardware, *,
                cost_options=None, finetune_options=None, ram_bandwidth_gbs: float | None = None) -> None:
    """Fill the report-only fields: cost, fine-tuning, recommendations, diagnosis (speed is always filled)."""
    from fitprobe.catalogs.cloud import load_offers
    from fitprobe.catalogs.gpus import load_gpus
    from fitprobe.estimator import cost as costs
    from fitprobe.estimator.diagnosis import diagnose
    from fitprobe.estimator.finetune import Finetune, FinetuneOptions, devices_needed, finetune_memory
    from fitprobe.estimator.recommend import Candidate, Pick, Recommender
    from fitprobe.estimator.speed import estimate_speed

    band, table, spec = error_band(), quant_table(), resolved.spec
    calibration = sized.launch_input.calibration
    sizer = sized.launch_input.sizer  # the plan's own sizer: its weights are already computed
    weights = sizer.weights(fmt)
    out = sized.output

    def speed_fn(spec_, w, st_, hw_, mem):
        return estimate_speed(spec_, w, st_, hw_, mem, calibration=calibration, ram_bandwidth_gbs=ram_bandwidth_gbs)

    rec = Recommender(spec, table, fmt, st, error_band=band, weights=weights, usable_fraction=hw.usable_fraction,
                      speed_fn=speed_fn)
    entries = {e.key: e for e in load_gpus()}
    # cloud offers: the model at these settings on each instance, cost per 1M output tokens
    copts = cost_options or costs.CostOptions()
    offers, sized_offers = [], {}
    for o in load_offers():
        entry = entries[o.gpu_key]
        if entry.memory_gib is None:
            continue
        engine, mem, verdict, _ = rec.size(entry.device(), o.gpu_count)
        if verdict is None:
            continue
        tps = usd = None
        if verdict.status != "exceeds" and entry.bandwidth_gbs:
            st_o = replace(st, engine=engine)
            hw_o = Hardware(devices=[entry.device()] * o.gpu_count, usable_fraction=hw.usable_fraction)
            tps = speed_fn(spec, weights[0], st_o, hw_o, mem).aggregate_tps
            usd = costs.usd_per_million(o.price_per_hour_usd, tps)
        sized_offers[(o.provider, o.instance)] = (mem, verdict)
        offers.append(costs.OfferCost(
            provider=o.provider, instance=o.instance, gpu_key=o.gpu_key, gpu_count=o.gpu_count,
            tier=o.tier, price_per_hour_usd=o.price_per_hour_usd, date_checked=o.date_checked,
            source=o.source, status=verdict.status, aggregate_tps=tps, usd_per_million_tokens=usd,
            monthly_usd=o.price_per_hour_usd * copts.hours_per_day * costs.DAYS_PER_MONTH))
    offers.sort(key=lambda x: (x.status == "exceeds", x.usd_per_million_tokens is None,
                               x.usd_per_million_tokens or 0, x.price_per_hour_usd))
    best = costs.cheapest(offers)
    dev0 = hw.devices[0] if hw.devices else None
    entry0 = entries.get(dev0.catalog_key or "") if dev0 else None
    out.cost = costs.Cost(offers=offers, cheapest=best, options=copts, rent_vs_buy=costs.rent_vs_buy(
        copts, catalog_price=(entry0.used_price_usd or entry0.price_usd) if entry0 else None,
        price_basis=(entry0.price_basis or "") if entry0 else "", tdp_w=dev0.tdp_w if dev0 else None,
        devices=len(hw.devices), best=best, local_tps=out.speed.aggregate_tps if out.speed else None))
    # fine-tuning memory, on the plan's devices and the smallest catalog device
    fopts = finetune_options or FinetuneOptions()
    methods = finetune_memory(spec, fopts)
    ranked = sorted((e for e in entries.values() if e.memory_gib), key=lambda e: e.memory_gib)
    for m in methods:
        if dev0 is not None:
            usable = hw.usable_bytes(dev0)
            m.fits = m.total_bytes <= usable * len(hw.devices) and (len(hw.devices) > 1 or m.total_bytes <= usable)
            m.devices_needed = devices_needed(m, usable)
        small = next((e for e in ranked if m.total_bytes <= hw.usable_bytes(e.device())), None)
        m.smallest_gpu = small.name if small else None
    out.finetune = Finetune(options=fopts, methods=methods)
    # recommended hardware
    candidates = [Candidate(key=e.key, device=e.device(), price_usd=e.price_usd, used_price_usd=e.used_price_usd,
                            price_basis=e.price_basis) for e in ranked if e.devices_per_board == 1]
    picks = rec.picks(candidates)
    if best is not None:
        mem_b, verdict_b = sized_offers[(best.provider, best.instance)]
        picks.insert(min(3, len(picks)), Pick(
            role=msg("cheapest cloud"), hardware=f"{best.provider} {best.instance}", gpu_key=best.gpu_key,
            count=best.gpu_count, engine=st.engine, status=best.status,
            total_bytes=mem_b.total_bytes + mem_b.host_total_bytes, usable_bytes=verdict_b.usable_bytes,
            decode_tps=best.aggregate_tps, usd_per_million_tokens=best.usd_per_million_tokens,
            note=msg("$%(price)s/h, %(tier)s, checked %(date)s", price=Num(best.price_per_hour_usd, ".2f"),
                     tier=best.tier, date=best.date_checked)))
    out.recommendations = picks
    # decode speed per quantization-matrix row (report only: `plan` does not estimate 40-odd speeds)
    formats = list(table.formats) + resolved.extra_formats
    for row in out.matrix:
        row_fmt = find_format(row.quant, formats)
        if row_fmt is None or row.note:
            continue
        row_st = row_settings(st, row_fmt)
        row_mem, _, _ = sizer.size(row_fmt, row_st)
        row.decode_tps = speed_fn(spec, sizer.weights(row_fmt)[0], row_st, hw, row_mem).decode_tps
    multi = next((p for p in picks if p.role == "smallest multi-GPU set"), None)
    out.diagnosis = diagnose(sizer, fmt, st, sized.result, model=spec.name, hardware=hw.name,
                             decode_tps=out.speed.decode_tps if out.speed else None,
                             multi_gpu=multi.hardware if multi else None)
