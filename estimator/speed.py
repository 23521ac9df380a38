"""Tokens per second: decode from memory bandwidth, prefill from compute (FORMULAS.md §4).

Decode reads, per step, every weight that takes part (routed experts: the share a batch of B
sequences touches, E·(1-(1-k/E)^B)) plus each sequence's KV cache, once:
    t_step = Σ_devices bytes_d / (BW_d · η) + Σ_cpu bytes / (BW_ram · η_cpu) + t_fixed
             + B · 2·N_matmul / (TFLOPS · MFU_batch)   (B > 1: batched decode turns compute bound)
             + tensor parallel: 2 · L · t_allreduce (NVLink or PCIe)
llama.cpp layer split runs the devices one after another, so their times add; vLLM/SGLang
tensor parallel runs them side by side, so one rank's share counts. Prefill of n tokens:
    FLOPs = 2·N_matmul·n + 4·L_attn·H·d_head·n·(c + n/2);  per micro-batch
    t = max(FLOPs / (TFLOPS·MFU), weights / (BW·η)) — a small GPU or a MoE may be bandwidth bound.
η, MFU and t_fixed are per backend, fitted on published benchmarks
(catalogs/data/speed_calibration.json, scripts/speed_accuracy.py).
"""
from __future__ import annotations

from fitprobe.estimator.fields import doc, record

from .hardware import Device, Hardware
from .memory import MemoryBreakdown
from .quant import WeightBytes
from .settings import RunSettings
from .spec import ModelSpec

TTFT_PROMPT = 4096
# Dual-channel DDR5-5600: 2 channels × 8 bytes × 5600 MT/s = 89.6 GB/s (JEDEC data rate × bus
# width). An assumption for a desktop host when the RAM bandwidth is not known; an option.
DEFAULT_RAM_BANDWIDTH_GBS = 89.6
# PCIe 4.0 x16: 16 GT/s × 16 lanes × 128/130 encoding / 8 = 31.5 GB/s per direction (PCI-SIG).
PCIE4_X16_GBS = 31.5
# All-reduce latency per call, midpoints of FORMULAS §4.5's ranges [estimate]:
# NVLink 10–30 µs, PCIe without P2P 50–150 µs. Two all-reduces per layer per step.
ALLREDUCE_US = {"nvlink": 20.0, "pcie": 100.0}
# FORMULAS §4.1: new/unusual architectures (recurrent / gated-delta-net layers) on llama.cpp
# run well under the bandwidth roofline until kernels mature: "apply an extra 0.5×" [estimate].
NEW_ARCH_FACTOR = 0.5


@record
class Efficiency:
    """One backend's calibrated constants."""

    bandwidth: float = doc(gt=0, le=1, description="η: achieved / peak memory bandwidth in decode")
    compute: float = doc(gt=0, description="MFU: achieved / catalog dense FP16 TFLOPS in prefill")
    batch_compute: float = doc(gt=0, description="MFU of the per-token compute in batched decode")
    fixed_ms: float = doc(ge=0, description="per decode step: launches, sync, sampling")
    calibrated: bool = True
    basis: str = ""


@record
class Speed:
    decode_tps: float = doc(description="tokens/s seen by one sequence")
    aggregate_tps: float = doc(description="tokens/s over all concurrent sequences (= decode_tps × batch)")
    batch: int
    prefill_tps: float | None = doc(description="prompt tokens/s for a TTFT-sized prompt; None without a compute figure")
    ttft_ms: float | None = doc(description="time to first token for a prompt of prompt_tokens")
    prompt_tokens: int = TTFT_PROMPT
    bytes_per_token: int = doc(description="bytes read per decode step (weights touched + KV of every sequence)")
    gpu_bytes_per_token: int
    cpu_bytes_per_token: int
    gpu_ms: float
    cpu_ms: float
    overhead_ms: float = doc(description="fixed per-step time plus tensor-parallel all-reduces")
    compute_ms: float = doc(description="per-step compute time of a batch (0 at batch 1)")
    backend: str
    efficiency: Efficiency
    bound: str = doc(description="what limits decode: GPU bandwidth, system RAM bandwidth, overhead, compute")
    notes: list[str] = doc(default_factory=list)


def backend_key(engine: str, device: Device | None) -> str:
    """The calibration group an engine/device pair falls in."""
    if engine in ("vllm", "sglang"):
        return "vllm/cuda"
    if engine == "mlx":
        return "mlx/metal"
    if device is None:
        return "llama.cpp/cpu"
    if device.kind == "apple":
        return "llama.cpp/metal-ultra" if "ultra" in device.name.lower() else "llama.cpp/metal"
    name = device.name.lower()
    if any(k in name for k in ("radeon", "instinct", "ryzen", "amd")):
        return "llama.cpp/amd"
    if any(k in name for k in ("arc", "intel", "gaudi")):
        return "llama.cpp/intel"
    return "llama.cpp/cuda"


def matmul_params(spec: ModelSpec) -> tuple[float, float]:
    """(active, all) parameters in matrix multiplies per token: the input embedding is a lookup."""
    from .tensors import inventory

    used = spec.moe.n_experts_used / spec.moe.n_experts if spec.moe else 1.0
    active = total = 0.0
    for t in inventory(spec):
        if t.vision or t.mtp or len(t.shape) < 2:
            continue
        if t.name == "token_embd.weight":
            if not spec.tied_embeddings:
                continue  # tied: the same matrix is the output head
        active += t.n * used if t.expert else t.n
        total += t.n
    return active, total


def _layer_read(w: WeightBytes, spec: ModelSpec, batch: int) -> list[float]:
    """Bytes of each block read per decode step: routed experts only as far as the batch touches them."""
    touched = 1.0
    if spec.moe:
        k, e = spec.moe.n_experts_used, spec.moe.n_experts
        touched = 1 - (1 - k / e) ** batch
    return [(lw - ew) + ew * touched for lw, ew in zip(w.per_layer, w.experts_per_layer)]


def _attention_flops(spec: ModelSpec, n: int, depth: int) -> float:
    """QKᵀ and PV of n new tokens over depth + n/2 cached ones, window-capped on sliding layers."""
    flops = 0.0
    for layer in spec.layers:
        if layer.attention not in ("full", "sliding", "chunked"):
            continue
        span = depth + n / 2
        if layer.attention != "full" and layer.window:
            span = min(span, layer.window)
        flops += 4 * spec.n_heads * spec.head_dim * n * span
    return flops


def _placement(w: WeightBytes, spec: ModelSpec, st: RunSettings, hw: Hardware, mem: MemoryBreakdown,
               reads: list[float], cpu_expert_layers: int) -> tuple[list[float], list[float], float]:
    """Decode bytes per device (weights + KV), the CPU's bytes, and the KV part on devices."""
    n = spec.n_layers
    dev_bytes = [0.0] * len(hw.devices)
    kv = mem.kv.per_layer
    out_read = w.output or (w.token_embd if spec.tied_embeddings else 0)
    if not hw.devices:
        return [], [sum(reads) + out_read + sum(kv)], 0.0
    if st.engine in ("vllm", "sglang"):
        tp = len(hw.devices)
        per = (sum(reads) + out_read + sum(kv)) / tp
        return [per] * tp, [0.0], sum(kv)
    cpu = 0.0
    gpu_blocks = mem.gpu_layers if st.engine != "mlx" else n
    first = n - gpu_blocks
    for i in range(first):
        cpu += reads[i] + kv[i]
    start = first
    for d, usage in enumerate(mem.per_device):
        layers = usage.layers if st.engine != "mlx" else (n if d == 0 else 0)
        for i in range(start, start + layers):
            dev_bytes[d] += reads[i] + kv[i]
        start += layers
    output_on_gpu = st.engine == "mlx" or (mem.per_device and mem.per_device[-1].weights_bytes > 0
                                           and (gpu_blocks > 0 or st.gpu_layers is None or st.gpu_layers >= 1))
    if output_on_gpu:
        dev_bytes[-1] += out_read
    else:
        cpu += out_read
    if cpu_expert_layers and spec.moe:  # --n-cpu-moe N: experts of the first N blocks stay in RAM
        k_share = 1 - (1 - spec.moe.n_experts_used / spec.moe.n_experts) ** st.batch
        start = first
        for d, usage in enumerate(mem.per_device):
            for i in range(start, start + usage.layers):
                if i < cpu_expert_layers:
                    moved = w.experts_per_layer[i] * k_share
                    dev_bytes[d] -= moved
                    cpu += moved
            start += usage.layers
    return dev_bytes, [cpu], sum(kv[first:])


def estimate_speed(spec: ModelSpec, weights: WeightBytes, settings: RunSettings, hw: Hardware,
                   memory: MemoryBreakdown, *, prompt_tokens: int = TTFT_PROMPT, prompt_depth: int = 0,
                   cpu_expert_layers: int = 0,
                   ram_bandwidth_gbs: float | None = None, calibration=None) -> Speed:
    """Decode tokens/s (per sequence and aggregate), prefill tokens/s and TTFT for one sized plan.

    `memory` is the breakdown `estimate()` gave for the same weights/settings/hardware (it says
    where each block lives); `cpu_expert_layers` keeps the routed experts of the first N blocks
    in system RAM (llama.cpp --n-cpu-moe). `calibration` defaults to the bundled fit.
    """
    cpu_expert_layers = cpu_expert_layers or settings.cpu_moe_layers
    if calibration is None:
        from fitprobe.catalogs.speed_calibration import load_calibration

        calibration = load_calibration()
    notes: list[str] = []
    devices = hw.devices
    ref = devices[0] if devices else None
    key = backend_key(settings.engine, ref)
    eff = calibration.efficiency(key)
    if not eff.calibrated:
        notes.append(f"{key}: no published benchmark in the calibration set; {eff.basis}")
    cpu_eff = calibration.efficiency("llama.cpp/cpu")
    arch_factor = 1.0
    if spec.recurrent_layers and settings.engine in ("llama.cpp", "ollama"):
        arch_factor = NEW_ARCH_FACTOR
        notes.append("recurrent / gated-delta-net layers: llama.cpp kernels for them run at about half the "
                     "bandwidth roofline (FORMULAS §4.1, 0.5× until measured)")
    B = settings.batch
    reads = _layer_read(weights, spec, B)
    dev_bytes, cpu_parts, _ = _placement(weights, spec, settings, hw, memory, reads, cpu_expert_layers)
    cpu_bytes = sum(cpu_parts)
    unified = bool(ref and ref.unified_memory)
    ram_bw = ram_bandwidth_gbs or hw.ram_bandwidth_gbs or (ref.bandwidth_gbs if unified and ref else None)
    if cpu_bytes and not ram_bw:
        ram_bw = DEFAULT_RAM_BANDWIDTH_GBS
        notes.append(f"system RAM bandwidth unknown: assumed {DEFAULT_RAM_BANDWIDTH_GBS} GB/s "
                     "(dual-channel DDR5-5600); pass --ram-bw")
    gpu_ms = 0.0
    paged = settings.engine in ("vllm", "sglang")
    for dev, b in zip(devices, dev_bytes):
        if not dev.bandwidth_gbs:
            raise ValueError(f"the catalog has no memory bandwidth for {dev.name}: speed cannot be estimated")
        t = b / (dev.bandwidth_gbs * 1e9 * eff.bandwidth * arch_factor) * 1e3
        gpu_ms = max(gpu_ms, t) if paged else gpu_ms + t
    cpu_ms = cpu_bytes / (ram_bw * 1e9 * cpu_eff.bandwidth * arch_factor) * 1e3 if cpu_bytes else 0.0
    overhead = eff.fixed_ms if devices else cpu_eff.fixed_ms
    if paged and len(devices) > 1:
        link = "nvlink" if all(d.nvlink for d in devices) else "pcie"
        overhead += 2 * spec.n_layers * ALLREDUCE_US[link] / 1e3
        notes.append(f"tensor parallel {len(devices)} over {'NVLink' if link == 'nvlink' else 'PCIe'}: "
                     f"2 all-reduces per layer at ~{ALLREDUCE_US[link]:.0f} µs each")
    n_active, _ = matmul_params(spec)
    tflops = _tflops(devices, calibration, eff, key)
    compute_ms = 0.0
    if B > 1:
        if tflops:
            compute_ms = B * 2 * n_active / (tflops * 1e12 * eff.batch_compute) * 1e3
        else:
            notes.append("no compute figure for this device: batched decode counted as bandwidth bound only")
    step_ms = gpu_ms + cpu_ms + overhead + compute_ms
    parts = {"GPU bandwidth": gpu_ms, "system RAM bandwidth": cpu_ms, "per-step overhead": overhead,
             "compute": compute_ms}
    bound = max(parts, key=parts.get)
    prefill = ttft = None
    if tflops:
        t_pp = _prefill_seconds(spec, weights, settings, hw, memory, eff, cpu_eff, tflops, prompt_tokens,
                                 n_active, arch_factor, prompt_depth)
        prefill, ttft = prompt_tokens / t_pp, t_pp * 1e3
    else:
        notes.append("the catalog has no FP16 TFLOPS for this device and no benchmark measured it: "
                     "prefill and TTFT are not estimated")
    return Speed(decode_tps=1e3 / step_ms, aggregate_tps=B * 1e3 / step_ms, batch=B, prefill_tps=prefill,
                 ttft_ms=ttft, prompt_tokens=prompt_tokens, bytes_per_token=int(sum(dev_bytes) + cpu_bytes),
                 gpu_bytes_per_token=int(sum(dev_bytes)), cpu_bytes_per_token=int(cpu_bytes), gpu_ms=gpu_ms,
                 cpu_ms=cpu_ms, overhead_ms=overhead, compute_ms=compute_ms, backend=key, efficiency=eff,
                 bound=bound, notes=notes)


def _tflops(devices: list[Device], calibration, eff: Efficiency, key: str) -> float | None:
    """Effective dense TFLOPS of the devices working on one token (TP: summed)."""
    if not devices:
        return None
    per = []
    for d in devices:
        measured = None if d.fp16_tflops else calibration.device_tflops(d.catalog_key, key)
        per.append(measured / eff.compute if measured else d.fp16_tflops)
    if any(p is None for p in per):
        return None
    return sum(per) if len(devices) > 1 else per[0]


def _prefill_seconds(spec, w, st, hw, mem, eff, cpu_eff, tflops, n, n_active, arch_factor, depth) -> float:
    """Prompt of n tokens in micro-batches: each one compute- or weight-read-bound, attention grows with depth."""
    devices = hw.devices
    paged = st.engine in ("vllm", "sglang")
    if paged:
        from .buffers import vllm_batch_defaults

        chunk = vllm_batch_defaults(devices[0].memory_bytes, devices[0].name)[0]
    else:
        chunk = st.ubatch
    bw = min(d.bandwidth_gbs or 0 for d in devices) * 1e9 * eff.bandwidth * arch_factor
    if paged:
        bw *= len(devices)
    gpu_weight_bytes = sum(d.weights_bytes for d in mem.per_device)
    cpu_weight_bytes = max(0, mem.host_weights_bytes - w.token_embd)
    total, done = 0.0, 0
    while done < n:
        m = min(chunk, n - done)
        flops = 2 * n_active * m + _attention_flops(spec, m, depth + done)
        t_compute = flops / (tflops * 1e12 * eff.compute)
        t_read = gpu_weight_bytes / bw
        # CPU-resident blocks: ggml copies their weights to the GPU over PCIe for big batches
        t_cpu = cpu_weight_bytes / (PCIE4_X16_GBS * 1e9) if cpu_weight_bytes else 0.0
        total += max(t_compute, t_read) + t_cpu + eff.fixed_ms / 1e3
        done += m
    return total
