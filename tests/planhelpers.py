"""Build launch inputs the way `fitprobe plan` does, for bundled models on catalog GPUs."""
from __future__ import annotations

from fitprobe.app import catalog_hardware, default_engine, error_band, launch_input, pick_format
from fitprobe.catalogs.quants import quant_table
from fitprobe.catalogs.resolve import resolve
from fitprobe.estimator.plan import Sizer
from fitprobe.estimator.settings import RunSettings

GIB = 1 << 30


def make_input(model: str, gpu: str, count: int = 1, *, quant: str | None = None, ctx: int = 8192, batch: int = 1,
               kv: str | None = None, engine: str | None = None, ram_gib: float | None = 64):
    r = resolve(model)
    hw = catalog_hardware(gpu, count, usable_fraction=0.95, ram_bytes=int(ram_gib * GIB) if ram_gib else None)
    fmt = pick_format(r, quant, engine, hw)
    eng = engine or default_engine(fmt, hw)
    st = RunSettings(quant=fmt.name, context=ctx, batch=batch, engine=eng,
                     kv_cache_dtype=kv or ("auto" if eng in ("vllm", "sglang") else "f16"))
    sizer = Sizer(r.spec, quant_table(), hw, error_band=error_band(), known_weights=r.known_weights)
    return launch_input(r, fmt, st, hw, sizer, kv_explicit=kv is not None)


def flag(plan, name):
    return next((f for f in plan.flags if f.flag == name), None)
