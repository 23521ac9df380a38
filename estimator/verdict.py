"""fits / tight / exceeds, from per-device margins.

`tight` means the margin is inside the estimate's own measured error band (the p90 total error
that scripts/accuracy.py reports, stored in catalogs/data/error_band.json) or under the user's
minimum margin: the plan may work, but the estimate cannot promise it.
"""
from __future__ import annotations

from typing import Literal

from fitprobe.estimator.fields import record

from .hardware import Hardware
from .memory import MemoryBreakdown
from .message import gib, msg

Status = Literal["fits", "tight", "exceeds"]


class ErrorBand(float):
    """The estimate's measured error, per component (p90 of |error| in scripts/accuracy.py).

    As a float it is the band of the dominant components (weights, KV cache); `bytes_for`
    gives a plan's own band: each component's bytes times its measured error. `engines` holds
    the band measured on each engine family's own runs (llama.cpp GGUF vs vLLM checkpoints):
    their errors differ, so a plan is judged on its engine's band (`band_for`).
    """

    def __new__(cls, weights: float, kv_cache: float, buffers: float, engines: dict | None = None):
        band = super().__new__(cls, max(weights, kv_cache))
        band.weights, band.kv_cache, band.buffers = weights, kv_cache, buffers
        band.engines = dict(engines or {})
        return band

    def bytes_for(self, weights: int, kv_cache: int, buffers: int) -> int:
        return int(weights * self.weights + kv_cache * self.kv_cache + buffers * self.buffers)


# which measured runs judge an engine's plans: Ollama runs llama.cpp on GGUF files, SGLang loads the
# checkpoints vLLM does (MLX has no measured runs: the all-engine band)
ENGINE_FAMILY = {"llama.cpp": "llama.cpp", "ollama": "llama.cpp", "vllm": "vllm", "sglang": "vllm"}


def band_for(error_band: float, engine: str) -> float:
    """The band of this engine's family where the measured set has one, else the band given."""
    engines = getattr(error_band, "engines", None) or {}
    return engines.get(ENGINE_FAMILY.get(engine, ""), error_band)


def band_bytes(error_band: float, required: int, weights: int = 0, kv_cache: int = 0, buffers: int = 0) -> int:
    """Bytes of uncertainty in a requirement: per component when the band knows its parts."""
    if isinstance(error_band, ErrorBand) and weights + kv_cache + buffers:
        return error_band.bytes_for(weights, kv_cache, buffers)
    return int(error_band * required)


@record
class Verdict:
    status: Status
    margin_bytes: int
    utilization: float
    usable_bytes: int
    required_bytes: int
    limiting: str  # the device (or "system RAM") whose margin is smallest
    reason: str
    uncertainty_bytes: int = 0  # the plan's own error band on the limiting device


def status_of(required: int, usable: int, error_band: float, min_margin_bytes: int = 0,
              uncertainty: int | None = None) -> Status:
    """The rule itself: short -> exceeds; margin inside the error band or the minimum -> tight."""
    margin = usable - required
    if margin < 0:
        return "exceeds"
    band = uncertainty if uncertainty is not None else error_band * required
    if margin < band or margin < min_margin_bytes:
        return "tight"
    return "fits"


def judge(mem: MemoryBreakdown, hw: Hardware, *, error_band: float, min_margin_bytes: int = 0,
          now: bool = False) -> Verdict:
    """now=True judges against what is free right now (device free memory was applied in
    `estimate`; here the host side uses available rather than total RAM)."""
    candidates: list[tuple[int, int, str, int]] = []  # (required, usable, where, uncertainty)
    for dev in mem.per_device:
        candidates.append((dev.total_bytes, dev.usable_bytes, dev.name,
                           band_bytes(error_band, dev.total_bytes, dev.weights_bytes, dev.kv_cache_bytes, dev.buffers_bytes)))
    host_need = mem.host_total_bytes
    unified = bool(hw.devices) and all(d.unified_memory for d in hw.devices)
    # On unified memory the host side and the GPU share one pool: the device's own RAM.
    ram_total = hw.devices[0].memory_bytes if unified else hw.system_ram_bytes
    pool = None  # unified memory: GPU and host draw on one pool, counted once in the totals
    if host_need and ram_total:
        ram = hw.ram_available_bytes if now and hw.ram_available_bytes is not None else ram_total
        ram_usable = int(min(ram, ram_total * hw.usable_fraction))
        if unified:
            pool = ram_usable
            ram_usable -= sum(d.total_bytes for d in mem.per_device)  # the GPU's share is not free RAM
        candidates.append((host_need, max(ram_usable, 0), "system RAM",
                           band_bytes(error_band, host_need, mem.host_weights_bytes, mem.host_kv_cache_bytes,
                                      mem.host_buffers_bytes)))
    if not candidates:
        return Verdict(status="exceeds", margin_bytes=0, utilization=0.0, usable_bytes=0, required_bytes=host_need,
                       limiting="nothing", reason=msg("no GPU and no known system RAM to run on"))
    required, usable, where, uncertainty = min(candidates, key=lambda c: (c[1] - c[0]) / max(c[1], 1))
    margin = usable - required
    utilization = required / usable if usable else float("inf")
    total_required = sum(c[0] for c in candidates)
    total_usable = sum(c[1] for c in candidates)
    status = status_of(required, usable, error_band, min_margin_bytes, uncertainty)
    if status == "exceeds":
        reason = msg("%(where)s needs %(required)s but only %(usable)s is usable", where=_where(where),
                     required=gib(required), usable=gib(usable))
    elif status == "tight":
        reason = (msg("%(where)s margin %(margin)s is within the estimate's measured error (%(error)s)",
                      where=_where(where), margin=gib(margin), error=gib(uncertainty)) if margin < uncertainty
                  else msg("%(where)s margin %(margin)s is under the required minimum %(minimum)s",
                           where=_where(where), margin=gib(margin), minimum=gib(min_margin_bytes)))
    else:
        reason = msg("%(where)s keeps %(margin)s free", where=_where(where), margin=gib(margin))
    if len(candidates) > 1:
        required, usable = total_required, (pool if pool is not None else total_usable)
    return Verdict(status=status, margin_bytes=margin, utilization=round(utilization, 4), usable_bytes=usable,
                   required_bytes=required, limiting=where, reason=reason, uncertainty_bytes=uncertainty)


def _where(name: str) -> str:
    """A device's name as it is; "system RAM" as a translatable phrase."""
    return msg("system RAM") if name == "system RAM" else name
