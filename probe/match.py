"""Map a probed device name to a GPU catalog entry (for bandwidth, TFLOPS, price).

Names are reduced to a 'core' (vendor words, memory size, form factor and MIG profile removed)
and must be equal: 'RTX 4090' never matches 'RTX 4090 D'. Memory size, form factor (SXM/PCIe),
laptop and Apple GPU-core counts then pick between entries sharing a core.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fitprobe.estimator.message import Num, msg

from .types import GiB, GpuReading

_NOISE = {
    "nvidia", "geforce", "tesla", "amd", "ati", "radeon", "intel", "apple", "huawei", "graphics",
    "generation", "gpu", "corporation", "inc", "the", "with", "edition", "ascend",
}
_FORMS = {
    "sxm": "sxm", "sxm2": "sxm", "sxm4": "sxm", "sxm5": "sxm", "hgx": "sxm", "hbm3": "sxm",
    "hbm3e": "sxm", "pcie": "pcie", "nvl": "nvl",
}


@dataclass
class NameKey:
    core: str
    memory_gb: float | None = None
    form: str | None = None
    laptop: bool = False
    gpu_cores: int | None = None
    mig_profile: str | None = None
    tokens: list[str] = field(default_factory=list)


def name_key(name: str) -> NameKey:
    """'NVIDIA H100 80GB HBM3 MIG 1g.10gb' → core 'h100', 80 GB, form sxm, MIG '1g.10gb'."""
    s = name.lower()
    s = re.sub(r"\((?:r|tm)\)|[®™]", " ", s)
    key = NameKey(core="")
    mig = re.search(r"\bmig\s+(\d+g\.\d+gb)\b", s)
    if mig:
        key.mig_profile = mig.group(1)
        s = s[: mig.start()] + " " + s[mig.end():]
    cores = re.search(r"(\d+)[- ]core gpu|\d+c/(\d+)c", s)
    if cores:
        key.gpu_cores = int(cores.group(1) or cores.group(2))
        s = s[: cores.start()] + " " + s[cores.end():]
    mem = re.search(r"(\d+(?:\.\d+)?)\s*gb\b", s)
    if mem:
        key.memory_gb = float(mem.group(1))
        s = s[: mem.start()] + " " + s[mem.end():]
    if re.search(r"\b(laptop|mobile|max-q)\b", s):
        key.laptop = True
        s = re.sub(r"\b(laptop|mobile|max-q)\b", " ", s)
    tokens = []
    for tok in re.split(r"[\s,()\-_/\[\]]+", s):
        if not tok or tok in _NOISE:
            continue
        if tok in _FORMS:
            key.form = key.form or _FORMS[tok]
            continue
        tokens.append(tok)
    key.tokens = tokens
    key.core = " ".join(tokens)
    return key


def load_catalog() -> list[dict[str, Any]]:
    """The validated GPU catalog (catalogs.gpus) as plain entries; [] if it cannot be read, so probing goes on."""
    from fitprobe.catalogs.gpus import load_gpus
    from fitprobe.estimator.fields import asdict

    try:
        return [asdict(e) for e in load_gpus()]
    except (OSError, ValueError):
        return []


def _entry_keys(entry: dict[str, Any]) -> list[NameKey]:
    names = [entry["name"], *(entry.get("aliases") or [])]
    keys = [name_key(str(n)) for n in names]
    per_board = entry.get("devices_per_board") or 1  # a probe sees one chip of a dual-chip board
    for k in keys:  # memory/cores stated in the entry, not only in its name
        board = entry.get("memory_gib") or entry.get("memory_gb") or k.memory_gb
        k.memory_gb = board / per_board if board else None
        k.gpu_cores = k.gpu_cores or entry.get("apple_gpu_cores") or entry.get("gpu_cores")
    return keys


def _score(probe: NameKey, cand: NameKey, probed_gib: float | None, unified: bool = False) -> float | None:
    """Lower is better; None = incompatible. On unified memory the probed size only ranks
    (an Apple chip's memory variants), since the GPU may see a share of system RAM."""
    if probe.core != cand.core or probe.laptop != cand.laptop:
        return None
    if probe.form and cand.form and probe.form != cand.form:
        return None
    if probe.gpu_cores and cand.gpu_cores and probe.gpu_cores != cand.gpu_cores:
        return None  # binned Apple chips differ in bandwidth (M4 Max 32- vs 40-core GPU)
    score = 0.0
    if probe.form != cand.form:
        score += 1
    want = probe.memory_gb or probed_gib
    if want and cand.memory_gb:
        rel = abs(float(cand.memory_gb) - want) / want
        if rel > 0.25 and not probe.mig_profile and not unified:
            return None  # a 24 GB card is not the 48 GB one
        score += rel
    return score


def match_reading(reading: GpuReading, catalog: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Best catalog entry for one reading, or None; fills catalog_key/catalog_name/match_note."""
    probe = name_key(reading.name)
    gib = reading.memory_total_bytes / GiB if reading.memory_total_bytes else None
    if reading.gpu_cores:
        probe.gpu_cores = reading.gpu_cores
    best = None
    for entry in catalog:
        scores = [s for k in _entry_keys(entry) if (s := _score(probe, k, gib, reading.unified_memory)) is not None]
        if scores and (best is None or min(scores) < best[0]):
            best = (min(scores), entry)
    generic = None  # a name that says nothing: its GFX target and memory may still tell the card
    if best is None and not probe.core and (fits := _generic_fits(reading, catalog, gib)):
        if len(fits) > 1:  # several cards: name them, borrow none's figures
            reading.catalog_key = reading.catalog_name = None
            reading.match_note = msg("the driver names it only '%(name)s': a %(gfx)s card with %(gib)s GiB is one of "
                                     "%(names)s; pass --gpu to say which", name=reading.name,
                                     gfx=reading.compute_capability, gib=Num(gib, ".0f"),
                                     names=", ".join(str(e["name"]) for e in fits))
            return None
        best = (0.0, fits[0])
        generic = msg("the driver names it only '%(name)s': matched by its GFX target %(gfx)s and %(gib)s GiB of "
                      "memory", name=reading.name, gfx=reading.compute_capability, gib=Num(gib, ".0f"))
    if best is None:
        reading.catalog_key = reading.catalog_name = None
        if reading.derived_bandwidth_gbs:
            reading.match_note = msg("not in the GPU catalog: bandwidth %(gbs)s GB/s derived from memory clock x bus "
                                     "width; no TFLOPS figure", gbs=Num(reading.derived_bandwidth_gbs, "g"))
        else:
            reading.match_note = msg("not in the GPU catalog: bandwidth and TFLOPS unknown")
        return None
    entry = best[1]
    reading.catalog_key = str(entry.get("key") or entry["name"])
    reading.catalog_name = str(entry["name"])
    reading.match_note = generic or (msg("MIG slice %(profile)s of this GPU", profile=probe.mig_profile)
                                     if probe.mig_profile else None)
    return entry


def _generic_fits(reading: GpuReading, catalog: list[dict[str, Any]], gib: float | None) -> list[dict[str, Any]]:
    """For a card the driver names only generically ('AMD Radeon Graphics': libdrm's amdgpu.ids has no row for its
    PCI id, as for a 32 GB MI50, 0x66a0): the catalog entries of its GFX target whose memory fits the probed size."""
    gfx = reading.compute_capability or ""
    if not gfx.startswith("gfx") or not gib:
        return []
    return [e for e in catalog if e.get("compute_capability") == gfx
            and abs(e["memory_gib"] / (e.get("devices_per_board") or 1) - gib) <= 0.25 * gib]


def match_all(readings: list[GpuReading], catalog: list[dict[str, Any]] | None = None) -> None:
    catalog = load_catalog() if catalog is None else catalog
    for r in readings:
        match_reading(r, catalog)
