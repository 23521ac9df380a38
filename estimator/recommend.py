"""Which hardware to get for this model and settings, each pick sized with the same Sizer.

best single GPU: the fastest (decode) discrete device that fits alone, among those with a
price when any fits (datacenter parts have none); best value: the lowest
price per usable GiB among devices that fit (used price where the catalog has one); Apple: the
Mac/chip with the least memory that fits; cheapest cloud: the offer with the lowest cost per
1M output tokens (cost.py); smallest multi-GPU set: the fewest identical GPUs (2–8) that fit,
then the least total memory.
"""
from __future__ import annotations

from fitprobe.estimator.fields import doc, record, replace

from .hardware import Device, Hardware
from .message import msg
from .plan import Sizer
from .quant import QuantFormat, QuantTable, WeightBytes
from .settings import RunSettings
from .spec import ModelSpec

GIB = 1 << 30


@record
class Candidate:
    key: str
    device: Device
    price_usd: float | None = None
    used_price_usd: float | None = None
    price_basis: str | None = None


@record
class Pick:
    role: str = doc(description="best single GPU | best value | Apple unified memory | cheapest cloud | smallest multi-GPU set")
    hardware: str
    gpu_key: str | None = None
    count: int = 1
    engine: str
    status: str
    total_bytes: int
    usable_bytes: int
    decode_tps: float | None = None
    price_usd: float | None = None
    price_basis: str | None = None
    usd_per_usable_gib: float | None = None
    usd_per_million_tokens: float | None = None
    note: str = ""


def _engine_for(device: Device, fmt: QuantFormat, engine: str) -> str | None:
    """The engine this device runs the format with; None when none can (a GGUF file on Intel Gaudi)."""
    if device.kind == "hpu":
        return "vllm" if fmt.kind in ("native", "checkpoint") else None
    if device.kind == "apple":
        if engine in ("vllm", "sglang"):
            return "llama.cpp" if fmt.kind == "gguf" else "mlx"
        return engine
    return "llama.cpp" if engine == "mlx" else engine


class Recommender:
    """Sizes a model on catalog candidates; `speed_fn(spec, weights, settings, hw, memory)` gives Speed."""

    def __init__(self, spec: ModelSpec, table: QuantTable, fmt: QuantFormat, st: RunSettings, *, error_band: float,
                 weights: tuple[WeightBytes, str], usable_fraction: float, speed_fn=None):
        self.spec, self.table, self.fmt, self.st = spec, table, fmt, st
        self.band, self.weights, self.usable_fraction, self.speed_fn = error_band, weights, usable_fraction, speed_fn

    def size(self, device: Device, count: int = 1):
        """(engine, memory, verdict, decode tok/s or None) for `count` of one device."""
        engine = _engine_for(device, self.fmt, self.st.engine)
        if engine is None or self.fmt.kind == "checkpoint" and engine in ("llama.cpp", "ollama", "mlx") or \
                (self.fmt.kind == "mlx" and engine != "mlx"):
            return engine, None, None, None
        hw = Hardware(devices=[device] * count, usable_fraction=self.usable_fraction)
        sizer = Sizer(self.spec, self.table, hw, error_band=self.band, known_weights={self.fmt.name: self.weights})
        st = replace(self.st, engine=engine)
        mem, verdict, _ = sizer.size(self.fmt, st)
        tps = None
        if verdict.status != "exceeds" and self.speed_fn and device.bandwidth_gbs:
            try:
                tps = self.speed_fn(self.spec, self.weights[0], st, hw, mem).decode_tps
            except ValueError:
                tps = None
        return engine, mem, verdict, tps

    def picks(self, candidates: list[Candidate]) -> list[Pick]:
        sized = []
        for c in candidates:
            engine, mem, verdict, tps = self.size(c.device)
            if verdict is not None and verdict.status != "exceeds":
                sized.append((c, engine, mem, verdict, tps))
        out: list[Pick] = []
        gpus = [s for s in sized if s[0].device.kind in ("gpu", "hpu") and not s[0].device.unified_memory]
        buyable = [s for s in gpus if s[0].used_price_usd or s[0].price_usd] or gpus  # priced cards first
        if buyable:
            out.append(self._pick(msg("best single GPU"), max(buyable, key=lambda s: (s[4] or 0, -s[0].device.memory_bytes))))
        priced = [s for s in sized if (s[0].used_price_usd or s[0].price_usd)]
        if priced:
            best = min(priced, key=lambda s: (s[0].used_price_usd or s[0].price_usd) / (s[3].usable_bytes / GIB))
            out.append(self._pick(msg("best value"), best))
        apple = [s for s in sized if s[0].device.kind == "apple"]
        if apple:
            out.append(self._pick(msg("Apple unified memory"), min(apple, key=lambda s: (s[0].device.memory_bytes, -(s[4] or 0)))))
        multi = self.smallest_set([c for c in candidates
                                   if c.device.kind in ("gpu", "hpu") and not c.device.unified_memory])
        if multi:
            out.append(multi)
        return out

    def smallest_set(self, candidates: list[Candidate], max_count: int = 8) -> Pick | None:
        best = None
        for c in candidates:
            for n in range(2, max_count + 1):
                engine, mem, verdict, tps = self.size(c.device, n)
                if verdict is None:
                    break
                if verdict.status != "exceeds":
                    rank = (n, c.device.memory_bytes * n)
                    if best is None or rank < best[0]:
                        best = (rank, c, engine, mem, verdict, tps, n)
                    break
        if best is None:
            return None
        _, c, engine, mem, verdict, tps, n = best
        return self._pick(msg("smallest multi-GPU set"), (c, engine, mem, verdict, tps), count=n)

    def _pick(self, role: str, s, count: int = 1) -> Pick:
        c, engine, mem, verdict, tps = s
        price = c.used_price_usd or c.price_usd
        basis = msg("used price") if c.used_price_usd else c.price_basis
        per_gib = price * count / (verdict.usable_bytes / GIB) if price else None
        name = c.device.name if count == 1 else f"{count}x {c.device.name}"
        return Pick(role=role, hardware=name, gpu_key=c.key, count=count, engine=engine, status=verdict.status,
                    total_bytes=mem.total_bytes + mem.host_total_bytes, usable_bytes=verdict.usable_bytes, decode_tps=tps,
                    price_usd=price * count if price else None, price_basis=basis, usd_per_usable_gib=per_gib)
