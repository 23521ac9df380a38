"""Published speed figures (data/speed_points.json) and the per-backend constants fitted on them
(data/speed_calibration.json).

`scripts/speed_accuracy.py --write` refits the constants from the points; this module only reads them, and
builds the sizing inputs of one point so the script and the tests run a point exactly the way the report runs
a plan. A plan loads the constants alone: the points are the fit's and the tests' (most of the bytes).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Literal
from pathlib import Path

from dataclasses import field

from fitprobe.catalogs.validated import load_json_file
from fitprobe.estimator.fields import doc, record, replace
from fitprobe.estimator.hardware import Device
from fitprobe.estimator.speed import (CpuRates, Efficiency, HeldOutError, QuantRates, apple_chip, apple_gpu_tensor,
                                      chip_key)

PATH = Path(__file__).parent / "data" / "speed_calibration.json"
POINTS_PATH = Path(__file__).parent / "data" / "speed_points.json"
GIB = 1 << 30

# MLX has no published point: it runs on the same Apple GPU as llama.cpp's Metal backend and borrows its fit.
# Any other backend without points takes the cross-backend prior (both marked uncalibrated in the output).
FALLBACK = {"mlx/metal": "llama.cpp/metal"}
# The K-quants are the reference kernel family (φ = ψ = 1); the fit asks for them a million times.
K_QUANTS = QuantRates()
# FORMULAS §4.1/§4.2 [estimate]: CPU decode 0.5–0.8 of measured bandwidth, prefill 0.3–0.6 of peak.
CPU_DEFAULT = CpuRates(bandwidth=0.65, gbs_per_ghz=3.0, gflops_per_ghz=15.0, calibrated=False,
                       basis="midpoint of FORMULAS §4.1 (η 0.5–0.8); per-core rates not fitted")


@record
class Point:
    id: str
    model: str
    model_note: str = ""
    quant: str
    file_gib: float | None = None
    gpu: str | None = doc(default=None, description="gpus.json key; None: CPU only")
    gpu_note: str = ""
    count: int = 1
    engine: str
    backend: str = doc(description="llama.cpp backend (cuda, hip, vulkan, metal, sycl, cpu); vllm: cuda")
    backend_label: str
    kind: str  # decode | prefill
    tps: float = doc(gt=0)
    tokens: int
    depth: int = 0
    batch: int = 1
    outputs: bool = doc(default=True, description="whether each timed step computes logits; false for a decode "
                                                  "timed as a prompt at a tiny -ub (llama-bench pp512 -ub 1), whose "
                                                  "steps before the last need none")
    ubatch: int = 512
    n_batch: int = 2048
    threads: int | None = doc(default=None, description="CPU threads of a CPU-only run")
    ram_bw_gbs: float | None = doc(default=None, description="peak RAM bandwidth of a CPU-only run's host")
    ram_note: str = ""
    cpu_ghz: float | None = doc(default=None, gt=0, le=10, description="a CPU-only run's core clock: the CPU's "
                                                                     "maximum turbo (the cores that ran it)")
    cpu_note: str = doc(default="", description="where the clock comes from")
    cpu_arch: Literal["x86_64", "atom", "arm64", "apple"] = doc(default="x86_64",
                                                                description="a CPU-only run's core class")
    date: str | None = doc(default=None, description="YYYY-MM of the run (its llama.cpp build); None: not stated")
    date_note: str = doc(default="", description="how a date the source does not print was inferred")
    source: str


@record
class DeviceRate:
    gpu: str
    backend: str
    tflops: float
    from_points: list[str]
    earlier: bool = doc(default=False, description="measured on runs of builds before 2026, where the device also "
                                                   "has later ones: calibration prices those runs with it, a plan "
                                                   "the later rate")


@record
class DeviceFactor:
    """What one chip reaches on one backend relative to that backend's constants, fitted on its own runs.

    Chips on one backend differ in the share of their bandwidth and compute a kernel reaches (an M1 Max GPU
    cannot stream its 400 GB/s, Alchemist Arc cards run SYCL's matrix-vector kernels far below Battlemage);
    each factor is drawn towards 1 by how many sources measured the chip, so one publication moves it little."""

    chip: str = doc(description="catalog key, or the Apple chip ('Apple M1 Max') for every Mac carrying it")
    backend: str
    bandwidth: float = doc(default=1.0, gt=0, description="× the backend's η in decode")
    compute: float = doc(default=1.0, gt=0, description="× the backend's prefill MFU")
    points: int
    sources: int


@record
class DieSibling:
    """A card without a measured rate on a backend that another card of the same die has: prefill borrows that
    rate, scaled by their compute units × boost clock (same kernels, same code path in llama.cpp)."""

    gpu: str = doc(description="catalog key of the card that borrows")
    like: str = doc(description="catalog key of the card whose measured rate it takes")
    scale: float = doc(gt=0.5, le=2, description="its compute units × boost clock over the other's")
    basis: str = doc(description="the die, both cards' units and clocks, and where they are published")


@record
class ChipCompute:
    """Apple GPU shader TFLOPS (FP16 matmuls run at the FP32 rate on Apple GPUs)."""

    chip: str
    tflops: float
    source: str
    gpu_cores: int | None = doc(default=None, gt=0, description="the bin the figure is for, where the chip is sold "
                                                               "with several core counts: another bin scales it")


# GeForce cards run FP16 matmuls with FP32 accumulation, the catalog's fp16_tflops, at a quarter of their INT8
# tensor rate; data-centre and workstation parts at half of it (RTX 4090 165.2 / 660.6; A40 149.7 / 299.3, NVIDIA
# datasheets).
GEFORCE_INT8_PER_FP16 = 4


def tensor_rate(device: Device, backend: str) -> float:
    """The compute figure prefill is priced on: the catalog's FP16 (FP32-accumulate) TFLOPS, except on llama.cpp's
    CUDA backend, whose quantized matmuls run on the INT8 tensor cores (MMQ on Turing and newer, mmq.cu
    ggml_cuda_should_use_mmq) and whose F16 ones accumulate in FP16 (CUBLAS_COMPUTE_16F, ggml-cuda.cu): both at half
    the INT8 rate on every tensor-core card. In the GeForce cards' units (INT8 / 4) their figure is unchanged and a
    data-centre or workstation card's is halved."""
    if backend == "llama.cpp/cuda" and device.int8_tops:
        return device.int8_tops / GEFORCE_INT8_PER_FP16
    return device.fp16_tflops


@record
class SpeedCalibration:
    schema: int
    compiled: str
    backends: dict[str, Efficiency] = field(default_factory=dict)
    prior: Efficiency | None = doc(default=None, description="the constants of every GPU backend fitted together: "
                                                             "what each backend's own fit is drawn towards, and "
                                                             "what a backend without points uses")
    quant_families: dict[str, QuantRates] = field(default_factory=dict)
    cpu: CpuRates = field(default_factory=lambda: CPU_DEFAULT)
    apple_compute: list[ChipCompute] = field(default_factory=list)
    device_rates: list[DeviceRate] = field(default_factory=list)
    device_factors: list[DeviceFactor] = field(default_factory=list)
    die_siblings: list[DieSibling] = doc(default_factory=list, description="cards that borrow a same-die card's "
                                                                         "measured rate where they have none")
    soc_compute: float = doc(default=1.0, gt=0, le=1.5,
                             description="prefill MFU of a power-shared SoC GPU (DGX Spark, Strix Halo) relative "
                                         "to a discrete card on the same backend")
    apple_tensor_compute: float = doc(
        default=1.0, ge=1, le=4,
        description="prefill rate of an Apple GPU whose matmuls run on its Neural Accelerators (M5 and later: "
                    "llama.cpp's Metal tensor API) relative to its shader FP32 rate; at most 4, the matrix-FP16 / "
                    "SIMD-FP32 ratio measured per core on the A19 (tzakharko.github.io/apple-neural-accelerators-"
                    "benchmark: 7,500 / 1,880 GFLOPS)")
    recurrent_factor: float = doc(default=0.5, gt=0, le=1,
                                  description="rate of a model with recurrent / gated-delta-net layers on llama.cpp "
                                              "relative to an attention-only one (FORMULAS §4.1 starts from 0.5×)")
    earlier_fixed_ms: dict[str, float] = doc(
        default_factory=dict, description="t_fixed of a backend's published runs from builds before the pinned build's "
                                          "era (llama.cpp CUDA graph builds before 2026, whose steps fused fewer "
                                          "kernels): fitted so those runs still calibrate η and the rest; a plan uses "
                                          "the backend's fixed_ms")
    earlier_eager_fixed_ms: dict[str, float] = doc(
        default_factory=dict, description="the same for builds that launched every kernel themselves (GPUs or builds "
                                          "without CUDA graphs) before the pinned build's era: fitted so those runs "
                                          "still calibrate η and the rest; a plan uses the backend's eager_fixed_ms")
    earlier_compute: dict[str, float] = doc(
        default_factory=dict, description="prefill MFU of a backend's published runs from builds before the pinned "
                                          "build's era, relative to its compute (llama.cpp's Vulkan matmul "
                                          "shaders kept gaining through 2025): fitted so those runs still "
                                          "calibrate the rest; a plan uses the backend's compute")
    bandwidth_drift: dict[str, float] = doc(
        default_factory=dict, description="per backend (each Vulkan vendor its own), the share of its decode "
                                          "kernels' rate (bandwidth share and ALU rate) a build gave up per year of "
                                          "age before 2026-09, the newest runs' month (log units: a run of 2025-03 "
                                          "streams at exp(-1.5·drift) of η): fitted so older runs still calibrate η "
                                          "and the rest; a plan uses the backend's η and ε")
    held_out: dict[str, dict[str, HeldOutError]] = doc(
        default_factory=dict, description="per backend, decode and prefill: the error of its estimates on the published "
                                          "runs of each source when the fit leaves that source out")
    doc: str = ""

    def held_out_error(self, key: str, kind: str) -> HeldOutError | None:
        """The backend's held-out error (a backend that borrows another's fit, that one's)."""
        errors = self.held_out.get(key) or self.held_out.get(FALLBACK.get(key, ""), {})
        return errors.get(kind)

    def efficiency(self, key: str) -> Efficiency:
        if key in self.backends:
            return self.backends[key]
        other = FALLBACK.get(key)
        if other and other in self.backends:
            return replace(self.backends[other], calibrated=False, basis=f"uses the {other} fit")
        if self.prior is not None:
            return replace(self.prior, calibrated=False, basis="no points of its own: uses the cross-backend prior")
        base = self.backends.get("llama.cpp/cuda") or Efficiency(bandwidth=0.7, compute=0.5, batch_compute=0.5,
                                                                  fixed_ms=1.0)
        return replace(base, calibrated=False, basis="uses the llama.cpp/cuda fit")

    def device_factor(self, device: Device, backend: str) -> DeviceFactor | None:
        factors = self.device_factors
        if getattr(self, "_index_of", None) is not factors or len(self._index) != len(factors):
            self._index = {(f.chip, f.backend): i for i, f in enumerate(factors)}  # the fit asks millions of times
            self._index_of = factors
        i = self._index.get((chip_key(device), backend))
        return factors[i] if i is not None else None

    def device_bandwidth(self, device: Device, backend: str) -> float:
        """The chip's measured bandwidth share relative to the backend's η (1 without a factor)."""
        f = self.device_factor(device, backend)
        return f.bandwidth if f else 1.0

    def quant_rates(self, family: str) -> QuantRates:
        return self.quant_families.get(family) or K_QUANTS

    def device_tflops(self, device: Device, backend: str) -> float | None:
        """Dense TFLOPS for prefill: the catalog's figure, Apple's shader rate, or a measured rate.

        A non-Apple unified-memory SoC (DGX Spark, Strix Halo) shares one power budget between CPU and
        GPU and clocks its GPU down under sustained matmuls: its catalog peak is scaled by `soc_compute`
        (FORMULAS §4.2: AMD iGPU MFU 0.15–0.3 against 0.4–0.7 on discrete cards). An Apple GPU with Neural
        Accelerators (M5 and later) multiplies on them: its shader rate is scaled by `apple_tensor_compute`."""
        f = self.device_factor(device, backend)
        own = f.compute if f else 1.0
        if device.fp16_tflops:
            soc = device.unified_memory and device.kind != "apple"
            return tensor_rate(device, backend) * (self.soc_compute if soc else 1.0) * own
        if device.kind == "apple":
            chip = apple_chip(device)
            tensor = self.apple_tensor_compute if apple_gpu_tensor(device) else 1.0
            for c in self.apple_compute:
                if c.chip == chip:
                    cores = device.gpu_cores / c.gpu_cores if device.gpu_cores and c.gpu_cores else 1.0
                    return c.tflops * cores * tensor * own
        eff = self.efficiency(backend)
        own = self._measured_rate(device.catalog_key, backend)
        if own is not None:
            return own / eff.compute
        sibling = self.borrowed_rate(device, backend)
        return self._measured_rate(sibling.like, backend) * sibling.scale / eff.compute if sibling else None

    def _measured_rate(self, gpu: str | None, backend: str) -> float | None:
        return next((r.tflops for r in self.device_rates if r.gpu == gpu and r.backend == backend and not r.earlier),
                    None)

    def borrowed_rate(self, device: Device, backend: str) -> DieSibling | None:
        """The same-die card whose measured rate this one's prefill is priced at, where it has none of its own and
        no compute figure."""
        if device.fp16_tflops or device.kind == "apple" or self._measured_rate(device.catalog_key, backend):
            return None
        return next((s for s in self.die_siblings
                     if s.gpu == device.catalog_key and self._measured_rate(s.like, backend)), None)


@record
class SpeedPoints:
    """The published runs the constants are fitted on, and the rows left out with the reason."""

    schema: int
    compiled: str
    doc: str = ""
    excluded: list[dict] = field(default_factory=list)
    points: list[Point]


@lru_cache(maxsize=1)
def load_calibration() -> SpeedCalibration:
    return load_json_file(SpeedCalibration, PATH)


@lru_cache(maxsize=1)
def load_points() -> SpeedPoints:
    return load_json_file(SpeedPoints, POINTS_PATH)


def point_inputs(point: Point):
    """(spec, weights, settings, hardware, memory) of a benchmark run, weights scaled to the published file size."""
    from fitprobe.catalogs.gpus import load_gpus
    from fitprobe.catalogs.models import find_model
    from fitprobe.catalogs.quants import quant_table
    from fitprobe.catalogs.resolve import resolve
    from fitprobe.estimator.hardware import Hardware
    from fitprobe.estimator.memory import estimate
    from fitprobe.estimator.quant import weight_bytes
    from fitprobe.estimator.settings import RunSettings

    if find_model(point.model) is None:
        raise ValueError(f"calibration point {point.id}: model {point.model} is not in the catalog")
    spec = resolve(point.model).spec
    table = quant_table()
    fmt = table.find(point.quant)
    w = weight_bytes(spec, fmt, table)
    if point.file_gib:
        f = point.file_gib * GIB / w.total
        w = replace(w, total=int(w.total * f), token_embd=int(w.token_embd * f), output=int(w.output * f),
            per_layer=[int(x * f) for x in w.per_layer], experts_per_layer=[int(x * f) for x in w.experts_per_layer])
    if point.gpu is None:
        hw = Hardware(devices=[], system_ram_bytes=1 << 40, ram_bandwidth_gbs=point.ram_bw_gbs,
                      cpu_threads=point.threads, cpu_ghz=point.cpu_ghz, cpu_arch=point.cpu_arch)
    else:
        entry = next((e for e in load_gpus() if e.key == point.gpu), None)
        if entry is None:
            raise ValueError(f"calibration point {point.id}: GPU {point.gpu} is not in gpus.json")
        hw = Hardware(devices=[entry.device()] * point.count)
    mid = point.depth + (point.tokens // 2 if point.kind == "decode" else 0)
    st = RunSettings(quant=fmt.name, context=max(1, mid), engine=point.engine, batch=point.batch,
                     ubatch=point.ubatch, kv_cache_dtype="auto" if point.engine == "vllm" else "f16")
    return spec, w, st, hw, estimate(spec, fmt, table, st, hw, weights=w)
