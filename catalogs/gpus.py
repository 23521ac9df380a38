"""The GPU / accelerator catalog (catalogs/data/gpus.json), validated at load, and name lookup."""
from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path

from fitprobe.estimator.fields import doc, record
from fitprobe.catalogs.validated import load_json_file

from fitprobe.estimator.hardware import Device

PATH = Path(__file__).parent / "data" / "gpus.json"
GIB = 1 << 30


@record
class GpuEntry:
    key: str
    name: str
    vendor: str
    aliases: list[str] = doc(default_factory=list)
    architecture: str | None = None
    compute_capability: str | None = None
    memory_gib: float | None = doc(default=None, gt=0)
    reported_total_mib: int | None = None
    memory_type: str | None = None
    bandwidth_gbs: float | None = doc(default=None, gt=0)
    fp16_tflops: float | None = doc(default=None, gt=0)
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    fp8: bool | None = None
    fp4: bool | None = None
    tdp_w: float | None = None
    interconnect: str | None = None
    nvlink: bool = False
    form_factor: str | None = None
    launch_year: int | None = None
    price_usd: float | None = None
    price_basis: str | None = None
    used_price_usd: float | None = None
    unified_memory: bool = False
    gpu_working_set_fraction: float | None = doc(default=None, gt=0, le=1)
    devices_per_board: int = 1
    sources: list[str]
    confidence: str | None = None
    notes: str = ""

    def device(self, memory_bytes: int | None = None) -> Device:
        """The estimator's view of one card (one software-visible device); memory_bytes overrides."""
        if self.memory_gib is None and memory_bytes is None:
            raise ValueError(f"the catalog has no memory size for {self.name}")
        memory = memory_bytes or int(self.memory_gib * GIB)
        cap = int(memory * self.gpu_working_set_fraction) if self.gpu_working_set_fraction else None
        kind = "apple" if self.vendor.lower() == "apple" else "npu" if "ascend" in self.key else "gpu"
        return Device(name=self.name, kind=kind, memory_bytes=memory, usable_cap_bytes=cap,
                      bandwidth_gbs=self.bandwidth_gbs, fp16_tflops=self.fp16_tflops, fp8=bool(self.fp8),
                      fp4=bool(self.fp4), unified_memory=self.unified_memory, nvlink=self.nvlink,
                      tdp_w=self.tdp_w, price_usd=self.price_usd, catalog_key=self.key)


def _norm(text: str) -> str:
    text = text.lower().replace("geforce", "").replace("nvidia", "")
    return "".join(ch for ch in text if ch.isalnum())


@lru_cache(maxsize=1)
def load_gpus() -> tuple[GpuEntry, ...]:
    entries = tuple(load_json_file(list[GpuEntry], PATH, key="devices"))
    keys = [e.key for e in entries]
    if len(set(keys)) != len(keys):
        raise ValueError("gpus.json has duplicate keys")
    return entries


@lru_cache(maxsize=1)
def _index() -> dict[str, GpuEntry]:
    index: dict[str, GpuEntry] = {}
    for entry in load_gpus():
        for name in (entry.key, entry.name, *entry.aliases):
            index.setdefault(_norm(name), entry)
    return index


def find_gpu(name: str) -> GpuEntry | None:
    """Exact name/alias match, else the one entry a short form clearly means ('4090' -> RTX 4090)."""
    index, key = _index(), _norm(name)
    if key in index:
        return index[key]
    if len(key) < 3:
        return None
    for prefix in ("rtx", "radeonrx", "rx", "instinct", "apple"):
        if prefix + key in index:
            return index[prefix + key]
    hits = {id(e): e for k, e in index.items() if key in k}
    return next(iter(hits.values())) if len(hits) == 1 else None


def suggest_gpus(name: str, n: int = 3) -> list[str]:
    index = _index()
    hits = difflib.get_close_matches(_norm(name), list(index), n=n * 4, cutoff=0.5)
    out: list[str] = []
    for hit in hits:
        if index[hit].name not in out:
            out.append(index[hit].name)
    return out[:n]
