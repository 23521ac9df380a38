"""Glue between the CLI and the pure core: resolve names, build Hardware, size, fill the contract."""
from __future__ import annotations

import json
from dataclasses import dataclass

from fitprobe.catalogs.gpus import find_gpu, suggest_gpus
from fitprobe.catalogs.quants import quant_table
from fitprobe.catalogs.resolve import ResolvedModel, native_format
from fitprobe.estimator.hardware import Hardware
from fitprobe.estimator.plan import PlanResult, Sizer
from fitprobe.estimator.quant import QuantFormat
from fitprobe.estimator.settings import ENGINE_KV_DTYPES, RunSettings
from fitprobe.estimator.tensors import param_counts

from . import schema

class UsageError(ValueError):
    """Bad option values (exit code 2)."""


def error_band() -> float:
    from fitprobe.catalogs import data_path

    return float(json.loads(data_path("error_band.json").read_text())["total_p90_abs_error"])


def catalog_hardware(gpu: str, count: int, *, usable_fraction: float, ram_bytes: int | None) -> Hardware:
    """Hardware named by the user: `count` identical catalog devices (or CPU only)."""
    if gpu.strip().lower() in ("cpu", "none", "cpu-only"):
        return Hardware(devices=[], system_ram_bytes=ram_bytes, usable_fraction=usable_fraction)
    entry = find_gpu(gpu)
    if entry is None:
        hint = suggest_gpus(gpu)
        raise UsageError(f"unknown GPU '{gpu}'" + (f"; did you mean: {', '.join(hint)}?" if hint else ""))
    if count < 1:
        raise UsageError("--gpus must be at least 1")
    try:
        device = entry.device()
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return Hardware(devices=[device] * count, system_ram_bytes=ram_bytes, usable_fraction=usable_fraction)


def pick_format(resolved: ResolvedModel, quant: str | None) -> QuantFormat:
    table = quant_table()
    name = quant or resolved.requested_quant or "Q4_K_M"
    for fmt in resolved.extra_formats:
        if fmt.name.lower() == name.lower():
            return fmt
    if name.lower() == "native":
        name = native_format(resolved.spec)
    fmt = table.find(name)
    if fmt is None:
        names = ", ".join(f.name for f in table.formats)
        raise UsageError(f"unknown quantization '{name}' (choose from: {names})")
    return fmt


def default_engine(fmt: QuantFormat, hw: Hardware) -> str:
    """llama.cpp for GGUF formats; checkpoint formats need vLLM (MLX on Apple for 16-bit)."""
    apple = any(d.kind == "apple" for d in hw.devices)
    if fmt.kind == "gguf":
        return "llama.cpp"
    if apple:
        return "mlx"
    return "vllm" if hw.devices else "llama.cpp"


def check_settings(st: RunSettings, fmt: QuantFormat, hw: Hardware) -> None:
    allowed = ENGINE_KV_DTYPES[st.engine]
    if st.kv_cache_dtype not in allowed:
        raise UsageError(f"{st.engine} does not support KV cache type '{st.kv_cache_dtype}' "
                         f"(it takes: {', '.join(allowed)})")
    if fmt.kind == "checkpoint" and st.engine in ("llama.cpp", "ollama"):
        raise UsageError(f"{st.engine} cannot load {fmt.name} checkpoints; use --engine vllm or a GGUF quant")
    if st.engine in ("mlx",) and hw.devices and not all(d.kind == "apple" for d in hw.devices):
        raise UsageError("MLX runs on Apple silicon only")
    if st.engine in ("vllm", "sglang") and any(d.kind == "apple" for d in hw.devices):
        raise UsageError(f"{st.engine} does not run on Apple silicon; use llama.cpp or mlx")
    if st.kv_cache_dtype in ("q8_0", "q4_0") and st.engine in ("llama.cpp", "ollama") and not st.flash_attention:
        raise UsageError("a quantized V cache needs flash attention in llama.cpp (drop --no-flash-attn)")


@dataclass
class Sized:
    result: PlanResult
    output: schema.PlanOutput


def size_plan(command: str, resolved: ResolvedModel, fmt: QuantFormat, st: RunSettings, hw: Hardware, *,
              min_margin_bytes: int = 0, hardware_source: str = "catalog", now: bool = False,
              device_readings: list[dict] | None = None) -> Sized:
    band = error_band()
    sizer = Sizer(resolved.spec, quant_table(), hw, error_band=band, min_margin_bytes=min_margin_bytes,
                  known_weights=resolved.known_weights)
    formats = list(quant_table().formats) + resolved.extra_formats
    result = sizer.plan(fmt, st, formats=formats, now=now)
    out = schema.PlanOutput(
        command=command,
        model=model_info(resolved),
        settings=schema.SettingsInfo(quant=fmt.name, **st.model_dump(exclude={"quant"})),
        hardware=hardware_info(hw, st, hardware_source, now=now, readings=device_readings),
        memory=memory_info(result),
        verdict=verdict_info(result.verdict, band),
        matrix=result.matrix, scaling=result.scaling,
        notes=resolved.notes + result.memory.notes + _format_notes(fmt, result),
    )
    return Sized(result=result, output=out)


def verdict_info(verdict, band: float | None = None) -> schema.VerdictInfo:
    return schema.VerdictInfo(error_band=error_band() if band is None else band, **verdict.model_dump(
        include={"status", "margin_bytes", "utilization", "reason", "limiting"}))


def _format_notes(fmt: QuantFormat, result: PlanResult) -> list[str]:
    if fmt.approximate and result.weights_source.startswith("approximate"):
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


def attention_summary(spec) -> str:
    parts = []
    kind_names = {"full": "full", "sliding": "sliding-window", "chunked": "chunked", "compressed": "compressed (V4)", "linear": "linear (gated delta)",
                  "mamba": "Mamba", "conv": "short-conv"}
    for kind, label in kind_names.items():
        n = spec.count(kind)
        if n:
            window = next((layer.window for layer in spec.layers if layer.attention == kind and layer.window), None)
            parts.append(f"{n} {label}" + (f" ({window})" if window else ""))
    head = "MLA" if spec.mla else ("MHA" if spec.n_kv_heads == spec.n_heads else "MQA" if spec.n_kv_heads == 1 else "GQA")
    moe = f", MoE {spec.moe.n_experts_used}/{spec.moe.n_experts}" if spec.moe else ""
    return f"{head}{moe}: " + ", ".join(parts)


def hardware_info(hw: Hardware, st: RunSettings, source: str, *, now: bool,
                  readings: list[dict] | None = None) -> schema.HardwareInfo:
    from fitprobe.estimator.memory import engine_usable_bytes

    devices = []
    for i, d in enumerate(hw.devices):
        devices.append(schema.DeviceInfo(
            name=d.name, memory_bytes=d.memory_bytes, usable_bytes=engine_usable_bytes(hw, d, st, now=now),
            free_bytes=d.free_bytes, bandwidth_gbs=d.bandwidth_gbs, catalog_key=d.catalog_key,
            readings=(readings[i] if readings and i < len(readings) else {})))
    return schema.HardwareInfo(
        name=hw.name, count=len(hw.devices), memory_bytes=sum(d.memory_bytes for d in hw.devices),
        usable_bytes=sum(d.usable_bytes for d in devices) if devices else int((hw.system_ram_bytes or 0) * hw.usable_fraction),
        usable_fraction=hw.usable_fraction, system_ram_bytes=hw.system_ram_bytes, source=source, devices=devices)


def memory_info(result: PlanResult) -> schema.MemoryInfo:
    m = result.memory
    kv = m.kv
    return schema.MemoryInfo(
        weights_bytes=m.weights_bytes, kv_cache_bytes=m.kv_cache_bytes, buffers_bytes=m.buffers_bytes,
        total_bytes=m.total_bytes, host_weights_bytes=m.host_weights_bytes, host_kv_cache_bytes=m.host_kv_cache_bytes,
        host_buffers_bytes=m.host_buffers_bytes, model_file_bytes=m.model_file_bytes,
        weights_source=result.weights_source, gpu_layers=m.gpu_layers,
        kv_detail={"full": kv.full, "windowed": kv.windowed, "latent": kv.latent, "indexer": kv.indexer,
                   "recurrent": kv.recurrent, "cells_full": kv.cells_full, "cells_window": kv.cells_window},
        per_device=m.per_device)
