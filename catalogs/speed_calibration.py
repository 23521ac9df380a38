"""Published speed figures and the per-backend constants fitted on them (data/speed_calibration.json).

`scripts/speed_accuracy.py --write` refits `backends` and `device_rates` from `points`; this
module only reads them, and builds the sizing inputs of one point so the script and the tests
run a point exactly the way the report runs a plan.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from dataclasses import field

from fitprobe.catalogs.validated import load_json_file
from fitprobe.estimator.fields import doc, record, replace
from fitprobe.estimator.speed import Efficiency

PATH = Path(__file__).parent / "data" / "speed_calibration.json"
GIB = 1 << 30

# Backends with no published point borrow a neighbour's fit (marked uncalibrated in the output).
FALLBACK = {"mlx/metal": "llama.cpp/metal", "llama.cpp/intel": "llama.cpp/amd",
            "llama.cpp/metal-ultra": "llama.cpp/metal", "llama.cpp/metal": "llama.cpp/metal-ultra"}
# FORMULAS §4.1/§4.2 [estimate]: CPU decode 0.5–0.8 of measured bandwidth, prefill 0.3–0.6 of peak.
CPU_DEFAULT = Efficiency(bandwidth=0.65, compute=0.45, batch_compute=0.45, fixed_ms=0.0, calibrated=False,
                         basis="midpoints of FORMULAS §4.1/§4.2 estimates for CPUs (η 0.5–0.8, MFU 0.3–0.6)")


@record
class Point:
    id: str
    model: str
    model_note: str = ""
    quant: str
    file_gib: float | None = None
    gpu: str
    gpu_note: str = ""
    count: int = 1
    engine: str
    backend_label: str
    kind: str  # decode | prefill
    tps: float = doc(gt=0)
    tokens: int
    depth: int = 0
    batch: int = 1
    ubatch: int = 512
    source: str


@record
class DeviceRate:
    gpu: str
    backend: str
    tflops: float
    from_points: list[str]


@record
class SpeedCalibration:
    schema: int
    compiled: str
    excluded: list[dict] = field(default_factory=list)
    points: list[Point]
    backends: dict[str, Efficiency] = field(default_factory=dict)
    device_rates: list[DeviceRate] = field(default_factory=list)
    doc: str = ""

    def efficiency(self, key: str) -> Efficiency:
        if key in self.backends:
            return self.backends[key]
        if key == "llama.cpp/cpu":
            return CPU_DEFAULT
        other = FALLBACK.get(key)
        if other and other in self.backends:
            return replace(self.backends[other], calibrated=False, basis=f"uses the {other} fit")
        base = self.backends.get("llama.cpp/cuda", CPU_DEFAULT)
        return replace(base, calibrated=False, basis="uses the llama.cpp/cuda fit")

    def device_tflops(self, gpu_key: str | None, backend: str) -> float | None:
        """Measured effective TFLOPS for a device the catalog gives no compute figure for."""
        for rate in self.device_rates:
            if rate.gpu == gpu_key and rate.backend == backend:
                return rate.tflops
        for rate in self.device_rates:
            if rate.gpu == gpu_key:
                return rate.tflops
        return None


@lru_cache(maxsize=1)
def load_calibration() -> SpeedCalibration:
    return load_json_file(SpeedCalibration, PATH)


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
    entry = next((e for e in load_gpus() if e.key == point.gpu), None)
    if entry is None:
        raise ValueError(f"calibration point {point.id}: GPU {point.gpu} is not in gpus.json")
    hw = Hardware(devices=[entry.device()] * point.count)
    mid = point.depth + (point.tokens // 2 if point.kind == "decode" else 0)
    st = RunSettings(quant=fmt.name, context=max(1, mid), engine=point.engine, batch=point.batch,
                     ubatch=point.ubatch, kv_cache_dtype="auto" if point.engine == "vllm" else "f16")
    return spec, w, st, hw, estimate(spec, fmt, table, st, hw, weights=w)
