"""The GPU / accelerator catalog (catalogs/data/gpus.json), validated at load, and name lookup.

A name resolves only to the entry it exactly means: vendor words ("NVIDIA GeForce", "AMD Radeon",
"Apple"), case, spaces and punctuation do not matter, a memory size ("16GB") and a form factor
("SXM", "PCIe") narrow the choice. A name that fits several memory sizes ("RTX 4060 Ti", "M4 Max")
resolves to nothing: `match_gpus` returns the candidates so the caller can list them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fitprobe.estimator.fields import doc, record, replace
from fitprobe.catalogs.validated import build, checked_json_file

from fitprobe.estimator.hardware import Device

PATH = Path(__file__).parent / "data" / "gpus.json"
GIB = 1 << 30


@record
class MemoryVariant:
    """One memory configuration of a chip sold in several (Apple): its own bandwidth and GPU cores."""
    memory_gib: float = doc(gt=0)
    bandwidth_gbs: float = doc(gt=0)
    gpu_cores: int | None = None
    gpu_working_set_fraction: float | None = doc(default=None, gt=0, le=1)
    price_usd: float | None = None
    price_basis: str | None = None


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
    cuda_total_mib: int | None = doc(default=None, gt=0)  # nvidia-smi Total minus Reserved: what CUDA/vLLM see
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
    used_price_basis: str | None = None
    unified_memory: bool = False
    gpu_working_set_fraction: float | None = doc(default=None, gt=0, le=1)
    gpu_cores: int | None = None
    memory_variants: list[MemoryVariant] = doc(default_factory=list)
    variant_of: str | None = None  # set by the loader on the entries it expands from memory_variants
    devices_per_board: int = doc(default=1, ge=1)
    sources: list[str]
    confidence: str | None = None
    notes: str = ""

    def device(self, memory_bytes: int | None = None) -> Device:
        """The estimator's view of one software-visible device (one chip of a multi-chip board:
        its share of memory, bandwidth and compute); memory_bytes overrides the memory."""
        if self.memory_gib is None and memory_bytes is None:
            raise ValueError(f"the catalog has no memory size for {self.name}")
        n = self.devices_per_board
        memory = memory_bytes or int(self.memory_gib * GIB / n)
        cap = int(memory * self.gpu_working_set_fraction) if self.gpu_working_set_fraction else None
        vendor = self.vendor.lower()
        kind = ("apple" if vendor == "apple" else "npu" if vendor == "huawei"
                else "hpu" if self.key.startswith("gaudi") else "gpu")
        name = self.name if n == 1 else f"{self.name} (per chip: {memory / GIB:g} GiB)"
        if self.variant_of and memory_bytes and memory_bytes != int(self.memory_gib * GIB):
            name = f"{self.name.rsplit(' ', 1)[0]} {memory / GIB:g}GB"  # the size given, not the row's
        driver_total = self.cuda_total_mib * (1 << 20) if self.cuda_total_mib and not memory_bytes and n == 1 else None
        return Device(name=name, kind=kind, memory_bytes=memory, driver_total_bytes=driver_total, usable_cap_bytes=cap,
                      bandwidth_gbs=self.bandwidth_gbs / n if self.bandwidth_gbs else None,
                      fp16_tflops=self.fp16_tflops / n if self.fp16_tflops else None,
                      int8_tops=self.int8_tops / n if self.int8_tops else None, fp8=bool(self.fp8),
                      fp4=bool(self.fp4), unified_memory=self.unified_memory, nvlink=self.nvlink,
                      tdp_w=self.tdp_w / n if self.tdp_w else None,
                      price_usd=self.price_usd / n if self.price_usd else None, catalog_key=self.key,
                      compute_capability=self.compute_capability, gpu_cores=self.gpu_cores)


def _expand(entry: GpuEntry) -> list[GpuEntry]:
    """A chip sold in several memory sizes becomes one entry per size ('apple-m4-max-36gb')."""
    if not entry.memory_variants:
        return [entry]
    return [replace(entry, key=_variant_key(entry.key, v.memory_gib), name=f"{entry.name} {v.memory_gib:g}GB",
                    memory_gib=v.memory_gib, bandwidth_gbs=v.bandwidth_gbs, gpu_cores=v.gpu_cores,
                    gpu_working_set_fraction=v.gpu_working_set_fraction or entry.gpu_working_set_fraction,
                    price_usd=v.price_usd, price_basis=v.price_basis, memory_variants=[], variant_of=entry.key)
            for v in entry.memory_variants]


def _variant_key(key: str, memory_gib: float) -> str:
    return f"{key}-{memory_gib:g}gb"


@lru_cache(maxsize=1)
def _device_data() -> list[dict]:
    return checked_json_file(list[GpuEntry], PATH, key="devices", check=_check_unique_names)


@lru_cache(maxsize=1)
def load_gpus() -> tuple[GpuEntry, ...]:
    return tuple(e for i in range(len(_device_data())) for e in _entries_of(i))


@lru_cache(maxsize=None)
def _entries_of(i: int) -> tuple[GpuEntry, ...]:
    """The entries of the i-th device of gpus.json, built once (the same objects whichever way asked)."""
    return tuple(_expand(build(GpuEntry, _device_data()[i])))


def _keyed(literal: str) -> list[GpuEntry]:
    """The entries whose key reads `literal`, building only their records (a plan names one GPU of ~200)."""
    out = []
    for i, data in enumerate(_device_data()):
        keys = [_variant_key(data["key"], v["memory_gib"]) for v in data.get("memory_variants") or []]
        if any(_literal(k) == literal for k in keys or [data["key"]]):
            out += [e for e in _entries_of(i) if _literal(e.key) == literal]
    return out


def _expanded(raw: list[GpuEntry]) -> tuple[GpuEntry, ...]:
    return tuple(e for entry in raw for e in _expand(entry))


def _check_unique_names(raw: list[GpuEntry]) -> None:
    """No name of one device also names another (run when gpus.json is new to this machine)."""
    seen: dict[tuple, str] = {}
    for e in _expanded(raw):
        for text in (e.key, e.name, *e.aliases):
            name = parse_name(text)
            ident = (name.base, name.form, e.memory_gib or name.memory_gib)
            if seen.setdefault(ident, e.key) != e.key:
                raise ValueError(f"'{text}' of {e.key} also names {seen[ident]}")


# Words that never tell two products apart: vendor and brand names, memory technology, "GPU".
_NOISE = {"nvidia", "geforce", "tesla", "quadro", "amd", "ati", "radeon", "intel", "apple", "huawei", "rtx",
          "gtx", "rx", "arc", "instinct", "graphics", "gpu", "r", "tm"}
_FORMS = {"sxm": "sxm", "sxm2": "sxm", "sxm4": "sxm", "sxm5": "sxm", "pcie": "pcie"}
_MEMORY_TECH = re.compile(r"^(hbm\d?e?|gddr\d+x?|lpddr\d+x?)$")
_MEMORY_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*gi?b\b")


@dataclass(frozen=True)
class GpuName:
    base: str             # 'rtx 4060 ti' -> '4060ti'
    form: str | None      # 'sxm' | 'pcie'
    memory_gib: float | None


def parse_name(text: str) -> GpuName:
    """'NVIDIA A100-SXM4-80GB' -> ('a100', 'sxm', 80.0); 'Apple M4 Max 36GB' -> ('m4max', None, 36.0)."""
    s = re.sub(r"[_®™]", " ", text.lower())
    memory = None
    if m := _MEMORY_SIZE.search(s):
        memory = float(m.group(1))
        s = s[: m.start()] + " " + s[m.end():]
    form, parts = None, []
    for word in re.split(r"[^a-z0-9+]+", s):
        if word in _FORMS:
            form = form or _FORMS[word]
        elif word and not _MEMORY_TECH.match(word):
            parts += [p for p in re.findall(r"[a-z]+|\d+|\+", word) if p not in _NOISE]
    return GpuName("".join(parts), form, memory)


@lru_cache(maxsize=1)
def _names() -> tuple[tuple[GpuEntry, GpuName, str], ...]:
    return tuple((e, parse_name(t), _literal(t)) for e in load_gpus() for t in (e.key, e.name, *e.aliases))


def _literal(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def match_gpus(text: str) -> list[GpuEntry]:
    """The entries `text` can mean: one when it names a device (or is its key), several when it leaves
    the memory size (or form factor) open, none when unknown. A name stored as an alias picks among
    entries of the same memory size (e.g. 'H100' is the SXM part), never among memory sizes."""
    want = parse_name(text)
    if not want.base:
        return []
    by_key = _keyed(_literal(text))
    if by_key:  # a catalog key names exactly one device
        return by_key
    hits: dict[str, GpuEntry] = {}
    exact: dict[str, GpuEntry] = {}
    for entry, name, literal in _names():
        if name.base != want.base:
            continue
        memory = entry.memory_gib or name.memory_gib
        if want.memory_gib is not None and (memory is None or abs(memory - want.memory_gib) > 0.01):
            continue
        if want.form is not None and name.form != want.form and not _has_form(entry, want.form):
            continue
        hits.setdefault(entry.key, entry)
        if literal == _literal(text):
            exact.setdefault(entry.key, entry)
    found = list(hits.values())
    if len(found) > 1 and len(exact) == 1:
        (chosen,) = exact.values()
        if want.memory_gib is not None or all(e.memory_gib == chosen.memory_gib for e in found):
            return [chosen]
    return found


def _has_form(entry: GpuEntry, form: str) -> bool:
    return any(name.form == form for e, name, _ in _names() if e.key == entry.key)


def needs_memory_size(text: str, hits: list[GpuEntry]) -> bool:
    """True when `text` names a chip sold in several memory sizes without giving one ('M5 Max'),
    even if the catalog lists a single size of it."""
    return any(e.variant_of for e in hits) and parse_name(text).memory_gib is None


def find_gpu(text: str) -> GpuEntry | None:
    """The one entry `text` names, or None (unknown, or several candidates: see match_gpus)."""
    hits = match_gpus(text)
    return hits[0] if len(hits) == 1 and not needs_memory_size(text, hits) else None


def suggest_gpus(text: str, n: int = 3) -> list[str]:
    """Display names close to an unknown name."""
    names = {_literal(t): e.name for e in load_gpus() for t in (e.name, *e.aliases)}
    import difflib  # only for a name that matches nothing

    hits = difflib.get_close_matches(_literal(text), list(names), n=n * 4, cutoff=0.6)
    out: list[str] = []
    for hit in hits:
        if names[hit] not in out:
            out.append(names[hit])
    return out[:n]
