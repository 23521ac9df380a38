"""Tokens per second: decode from memory bandwidth, prefill from compute (FORMULAS.md §4).

Decode reads, per step, every weight that takes part (routed experts: the share a batch of B
sequences touches, E·(1-(1-k/E)^B)) plus each sequence's KV cache, once:
    t_step = Σ_devices max((dense_d + experts_d) / (BW_d · η · φ_quant), 2·P_d / (TFLOPS_d · ε))
             + t_moe · L_moe,d / 32 + bytes_cpu / BW_cpu + t_fixed · K / 290
             + B · 2·N_active / (TFLOPS · MFU_batch)   (B > 1: batched decode turns compute bound)
             + tensor parallel: 2 · L · t_allreduce (NVLink or PCIe); layer split: t_split per device boundary
K counts the weight matrices and norm vectors the step applies (290 on Llama-2-7B), the small kernels
whose launches and tails t_fixed stands for. P_d is the weights device d holds that the step reads:
dequantising and multiplying them is ALU work that a chip with slow ALUs for its bandwidth (an M1 Max) cannot hide behind the reads. t_moe is the
router/gather/expert-launch latency of 32 MoE blocks, on top of their reads. On a CUDA GPU without dp4a (compute
capability 6.0) llama.cpp's integer kernels, MMVQ here and MMQ for a prompt's routed experts, run at NO_DP4A_SHARE of
its FP16 figure.
llama.cpp's default layer split runs the devices one after another, so their times add, and each device waits
for the hidden state's copy from the one before (t_split, measured on runs of one model over 1 and N GPUs); vLLM/SGLang
tensor parallel runs them side by side, so one rank's share counts. BW_cpu = min(RAM bandwidth · η_cpu,
threads · per-core bandwidth): a few cores cannot saturate a wide memory system.
Prefill of n tokens, in micro-batches of `ubatch` (vLLM: max_num_batched_tokens):
    FLOPs = 2·N_active·m + 4·L_attn·H·d_head·m·(depth + m/2)
    per device: t = max(FLOPs'_d / (TFLOPS_d · MFU · ψ_quant), weights_d / (BW_d · η · φ_quant))
    FLOPs' = FLOPs_dense · (m + m½)/m + FLOPs_experts · (m·k/E + m½·r)/(m·k/E) / κ + FLOPs_attn / α,
    r = 1-(1-k/E)^m
(a matmul over few tokens reuses each weight tile little; a routed expert sees m·k/E of them, and only the
share r of the experts that the micro-batch reaches is loaded). Where llama.cpp's CUDA/HIP MMQ kernel tiles the
experts by the whole micro-batch (J columns, estimator/expert_kernels.py), an expert computes whole tiles:
m·k/E + m½·r becomes m·k/E + π·(r·tiles·J − m·k/E) + m½·r·tiles, π the share of an empty column it pays.
Layer split: the devices' times add for one micro-batch, but llama.cpp pipelines the micro-batches
of one n_batch across devices (k micro-batches over G devices take (k+G-1)/(k·G) of the sequential
time); a single micro-batch (pp512) gets no overlap. Weights of CPU-resident blocks cross PCIe once
per micro-batch (ggml offloads big matmuls to the GPU). Where llama.cpp's CUDA/HIP kernels decline a
micro-batch (estimator/expert_kernels.py) its time grows by the F16 weight copies of the cuBLAS path, read and
written at η, and by the launches of MoE blocks run one expert at a time, each at eager t_fixed / 290. η, t_fixed (and on CUDA the t_fixed of GPUs that
run without CUDA graphs; t_fixed is the pinned build's era's: CUDA graph builds before 2026, which fused fewer
kernels, calibrate with their own), t_moe, ε, MFU, m½, κ, α are per backend
(fitted hierarchically: each drawn towards the constants of all backends together), times a chip's own
measured share where published runs measured it (an M1 Max GPU streams less of its 400 GB/s than an
M3 Max, an Arc A770 runs SYCL's kernels far below a B580), φ/ψ per quant kernel family, all fitted
on published benchmarks (catalogs/data/speed_points.json; the constants, in speed_calibration.json, are passed
in by the caller; scripts/speed_accuracy.py reports leave-one-source-out error).
"""
from __future__ import annotations

from functools import lru_cache

import re

from fitprobe.estimator.fields import doc, record

from .expert_kernels import (SORTED_CALL_LAUNCHES, UNQUANTIZED, dequantizes, expert_matmuls, expert_tiles, lacks_dp4a,
                             sorted_path)
from .hardware import Device, Hardware
from .memory import MemoryBreakdown
from .message import Num, gib, msg
from .quant import WeightBytes, head_bytes
from .settings import RunSettings
from .spec import ModelSpec

TTFT_PROMPT = 4096
# Dual-channel DDR5-5600: 2 channels × 8 bytes × 5600 MT/s = 89.6 GB/s (JEDEC data rate × bus
# width). An assumption for a desktop host when the RAM bandwidth is not known; an option.
DEFAULT_RAM_BANDWIDTH_GBS = 89.6
# A CPU core's clock when neither the probe nor --cpu-ghz gives it: an assumption (a desktop or laptop
# core's sustained turbo is 3.4-4.5 GHz, a cloud vCPU's 2.4-3.5 GHz), said in a note. A core's decode and
# prefill rates scale with its clock: llama.cpp's CPU dot products are compute-bound per thread.
DEFAULT_CPU_GHZ = 3.5
# Intel's Atom-line cores (Gracemont in the N100-N355 and Atom x7000, Tremont and Goldmont Plus in the Celeron and
# Pentium N/J parts) execute vector instructions on 128-bit datapaths: the 256-bit AVX2 dot products llama.cpp's x86
# kernels issue (ggml-cpu/arch/x86) run as two halves (AnandTech, "A Deep Dive into Intel's Alder Lake
# Microarchitectures", the Gracemont page), so one such core moves half the bytes and FLOPs per clock of the x86
# class it is priced from. Derived, not fitted: one published run (an N100) measures the class.
ATOM_VECTOR_SHARE = 0.5
# PCIe 4.0 x16: 16 GT/s × 16 lanes × 128/130 encoding / 8 = 31.5 GB/s per direction (PCI-SIG).
PCIE4_X16_GBS = 31.5
# All-reduce latency per call, midpoints of FORMULAS §4.5's ranges [estimate]:
# NVLink 10–30 µs, PCIe without P2P 50–150 µs. Two all-reduces per layer per step.
ALLREDUCE_US = {"nvlink": 20.0, "pcie": 100.0}
# llama.cpp's default logical batch (-b 2048, common/common.h n_batch): the micro-batches of one
# n_batch are what its pipeline parallelism overlaps across devices.
DEFAULT_N_BATCH = 2048
# t_fixed is quoted for a 32-block model (Llama-2/3 7-8B) and t_moe for 32 MoE blocks. t_fixed scales with the
# kernels a step runs, counted as the weight matrices and norm vectors it applies (a block of small kernels costs
# its launch and tail whatever it reads): Llama-2-7B's 225 + 65 = 290 is the reference, a Gemma-4 MoE block
# with its pre/post norms and shared MLP beside the experts runs twice a Llama block's.
REFERENCE_LAYERS = 32
REFERENCE_KERNELS = 290
# Architectures whose llama.cpp graph gathers the output rows after the output norm, not inside the last block
# (src/models/gemma4.cpp: its MTP head reads every row's final hidden state unless embeddings_nextn_masked).
OUTPUT_ROWS_AFTER_LAST_BLOCK = frozenset({"gemma4", "gemma4_text"})
BACKENDS = ("cuda", "hip", "vulkan", "metal", "sycl", "cann", "cpu")


@record
class Efficiency:
    """One backend's calibrated constants."""

    bandwidth: float = doc(gt=0, le=1, description="η: achieved / peak memory bandwidth in decode")
    compute: float = doc(gt=0, description="MFU: achieved / catalog dense FP16 TFLOPS in prefill")
    batch_compute: float = doc(gt=0, description="MFU of the per-token compute in batched decode")
    fixed_ms: float = doc(ge=0, description="per decode step of Llama-2-7B (scales with the weight matrices and norms "
                                            "a step applies, 290 there): launches, sync, sampling, small kernels' "
                                            "tails, the kernels that read no weights")
    eager_fixed_ms: float | None = doc(default=None, ge=0, description="t_fixed where llama.cpp launches every kernel "
                                                                       "itself instead of replaying a CUDA graph "
                                                                       "(NVIDIA before Volta); None: as fixed_ms")
    pdl_fixed: float | None = doc(default=None, gt=0, le=1, description="share of t_fixed left where each kernel of a "
                                                                       "step starts while the one before it ends "
                                                                       "(CUDA PDL, compute capability 9.0 and newer); "
                                                                       "None: all of it")
    moe_ms: float = doc(default=0.0, ge=0, description="t_moe: per-step latency of the routed-expert kernels of 32 "
                                                       "MoE blocks (router, gather, launches), on top of their reads")
    decode_compute: float = doc(default=1.0, gt=0, description="ε: MFU of one decode step's matrix-vector kernels "
                                                                "(2 FLOPs per weight read; dequantising costs ALU work, "
                                                                "so a chip with slow ALUs can be compute bound)")
    split_ms: float = doc(default=0.0, ge=0, description="per decode step and device boundary of a layer split: the "
                                                         "hidden state's copy to the next device, which waits for it "
                                                         "before its first kernel")
    pipeline: float = doc(default=1.0, ge=0, le=1, description="ρ: share of the ideal layer-split pipeline overlap "
                                                               "prefill reaches over several devices")
    half_tokens: float = doc(default=0.0, ge=0, description="m½: tokens per matrix multiply at which the prefill kernels "
                                                            "run at half their large-batch rate (a weight tile loaded "
                                                            "for few tokens is reused little); 0: no such loss")
    expert_compute: float = doc(default=1.0, gt=0, description="κ: rate of the routed-expert matmuls relative to the "
                                                               "dense ones at a large per-expert batch (routing, "
                                                               "gathering rows by expert)")
    tile_padding: float = doc(default=0.0, ge=0, le=1, description="π: share of the empty columns of MMQ's grouped "
                                                                "expert tiles (llama.cpp CUDA/HIP) a prompt pays for, "
                                                                "as if they were tokens")
    attention_compute: float = doc(default=1.0, gt=0, description="α: rate of the attention's FLOPs (QKᵀ and PV over "
                                                                  "the cached context, flash-attention kernels) "
                                                                  "relative to the weight matmuls'")
    calibrated: bool = True
    basis: str = ""


@record
class HeldOutError:
    """How far a backend's estimates land from published runs the fit never saw (scripts/speed_accuracy.py's
    leave-one-source-out refits): what a plan's figure is good for."""

    backend: str = doc(description="the calibration group whose published runs these are (MLX borrows Metal's: "
                                   "llama.cpp/metal)")
    median: float = doc(ge=0, description="median |estimate / measured - 1| over the held-out runs")
    p90: float = doc(ge=0, description="9 in 10 held-out runs lie within this relative error")
    points: int = doc(gt=0, description="published runs predicted with their source held out")
    sources: int = doc(gt=0, description="publications those runs come from")


@record
class QuantRates:
    """A quant kernel family's efficiency relative to the K-quants (1.0)."""

    bandwidth: float = doc(default=1.0, gt=0, description="φ: decode bandwidth factor")
    compute: float = doc(default=1.0, gt=0, description="ψ: prefill compute factor")


@record
class CpuRates:
    """llama.cpp on CPU cores: what one core moves and computes, and the memory system's ceiling."""

    bandwidth: float = doc(gt=0, le=1, description="η_cpu: achieved / peak RAM bandwidth with enough cores")
    gbs_per_ghz: float = doc(gt=0, description="GB/s of weights one thread streams through its dot products in "
                                               "decode, per GHz of its clock")
    gflops_per_ghz: float = doc(gt=0, description="GFLOPS one thread reaches in prefill, per GHz of its clock")
    arm_gbs_per_ghz: float | None = doc(default=None, gt=0, description="the same on other 64-bit ARM cores "
                                                                        "(Neoverse, Cortex; None: as x86)")
    arm_gflops_per_ghz: float | None = doc(default=None, gt=0, description="the same on other 64-bit ARM cores")
    apple_gbs_per_ghz: float | None = doc(default=None, gt=0, description="the same on Apple silicon's P-cores "
                                                                          "(None: as other ARM)")
    apple_gflops_per_ghz: float | None = doc(default=None, gt=0, description="the same on Apple silicon's P-cores")
    serial_share: float = doc(default=0.0, ge=0, le=0.5, description="s: the share of one thread's prefill time "
                                                                    "that does not split over threads (Amdahl)")
    calibrated: bool = True
    basis: str = ""

    # Per core class: llama.cpp's CPU dot products are separate code per ISA (ggml-cpu/arch/x86 with AVX2
    # maddubs, ggml-cpu/arch/arm with NEON sdot), and Apple's P-cores stream several times the bytes per clock
    # of a server ARM core in decode (M2/M4 Max vs Graviton3 at equal threads). A class without its own
    # figure takes the nearest one's: apple -> arm64 -> x86_64.
    # An Atom-line core (atom) runs the x86 code on 128-bit vector datapaths: ATOM_VECTOR_SHARE of an x86 core's.
    def thread_gbs(self, ghz: float | None, arch: str | None = None) -> float:
        return self._rate("gbs_per_ghz", arch) * (ghz or DEFAULT_CPU_GHZ)

    def thread_gflops(self, ghz: float | None, arch: str | None = None) -> float:
        return self._rate("gflops_per_ghz", arch) * (ghz or DEFAULT_CPU_GHZ)

    # A prompt's graph does not split perfectly over the threads: ggml-cpu ends every node in a barrier across all
    # of them (ggml_graph_compute_thread; mul_mat adds one after converting its activations), so n threads reach
    # n / (1 + s·(n − 1)) of one thread's rate (Amdahl). The published sweeps show it: per thread, a 32-thread
    # Graviton3 prompt ran at 0.69 of 8 threads' rate, and linear scaling priced a 64-thread Threadripper at 2.2×.
    def prefill_gflops(self, threads: int, ghz: float | None, arch: str | None = None) -> float:
        return threads * self.thread_gflops(ghz, arch) / (1 + self.serial_share * (threads - 1))

    def _rate(self, name: str, arch: str | None) -> float:
        chain = {"apple": ("apple_", "arm_", ""), "arm64": ("arm_", "")}.get(arch or "", ("",))
        rate = next(v for v in (getattr(self, p + name) for p in chain) if v)
        return rate * ATOM_VECTOR_SHARE if arch == "atom" else rate


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
    decode_error: HeldOutError | None = doc(default=None, description="the backend's decode error on published runs "
                                                                        "held out of the fit; None: none measured")
    prefill_error: HeldOutError | None = doc(default=None, description="the same for prefill")
    bound: str = doc(description="what limits decode: GPU bandwidth, system RAM bandwidth, CPU cores (the "
                                 "RAM-resident bytes at the cores' pace), per-step overhead, compute")
    notes: list[str] = doc(default_factory=list)


@record
class DecodeTerms:
    """What one decode step moves and computes, before any efficiency: the fit's input too."""

    device_dense: list[float]
    device_expert: list[float]
    device_params: list[float] = doc(description="weights (parameters) each device reads per step")
    cpu_bytes: float
    flops_per_token: float
    n_layers: int
    n_kernels: int = doc(gt=0, description="weight matrices and norm vectors one step applies (the kernels "
                                          "t_fixed scales with)")
    batch: int
    parallel: bool = doc(description="tensor parallel (devices side by side) rather than a layer split")
    link: str = "pcie"
    n_moe_layers: int = 0


@record
class PrefillTerms:
    """A prompt's micro-batches: FLOPs of each, and the weight bytes each device reads per micro-batch."""

    chunk_flops: list[float]
    chunk_tokens: list[int] = doc(default_factory=list, description="prompt tokens of each micro-batch")
    chunk_expert_flops: list[float] = doc(default_factory=list, description="the routed experts' share of chunk_flops")
    chunk_attention_flops: list[float] = doc(default_factory=list, description="the attention's share of chunk_flops "
                                                                               "(grows with the context's depth)")
    chunk_launches: list[float] = doc(default_factory=list, description="kernels launched one expert at a time "
                                                                        "(llama.cpp's sorted MoE path) per micro-batch")
    chunk_dequant_bytes: list[list[float]] = doc(default_factory=list, description="per micro-batch and device: "
                                                 "bytes of the F16 weight copies llama.cpp's cuBLAS path writes and reads")
    chunk_expert_tiles: list[tuple[int, float] | None] = doc(default_factory=list, description="per micro-batch: "
                                                 "the tile width and tiles per reached expert of MMQ's grouped kernel "
                                                 "where it tiles them by the micro-batch (llama.cpp CUDA/HIP; else None)")
    expert_fraction: float = doc(default=0.0, description="k/E: a routed expert's matmuls see this share of a "
                                                          "micro-batch's tokens")
    expert_rate: float = doc(default=1.0, gt=0, le=1, description="the routed experts' kernel rate relative to "
                                                                  "the dense matmuls' beyond κ (MMQ without dp4a)")
    device_weights: list[float]
    cpu_weights: float
    chunks_per_batch: int
    parallel: bool


def quant_family(quant: str) -> str:
    """The kernel family a format's matmuls run in (its decode/prefill efficiency differs)."""
    q = quant.upper().removeprefix("UD-")
    if q in UNQUANTIZED:
        return "f16"
    if q == "Q8_0":
        return "q8_0"
    if q in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL"):
        return "legacy"
    if q.startswith("IQ") or q.startswith("TQ"):
        return "iq"
    if q in ("MXFP4",):
        return "mxfp4"
    if q in ("FP8", "NVFP4"):
        return "fp8"
    if q in ("AWQ", "GPTQ", "NF4"):
        return "int4"
    return "k"


def default_backend(device: Device | None) -> str:
    """What llama.cpp runs on a device unless told otherwise: CUDA, ROCm/HIP, Metal, SYCL, CANN or CPU."""
    if device is None:
        return "cpu"
    if device.kind == "apple":
        return "metal"
    name = device.name.lower()
    if any(k in name for k in ("radeon", "instinct", "ryzen", "amd", " mi")):
        return "hip"
    if any(k in name for k in ("arc", "intel", "gaudi")):
        return "sycl"
    if any(k in name for k in ("ascend", "atlas")):
        return "cann"
    return "cuda"


# The vendor of a device, by the backend llama.cpp would pick for it natively.
VULKAN_VENDOR = {"cuda": "nvidia", "hip": "amd", "sycl": "intel", "metal": "apple", "cann": "other"}


def backend_key(engine: str, device: Device | None, backend: str | None = None) -> str:
    """The calibration group an engine/backend pair falls in (llama.cpp and Ollama share kernels)."""
    if engine in ("vllm", "sglang"):
        return "vllm/cuda"
    if engine == "mlx":
        return "mlx/metal"
    if device is None:
        return "llama.cpp/cpu"
    backend = backend or default_backend(device)
    if backend == "vulkan":  # one Vulkan backend, a kernel path per vendor (NVIDIA coopmat2, AMD coopmat, Intel
        return f"llama.cpp/vulkan-{VULKAN_VENDOR[default_backend(device)]}"  # without), measured apart
    return f"llama.cpp/{backend}"


# ggml-cuda.cu (ggml_cuda_graph_set_enabled) of the pinned build: a decode step is captured once and
# replayed as one CUDA graph, except on GPUs below GGML_CUDA_CC_VOLTA (700), which launch each kernel.
CUDA_GRAPHS_MIN_CC = 7.0


def cuda_graphs(device: Device) -> bool:
    """Whether llama.cpp's CUDA backend replays decode steps as CUDA graphs on this GPU (unknown: yes)."""
    try:
        return float(device.compute_capability) >= CUDA_GRAPHS_MIN_CC if device.compute_capability else True
    except ValueError:
        return True


# Programmatic dependent launch in the pinned build (ggml-cuda/common.cuh: GGML_CUDA_USE_PDL, ggml_cuda_pdl_sync
# behind __CUDA_ARCH__ >= GGML_CUDA_CC_HOPPER; llama.cpp PR 22522, May 2026): on Hopper and newer a kernel's
# prologue overlaps the tail of the one before it, which trims the per-step time of small decode steps (the PR's
# gpt-oss-20b tg128: +13 %; a Llama 8B Q4_0 at ubatch 1: +3 %).
CUDA_PDL_MIN_CC = 9.0


def cuda_pdl(device: Device) -> bool:
    """Whether llama.cpp's CUDA kernels overlap their launches on this GPU (unknown: no)."""
    try:
        return bool(device.compute_capability) and float(device.compute_capability) >= CUDA_PDL_MIN_CC
    except ValueError:
        return False


# llama.cpp's quantized CUDA kernels take their 8-bit dot products with dp4a (GGML_CUDA_CC_DP4A = 610,
# ggml-cuda/common.cuh), one per lane and clock on Pascal at the FP32 rate: MMVQ in decode, MMQ for the routed
# experts of a prompt. Compute capability 6.0 (GP100, the Tesla P100) has none, and ggml_cuda_dp4a falls back to
# byte-wise multiply-adds on the FP32 lanes; the catalog's figure for such a card is its packed-FP16 rate, twice the
# FP32 one. Those kernels run at half of it. The fallback issues more instructions (scripts/dp4a_emulation.py: 1.56x
# in MMVQ's loops, 3.12x in MMQ's) but is not charged for them: the dp4a Pascal cards' runs put MMVQ at ε ≈ 0.07 of
# their issue rate, far from issue bound, and the P100's own runs (one publication, which cannot calibrate a factor
# of its own) sit near half the figure, not a third or a sixth. F16 weights and dense prompts (cuBLAS) keep it.
NO_DP4A_SHARE = 0.5


def integer_dot_share(key: str, device: Device, quant: str) -> float:
    """The share of a device's compute figure at which llama.cpp's integer dot-product kernels (MMVQ, MMQ)
    multiply `quant` weights: below 1 only on CUDA GPUs without dp4a."""
    emulated = key == "llama.cpp/cuda" and quant_family(quant) != "f16" and lacks_dp4a(device.compute_capability)
    return NO_DP4A_SHARE if emulated else 1.0


def overlaps_launches(key: str, devices: list[Device]) -> bool:
    """Whether a llama.cpp step on these devices pays only pdl_fixed of t_fixed: CUDA, every GPU Hopper or newer."""
    return key == "llama.cpp/cuda" and bool(devices) and all(map(cuda_pdl, devices))


def chip_key(device: Device) -> str | None:
    """The chip a device's measured efficiency belongs to: 'Apple M2 Ultra' for every Mac that carries one,
    else its catalog key (None: a device the catalog does not know)."""
    return apple_chip(device) if device.kind == "apple" else device.catalog_key


def apple_chip(device: Device) -> str | None:
    """'Apple M4 Max' from a device name or catalog key ('macbook-pro-m4-max-128gb')."""
    return _apple_chip(device.name, device.catalog_key)


# llama.cpp's Metal backend multiplies through the Metal 4 tensor API, on the GPU cores' Neural Accelerators, only on
# M5 and later (b11434 ggml-metal-device.m: "tensor API disabled for pre-M5 and pre-A19 devices").
APPLE_TENSOR_SINCE = 5


def apple_gpu_tensor(device: Device) -> bool:
    """Whether an Apple GPU's prompt matmuls run on its Neural Accelerators (M5 and later) rather than its shaders."""
    chip = apple_chip(device) if device.kind == "apple" else None
    return chip is not None and int(chip.split()[1][1:]) >= APPLE_TENSOR_SINCE


@lru_cache(maxsize=512)
def _apple_chip(name: str, catalog_key: str | None) -> str | None:
    for text in (name.lower(), (catalog_key or "").lower()):
        m = re.search(r"\bm(\d+)(?:[ -](pro|max|ultra))?\b", text)
        if m:
            return f"Apple M{m.group(1)}" + (f" {m.group(2).title()}" if m.group(2) else "")
    return None


@lru_cache(maxsize=256)
def matmul_params(spec: ModelSpec) -> tuple[float, float]:
    """(active, all) parameters in matrix multiplies per token: the input embedding is a lookup.
    Memoized per spec (specs are immutable and hash by their content): every plan, offload
    candidate and ranked row asks it again."""
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


@lru_cache(maxsize=256)
def step_kernels(spec: ModelSpec) -> int:
    """Weight matrices and norm vectors one decode step applies, memoized. The input embedding is a lookup, but a
    tied one is the output head too: llama.cpp's graph multiplies by it once more (as matmul_params counts it)."""
    from .tensors import inventory

    return sum(1 for t in inventory(spec) if not (t.vision or t.mtp)
               and (t.name != "token_embd.weight" or spec.tied_embeddings)
               and (len(t.shape) >= 2 or "norm" in t.name))


def launch_ms(eff: Efficiency) -> float:
    """One kernel launched without a CUDA graph: the backend's eager t_fixed over the reference step's kernels."""
    return (eff.fixed_ms if eff.eager_fixed_ms is None else eff.eager_fixed_ms) / REFERENCE_KERNELS


def fixed_scale(t: "DecodeTerms") -> float:
    """t_fixed's multiple for this step: its kernels over the reference model's."""
    return t.n_kernels / REFERENCE_KERNELS


@lru_cache(maxsize=256)
def routed_params(spec: ModelSpec) -> float:
    """Routed-expert parameters in matrix multiplies per token (k of E experts), memoized per spec."""
    from .tensors import inventory

    if not spec.moe:
        return 0.0
    used = spec.moe.n_experts_used / spec.moe.n_experts
    return sum(t.n * used for t in inventory(spec) if t.expert and not (t.vision or t.mtp) and len(t.shape) >= 2)


def _touched(spec: ModelSpec, batch: int) -> float:
    if not spec.moe:
        return 1.0
    k, e = spec.moe.n_experts_used, spec.moe.n_experts
    return 1 - (1 - k / e) ** batch


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


def _layer_devices(spec: ModelSpec, st: RunSettings, mem: MemoryBreakdown, n_devices: int) -> list[int | None]:
    """Which device holds each block (None: system RAM), in llama.cpp's order: first blocks stay on CPU."""
    n = spec.n_layers
    if st.engine == "mlx":
        return [0] * n
    where: list[int | None] = [None] * (n - mem.gpu_layers)
    for d, usage in enumerate(mem.per_device[:n_devices]):
        where += [d] * usage.layers
    return (where + [None] * n)[:n]


def _last_ffn_share(spec: ModelSpec) -> float:
    """Share of the last block's dense weights (elements) that its FFN holds."""
    from .tensors import inventory

    last = [t for t in inventory(spec) if t.layer == spec.n_layers - 1 and t.quantizable and not t.expert
            and not t.mtp]
    total = sum(t.n for t in last)
    return sum(t.n for t in last if "ffn_" in t.name) / total if total else 0.0


def decode_terms(spec: ModelSpec, w: WeightBytes, st: RunSettings, hw: Hardware, mem: MemoryBreakdown, *,
                 cpu_expert_layers: int = 0, outputs: bool = True) -> DecodeTerms:
    """Bytes per device (dense and routed-expert), bytes in system RAM, FLOPs per token, for one step.

    outputs=False: a step whose tokens need no logits (a prompt's micro-batches before its last one, which
    llama-bench's pp runs at -ub 1 time as decode steps). llama.cpp keeps only the output rows (build_inp_out_ids)
    after the last block's attention (src/models/llama.cpp, qwen3.cpp, ...) or, for OUTPUT_ROWS_AFTER_LAST_BLOCK,
    after the output norm; with none, what follows are empty tensors, which the backends skip: their weights are
    not read."""
    devices = hw.devices
    touched = _touched(spec, st.batch)
    kv = mem.kv.per_layer
    out_read = head_bytes(spec, w) if outputs else 0
    last_block = spec.n_layers - 1
    skip_dense = skip_expert = 0.0  # the last block's FFN bytes a step without outputs does not read
    if not outputs and spec.architecture not in OUTPUT_ROWS_AFTER_LAST_BLOCK:
        skip_dense = (w.per_layer[last_block] - w.experts_per_layer[last_block]) * _last_ffn_share(spec)
        skip_expert = w.experts_per_layer[last_block] * touched
    flops = 2 * matmul_params(spec)[0]
    dense = [0.0] * len(devices)
    expert = [0.0] * len(devices)
    params = [0.0] * len(devices)
    matmul_bytes = w.total - (0 if spec.tied_embeddings else w.token_embd)
    per_byte = matmul_params(spec)[1] / matmul_bytes if matmul_bytes > 0 else 0.0  # weights per byte of the file
    common = dict(flops_per_token=flops, n_layers=spec.n_layers, n_kernels=step_kernels(spec), batch=st.batch,
                  n_moe_layers=sum(1 for e in w.experts_per_layer if e) if spec.moe else 0)
    if not devices:
        total = sum(lw - ew + ew * touched for lw, ew in zip(w.per_layer, w.experts_per_layer)) + out_read + sum(kv) \
            - skip_dense - skip_expert
        return DecodeTerms(device_dense=[], device_expert=[], device_params=[], cpu_bytes=total, parallel=False,
                           **common)
    if st.engine in ("vllm", "sglang"):
        tp = len(devices)
        d_all = sum(lw - ew for lw, ew in zip(w.per_layer, w.experts_per_layer)) + out_read + sum(kv) - skip_dense
        e_all = sum(w.experts_per_layer) * touched - skip_expert
        link = "nvlink" if all(d.nvlink for d in devices) else "pcie"
        p_all = (d_all - sum(kv) + e_all) * per_byte
        return DecodeTerms(device_dense=[d_all / tp] * tp, device_expert=[e_all / tp] * tp,
                           device_params=[p_all / tp] * tp, cpu_bytes=0.0, parallel=True, link=link, **common)
    cpu = 0.0
    for i, d in enumerate(_layer_devices(spec, st, mem, len(devices))):
        e_read = w.experts_per_layer[i] * touched
        dense_read = w.per_layer[i] - w.experts_per_layer[i] + kv[i]
        if i == last_block:
            e_read, dense_read = e_read - skip_expert, dense_read - skip_dense
        if d is None:
            cpu += dense_read + e_read
        elif i < cpu_expert_layers and spec.moe:  # --n-cpu-moe N: experts of the first N blocks stay in RAM
            dense[d] += dense_read
            cpu += e_read
        else:
            dense[d] += dense_read
            expert[d] += e_read
            params[d] += e_read * per_byte
        if d is not None:
            params[d] += (dense_read - kv[i]) * per_byte
    # the output layer sits on the last device that holds weights (a split may leave later devices empty)
    last = max((i for i, d in enumerate(mem.per_device) if d.weights_bytes > 0), default=None)
    output_on_gpu = st.engine == "mlx" or (last is not None
                                           and (mem.gpu_layers > 0 or st.gpu_layers is None or st.gpu_layers >= 1))
    if output_on_gpu:
        dense[-1 if last is None else last] += out_read
        params[-1 if last is None else last] += out_read * per_byte
    else:
        cpu += out_read
    return DecodeTerms(device_dense=dense, device_expert=expert, device_params=params, cpu_bytes=cpu, parallel=False,
                       **common)


def _cublas_work(spec: ModelSpec, st: RunSettings, devices: list[Device], where: list[int | None],
                 m: int) -> tuple[float, list[float]]:
    """What llama.cpp's CUDA/HIP backend adds to a micro-batch of m tokens where its own quantized kernels
    decline it (estimator/expert_kernels.py): launches of the MoE blocks it runs one expert at a time (m tokens
    reach E·(1-(1-k/E)^m) experts), and per device the bytes of the F16 copies the cuBLAS path writes and reads."""
    from .tensors import inventory

    k, e = (spec.moe.n_experts_used, spec.moe.n_experts) if spec.moe else (1, 1)
    launches, copies = 0.0, [0.0] * len(devices)
    ccs = {d.compute_capability for d in devices}
    rows = (1024, 1025) if spec.moe else ()  # MMF's bound on an expert's output rows: either side of it
    if not any(dequantizes(cc, st.quant, m) or any(sorted_path(cc, st.quant, m, e, r) for r in rows) for cc in ccs):
        return launches, copies  # every matmul of this micro-batch runs in llama.cpp's own kernels
    reached = e * (1 - (1 - k / e) ** m)
    for t in inventory(spec):
        if t.vision or t.mtp or t.layer is None or where[t.layer] is None or not t.quantizable:
            continue
        d = where[t.layer]
        cc = devices[d].compute_capability
        if not t.expert:
            if dequantizes(cc, st.quant, m):
                copies[d] += t.n * 4  # F16 copy written, then read by the GEMM
        elif len(t.shape) == 3 and sorted_path(cc, st.quant, m, e, t.shape[1]):
            per_launches, per_copies = expert_matmuls(cc, st.quant, m, k, e)
            launches += SORTED_CALL_LAUNCHES + reached * per_launches
            copies[d] += reached * per_copies * t.shape[0] * t.shape[1] * 4
    return launches, copies


def prefill_terms(spec: ModelSpec, w: WeightBytes, st: RunSettings, hw: Hardware, mem: MemoryBreakdown, *,
                  tokens: int, depth: int, n_batch: int = DEFAULT_N_BATCH, backend: str | None = None,
                  cpu_expert_layers: int = 0) -> PrefillTerms:
    """Micro-batch FLOPs (attention grows with depth) and each device's weight bytes for a prompt.
    `backend`: llama.cpp's (default: the device's own); CUDA and HIP may run MoE blocks one expert at a time.
    `cpu_expert_layers`: --n-cpu-moe (its tensor overrides turn llama.cpp's pipeline off)."""
    devices = hw.devices
    paged = st.engine in ("vllm", "sglang")
    if paged:
        from .buffers import vllm_batch_defaults

        chunk = vllm_batch_defaults(devices[0].memory_bytes, devices[0].name)[0]
    else:
        chunk = st.ubatch
    n_active, n_routed = matmul_params(spec)[0], routed_params(spec)
    flops, attention, sizes, done = [], [], [], 0
    while done < tokens:
        m = min(chunk, tokens - done)
        attention.append(_attention_flops(spec, m, depth + done))
        flops.append(2 * n_active * m + attention[-1])
        sizes.append(m)
        done += m
    chunks = dict(chunk_flops=flops, chunk_tokens=sizes, chunk_expert_flops=[2 * n_routed * m for m in sizes],
                  chunk_attention_flops=attention,
                  expert_fraction=spec.moe.n_experts_used / spec.moe.n_experts if spec.moe else 0.0)
    if paged:
        per = (w.total - w.token_embd * (not spec.tied_embeddings)) / len(devices)
        return PrefillTerms(device_weights=[per] * len(devices), cpu_weights=0.0, chunks_per_batch=1, parallel=True,
                            **chunks)
    dev_w = [float(u.weights_bytes) for u in mem.per_device][:len(devices)]
    dev_w += [0.0] * (len(devices) - len(dev_w))
    cpu_w = max(0, mem.host_weights_bytes - w.token_embd) if devices else 0.0
    if devices and st.engine in ("llama.cpp", "ollama") and (backend or default_backend(devices[0])) in ("cuda", "hip"):
        where = _layer_devices(spec, st, mem, len(devices))
        by_size = {m: _cublas_work(spec, st, devices, where, m) for m in set(sizes)}
        work = [by_size[m] for m in sizes]
        if any(n or any(b) for n, b in work):
            chunks.update(chunk_launches=[n for n, _ in work], chunk_dequant_bytes=[b for _, b in work])
        if spec.moe:
            cc = devices[0].compute_capability
            tiles = [expert_tiles(cc, st.quant, m, spec.moe.n_experts_used, spec.moe.n_experts) for m in sizes]
            if any(tiles):
                chunks.update(chunk_expert_tiles=tiles)
            chunks.update(expert_rate=integer_dot_share(backend_key(st.engine, devices[0], backend), devices[0],
                                                        st.quant))
    # llama_context (src/llama-context.cpp l. 432) pipelines micro-batches across devices only when every block
    # and the output layer are on them and no tensor is overridden (--n-cpu-moe, -ot)
    pipelined = mem.gpu_layers >= spec.n_layers and not (cpu_expert_layers or st.cpu_moe_layers)
    return PrefillTerms(device_weights=dev_w, cpu_weights=float(cpu_w), parallel=False,
                        chunks_per_batch=max(1, min(n_batch, tokens) // chunk) if pipelined else 1, **chunks)


def decode_parts(t: DecodeTerms, devices: list[Device], eff: Efficiency, quant: QuantRates, cpu: CpuRates, *,
                 ram_bw_gbs: float | None, threads: int | None, tflops: float | None, cpu_ghz: float | None = None,
                 cpu_arch: str | None = None, arch_factor: float = 1.0,
                 device_tflops: list[float | None] | None = None, device_bandwidth: list[float] | None = None,
                 graphs: bool = True, pdl: bool = False) -> dict[str, float]:
    """Milliseconds per decode step, by cause. A device's step is its weight and KV reads or, where its
    ALUs are slower than its memory, the matrix-vector work on the weights it holds (`device_tflops`).
    `device_bandwidth`: each device's measured bandwidth share relative to its backend's η (1: as η). `graphs`: the
    step replays as a CUDA graph (else eager_fixed_ms); `pdl`: its kernels overlap their launches (× pdl_fixed)."""
    per = []
    experts = sum(t.device_expert) or 1.0
    for i, (dev, dense, expert) in enumerate(zip(devices, t.device_dense, t.device_expert)):
        bw = dev.bandwidth_gbs * 1e9 * eff.bandwidth * quant.bandwidth * arch_factor
        if device_bandwidth:
            bw *= device_bandwidth[i]
        blocks = t.n_moe_layers if t.parallel else t.n_moe_layers * expert / experts  # blocks this device holds
        latency = eff.moe_ms * blocks / REFERENCE_LAYERS if expert else 0.0
        ms = (dense + expert) / bw * 1e3
        tf = device_tflops[i] if device_tflops else None
        if tf:
            ms = max(ms, 2 * t.device_params[i] / (tf * 1e12 * eff.decode_compute * arch_factor) * 1e3)
        per.append(ms + latency)
    gpu = (max(per) if t.parallel else sum(per)) if per else 0.0
    cpu_ms = 0.0
    if t.cpu_bytes:
        bw, _ = cpu_stream_gbs(cpu, ram_bw_gbs, threads, cpu_ghz, cpu_arch)
        cpu_ms = t.cpu_bytes / (bw * 1e9 * arch_factor) * 1e3
    fixed = eff.fixed_ms if graphs or eff.eager_fixed_ms is None else eff.eager_fixed_ms
    if pdl and eff.pdl_fixed is not None:
        fixed *= eff.pdl_fixed
    overhead = fixed * fixed_scale(t) if devices else 0.0
    if t.parallel and len(devices) > 1:
        overhead += 2 * t.n_layers * ALLREDUCE_US[t.link] / 1e3
    elif not t.parallel:
        overhead += eff.split_ms * split_boundaries(t)
    compute = 0.0
    if t.batch > 1 and tflops:
        compute = t.batch * t.flops_per_token / (tflops * 1e12 * eff.batch_compute) * 1e3
    return {"GPU bandwidth": gpu, "system RAM bandwidth": cpu_ms, "per-step overhead": overhead, "compute": compute}


def split_boundaries(t: DecodeTerms) -> int:
    """Device boundaries a layer-split step crosses: one fewer than the devices holding a share of its reads."""
    return max(0, sum(1 for d, e in zip(t.device_dense, t.device_expert) if d + e > 0) - 1)


def cpu_stream_gbs(cpu: CpuRates, ram_bw_gbs: float | None, threads: int | None, ghz: float | None,
                   arch: str | None) -> tuple[float, bool]:
    """GB/s the CPU side of a decode step streams, and whether the cores (not the RAM) set it: the RAM's peak at
    η_cpu, capped by what the threads' dot products take at their clock (no cap when the core count is unknown)."""
    ram = (ram_bw_gbs or DEFAULT_RAM_BANDWIDTH_GBS) * cpu.bandwidth
    cores = threads * cpu.thread_gbs(ghz, arch) if threads else float("inf")
    return min(ram, cores), cores < ram


def tile_flops(flops: float, expert_flops: float, tokens: int, expert_fraction: float, eff: Efficiency,
               attention_flops: float = 0.0, expert_tiles: tuple[int, float] | None = None,
               expert_rate: float = 1.0) -> float:
    """A micro-batch's FLOPs as the kernels pay for them: a matmul over m tokens runs at m/(m + m½) of the
    large-batch rate, i.e. each weight it loads costs 2·m½ FLOPs more. A routed expert sees only m·k/E of the
    tokens (64 of 512 on a 32-expert top-4 model, 4 of 64 on 128 experts top-8), so MoE prefill at small
    micro-batches loses most of the rate; but only the experts the micro-batch reaches, E·(1-(1-k/E)^m), are
    loaded (64 % of them at 16 tokens on 128 experts top-8). The expert kernels' large-batch rate is κ of the
    dense one (× `expert_rate` on a GPU without dp4a), the attention's (QKᵀ and PV, which load no
    weights) α of it."""
    dense = flops - expert_flops - attention_flops
    per_expert = tokens * expert_fraction
    out = dense * (tokens + eff.half_tokens) / tokens
    if expert_flops and per_expert:
        reached = 1 - (1 - expert_fraction) ** tokens
        # MMQ's grouped kernel computes whole tiles of J columns (an expert's tokens rounded up, m½ per tile);
        # elsewhere a reached expert is one tile with nothing to pad
        width, tiles = expert_tiles or (0, 1.0)
        padding = eff.tile_padding * (reached * tiles * width - per_expert) if expert_tiles else 0.0
        cols = per_expert + padding + reached * tiles * eff.half_tokens
        out += expert_flops * cols / per_expert / (eff.expert_compute * expert_rate)
    return out + attention_flops / eff.attention_compute


def prefill_seconds(t: PrefillTerms, devices: list[Device], device_tflops: list[float], eff: Efficiency,
                    quant: QuantRates, *, arch_factor: float = 1.0,
                    device_bandwidth: list[float] | None = None) -> float:
    """A prompt's prefill time: each micro-batch compute- or weight-read-bound per device.

    Layer split over G devices: the k micro-batches of one n_batch overlap as a pipeline, ideally
    k·G/(k+G−1) faster than one after another; ρ (fitted) is the share of that gain reached.
    """
    share = sum(t.device_weights) or 1.0
    total = 0.0
    for i, f in enumerate(t.chunk_flops):
        if t.chunk_tokens:
            f = tile_flops(f, t.chunk_expert_flops[i], t.chunk_tokens[i], t.expert_fraction, eff,
                           t.chunk_attention_flops[i], t.chunk_expert_tiles[i] if t.chunk_expert_tiles else None,
                           t.expert_rate)
        per = []
        for j, (dev, tf, wb) in enumerate(zip(devices, device_tflops, t.device_weights)):
            part = f / len(devices) if t.parallel else f * wb / share
            t_compute = part / (tf * 1e12 * eff.compute * quant.compute * arch_factor)
            bw_share = device_bandwidth[j] if device_bandwidth else 1.0
            t_read = wb / (dev.bandwidth_gbs * 1e9 * eff.bandwidth * bw_share * quant.bandwidth * arch_factor)
            t_copy = 0.0  # the cuBLAS path's F16 copies run before their GEMMs, not beside them
            if t.chunk_dequant_bytes:
                t_copy = t.chunk_dequant_bytes[i][j] / (dev.bandwidth_gbs * 1e9 * eff.bandwidth * bw_share)
            per.append(max(t_compute, t_read) + t_copy)
        step = max(per) if t.parallel else sum(per)
        if t.chunk_launches:  # launched eagerly from a host loop: each as one counted kernel of an eager step
            step += t.chunk_launches[i] * launch_ms(eff) / 1e3
        total += step + (t.cpu_weights / (PCIE4_X16_GBS * 1e9) if t.cpu_weights else 0.0) + eff.fixed_ms / 1e3
    g = len(devices)
    if not t.parallel and g > 1:
        k = min(t.chunks_per_batch, len(t.chunk_flops))
        ideal = k * g / (k + g - 1)
        total /= 1 + eff.pipeline * (ideal - 1)
    return total


def cpu_prefill_seconds(t: PrefillTerms, cpu: CpuRates, threads: int, ghz: float | None = None,
                        arch: str | None = None, arch_factor: float = 1.0) -> float:
    """A prompt on the CPU cores alone: its FLOPs at the threads' rate (× `arch_factor`, as on a GPU)."""
    return sum(t.chunk_flops) / (cpu.prefill_gflops(threads, ghz, arch) * arch_factor * 1e9)


def estimate_speed(spec: ModelSpec, weights: WeightBytes, settings: RunSettings, hw: Hardware,
                   memory: MemoryBreakdown, *, prompt_tokens: int = TTFT_PROMPT, prompt_depth: int = 0,
                   calibration, cpu_expert_layers: int = 0, ram_bandwidth_gbs: float | None = None,
                   backend: str | None = None, n_batch: int = DEFAULT_N_BATCH) -> Speed:
    """Decode tokens/s (per sequence and aggregate), prefill tokens/s and TTFT for one sized plan.

    `memory` is the breakdown `estimate()` gave for the same weights/settings/hardware (it says
    where each block lives); `cpu_expert_layers` keeps the routed experts of the first N blocks
    in system RAM (llama.cpp --n-cpu-moe). `backend` picks llama.cpp's backend (cuda, hip, vulkan,
    metal, sycl, cann, cpu; default from the device). `calibration` is the speed fit the caller loaded
    (catalogs.speed_calibration.load_calibration for the bundled one).
    """
    cpu_expert_layers = cpu_expert_layers or settings.cpu_moe_layers
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"unknown backend '{backend}' (choose from: {', '.join(BACKENDS)})")
    notes: list[str] = []
    devices = hw.devices
    for dev in devices:
        if not dev.bandwidth_gbs:
            raise ValueError(f"the catalog has no memory bandwidth for {dev.name}: speed cannot be estimated")
    ref = devices[0] if devices else None
    key = backend_key(settings.engine, ref, backend)
    cpu = calibration.cpu
    eff = calibration.efficiency(key) if devices else Efficiency(
        bandwidth=cpu.bandwidth, compute=1.0, batch_compute=1.0, fixed_ms=0.0, calibrated=cpu.calibrated,
        basis=cpu.basis)
    if not eff.calibrated:
        notes.append(msg("%(key)s: no published benchmark in the calibration set; %(basis)s", key=key, basis=eff.basis))
    quant = calibration.quant_rates(quant_family(settings.quant))
    arch_factor = 1.0
    if spec.recurrent_layers and settings.engine in ("llama.cpp", "ollama"):
        arch_factor = calibration.recurrent_factor
        notes.append(msg("recurrent / gated-delta-net layers: llama.cpp runs these models at %(f)s× the rate of "
                         "attention-only ones (fitted on the published runs of such models)",
                         f=Num(arch_factor, ".2f")))
    threads = hw.cpu_threads
    terms = decode_terms(spec, weights, settings, hw, memory, cpu_expert_layers=cpu_expert_layers)
    unified = bool(ref and ref.unified_memory)
    ram_bw = ram_bandwidth_gbs or hw.ram_bandwidth_gbs or (ref.bandwidth_gbs if unified and ref else None)
    if terms.cpu_bytes and not ram_bw:
        notes.append(msg("system RAM bandwidth unknown: assumed %(gbs)s GB/s (dual-channel DDR5-5600); pass --ram-bw "
                         "or measure it with `fitprobe probe --bench`", gbs=Num(DEFAULT_RAM_BANDWIDTH_GBS)))
    if terms.cpu_bytes and not threads:
        notes.append(msg("CPU core count unknown: the RAM bandwidth is taken as reachable"))
    ghz = hw.cpu_ghz
    if (terms.cpu_bytes or not devices) and threads and not ghz:
        notes.append(msg("CPU clock unknown: assumed %(ghz)s GHz per core; pass --cpu-ghz",
                         ghz=Num(DEFAULT_CPU_GHZ, "g")))
    if (terms.cpu_bytes or not devices) and hw.cpu_arch == "atom":
        notes.append(msg("Intel Atom-line cores (N100-class, Celeron/Pentium N and J): llama.cpp's AVX2 kernels run "
                         "on their 128-bit vector units at %(share)s× an x86 core's rate per clock",
                         share=Num(ATOM_VECTOR_SHARE, ".1f")))
    dev_tflops = [calibration.device_tflops(d, key) for d in devices]
    dev_bw = [calibration.device_bandwidth(d, key) for d in devices]
    chips = {}
    for d in devices:
        f = calibration.device_factor(d, key)
        if f and max(abs(f.bandwidth - 1), abs(f.compute - 1)) >= 0.02:
            chips.setdefault(f.chip, (d.name if d.kind != "apple" else f.chip, f))
    for d in {d.catalog_key: d for d in devices}.values():
        sibling = calibration.borrowed_rate(d, key)
        if sibling:
            notes.append(msg("%(gpu)s on %(key)s: no published prefill run of its own; prefill is priced at the "
                             "measured rate of %(like)s, the same die, × %(scale)s (%(basis)s)", gpu=d.name, key=key,
                             like=sibling.like, scale=Num(sibling.scale, ".3f"), basis=sibling.basis))
    for name, f in chips.values():
        notes.append(msg("%(chip)s on %(key)s: %(bw)s× the backend's bandwidth share in decode and %(c)s× its "
                         "prefill compute share, as measured on this chip (runs: %(points)s, sources: %(sources)s)",
                         chip=name, key=key, bw=Num(f.bandwidth, ".2f"), c=Num(f.compute, ".2f"),
                         points=f.points, sources=f.sources))
    tflops = None
    if devices and all(dev_tflops):
        tflops = sum(dev_tflops) if terms.parallel else min(dev_tflops)
    elif not devices and threads:
        tflops = cpu.prefill_gflops(threads, ghz, hw.cpu_arch) / 1e3
    if settings.batch > 1 and not tflops:
        notes.append(msg("no compute figure for this device: batched decode counted as bandwidth bound only"))
    graphs = key != "llama.cpp/cuda" or all(cuda_graphs(d) for d in devices)
    if not graphs and eff.eager_fixed_ms is not None:
        notes.append(msg("no CUDA graphs on GPUs older than Volta: llama.cpp launches each kernel of a decode step, "
                         "%(ms)s ms per step instead of %(graphs)s",
                         ms=Num(eff.eager_fixed_ms * fixed_scale(terms), ".1f"),
                         graphs=Num(eff.fixed_ms * fixed_scale(terms), ".1f")))
    pdl = overlaps_launches(key, devices)
    if pdl and eff.pdl_fixed is not None:
        notes.append(msg("compute capability 9.0 and newer: llama.cpp's CUDA kernels overlap their launches (PDL), "
                         "%(ms)s ms of per-step overhead instead of %(full)s, as the 2026 builds measured",
                         ms=Num(eff.fixed_ms * eff.pdl_fixed * fixed_scale(terms), ".1f"),
                         full=Num(eff.fixed_ms * fixed_scale(terms), ".1f")))
    dot_shares = [integer_dot_share(key, d, settings.quant) for d in devices]
    dot_tflops = [tf and tf * share for tf, share in zip(dev_tflops, dot_shares)]
    for d in {d.catalog_key: d for d, share in zip(devices, dot_shares) if share < 1}.values():
        notes.append(msg("%(gpu)s (compute capability %(cc)s) has no dp4a: llama.cpp's quantized CUDA kernels "
                         "multiply byte by byte on its FP32 lanes, at half its FP16 figure", gpu=d.name,
                         cc=d.compute_capability))
    parts = decode_parts(terms, devices, eff, quant, cpu, ram_bw_gbs=ram_bw, threads=threads, tflops=tflops,
                         cpu_ghz=ghz, cpu_arch=hw.cpu_arch, arch_factor=arch_factor, device_tflops=dot_tflops,
                         device_bandwidth=dev_bw, graphs=graphs, pdl=pdl)
    if terms.parallel and len(devices) > 1:
        link = terms.link
        notes.append(msg("tensor parallel %(n)s over %(link)s: 2 all-reduces per layer at ~%(us)s µs each",
                         n=len(devices), link="NVLink" if link == "nvlink" else "PCIe",
                         us=Num(ALLREDUCE_US[link], ".0f")))
    if len(devices) > 1 and not terms.parallel:
        notes.append(msg("llama.cpp layer split over %(n)s devices: decode runs them one after another and waits "
                         "%(ms)s ms a step at each of the %(b)s boundaries for the hidden state's copy, prefill "
                         "overlaps only the micro-batches of one batch", n=len(devices), b=split_boundaries(terms),
                         ms=Num(eff.split_ms, ".2f")))
    step_ms = sum(parts.values())
    bound = max(parts, key=parts.get)
    if bound == "system RAM bandwidth" and cpu_stream_gbs(cpu, ram_bw, threads, ghz, hw.cpu_arch)[1]:
        bound = "CPU cores"  # the cores' dot products, not the RAM, set the pace: more threads or clock would help
    prefill = ttft = None
    pt = prefill_terms(spec, weights, settings, hw, memory, tokens=prompt_tokens, depth=prompt_depth,
                       n_batch=n_batch, backend=backend, cpu_expert_layers=cpu_expert_layers)
    if devices and all(dev_tflops):
        t_pp = prefill_seconds(pt, devices, dev_tflops, eff, quant, arch_factor=arch_factor, device_bandwidth=dev_bw)
        prefill, ttft = prompt_tokens / t_pp, t_pp * 1e3
        if pt.chunk_launches and any(pt.chunk_launches):
            notes.append(msg("llama.cpp's %(backend)s kernels do not take this model's routed experts in micro-batches "
                             "of %(ubatch)s tokens on this GPU: it runs them one expert at a time behind two host "
                             "synchronisations, %(n)s launches per micro-batch (%(ms)s ms of the prompt's prefill)",
                             backend=key.split("/")[-1].upper(), ubatch=max(pt.chunk_tokens),
                             n=Num(max(pt.chunk_launches), ",.0f"),
                             ms=Num(sum(pt.chunk_launches) * launch_ms(eff), ",.0f")))
        if pt.chunk_dequant_bytes and any(map(any, pt.chunk_dequant_bytes)):
            notes.append(msg("on this GPU llama.cpp multiplies these quantized weights through cuBLAS/hipBLAS: each "
                             "micro-batch first writes F16 copies of them (%(size)s written and read per "
                             "micro-batch)", size=gib(max(map(sum, pt.chunk_dequant_bytes)), 1)))
    elif not devices and threads:
        t_pp = cpu_prefill_seconds(pt, cpu, threads, ghz, hw.cpu_arch, arch_factor)
        prefill, ttft = prompt_tokens / t_pp, t_pp * 1e3
    elif devices:
        notes.append(msg("the catalog has no FP16 TFLOPS for this device and no benchmark measured it: prefill and "
                         "TTFT are not estimated"))
    else:
        notes.append(msg("CPU core count unknown: prefill and TTFT are not estimated"))
    gpu_bytes = sum(terms.device_dense) + sum(terms.device_expert)
    return Speed(decode_tps=1e3 / step_ms, aggregate_tps=settings.batch * 1e3 / step_ms, batch=settings.batch,
                 prefill_tps=prefill, ttft_ms=ttft, prompt_tokens=prompt_tokens,
                 bytes_per_token=int(gpu_bytes + terms.cpu_bytes), gpu_bytes_per_token=int(gpu_bytes),
                 cpu_bytes_per_token=int(terms.cpu_bytes), gpu_ms=parts["GPU bandwidth"],
                 cpu_ms=parts["system RAM bandwidth"], overhead_ms=parts["per-step overhead"],
                 compute_ms=parts["compute"], backend=key, efficiency=eff,
                 decode_error=calibration.held_out_error(key, "decode"),
                 prefill_error=calibration.held_out_error(key, "prefill") if prefill else None, bound=bound, notes=notes)
