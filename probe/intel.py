"""Intel GPUs: sysfs (xe / i915 local-memory files) then `xpu-smi discovery --dump`.

The iGPU (PCI 0000:00:02.0) has no memory of its own; it is reported as integrated.
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Callable

from fitprobe.estimator.message import msg

from .amd import _pci_slot, _read_int, drm_cards
from .run import RunResult, find_program, run_command
from .types import GiB, MiB, BackendStatus, GpuReading

IGPU_SLOT = "0000:00:02.0"


def vram_from_sysfs(card: str, dev: Path) -> int | None:
    """xe: sum of tileN/physical_vram_size_bytes; i915: drm/cardN/lmem_total_bytes (llmfit's
    detect_intel_gpus reads the same files)."""
    tiles = sorted(dev.glob("tile*/physical_vram_size_bytes"))
    if tiles:
        sizes = [_read_int(t) for t in tiles]
        return sum(s for s in sizes if s) or None
    return _read_int(dev / "drm" / card / "lmem_total_bytes")


def read_sysfs(sys_root: Path) -> list[GpuReading]:
    out = []
    for card, dev in drm_cards(sys_root, "0x8086"):
        slot = _pci_slot(dev)
        vram = vram_from_sysfs(card, dev)
        device_id = (dev / "device").read_text().strip() if (dev / "device").is_file() else "?"
        r = GpuReading(
            index=int(card[4:]),
            name=f"Intel GPU [8086:{device_id.removeprefix('0x')}]",
            vendor="intel",
            pci_bus_id=slot,
            memory_total_bytes=vram,
            integrated=slot == IGPU_SLOT or not vram,
            source="sysfs",
        )
        if r.integrated:
            r.unified_memory = True
            r.memory_total_bytes = None
            r.notes.append(msg("integrated GPU: no dedicated memory, shares system RAM"))
        out.append(r)
    return out


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|MB|GB)?\s*$", re.I)
_UNITS = {"b": 1, "kib": 1024, "mib": MiB, "gib": GiB, "mb": 10**6, "gb": 10**9}


def _bytes(text: str | None) -> int | None:
    m = _SIZE.match(text or "")
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "MiB").lower()])


def parse_xpu_dump(text: str) -> list[GpuReading]:
    """`xpu-smi discovery --dump 1,2,16` CSV ('Device ID,Device Name,...,Memory Physical Size');
    'N/A' sizes (seen on an Arc A310 in the beszel PR #755 output) stay unknown."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Device ID")), None)
    if start is None:
        return []
    out = []
    for pos, row in enumerate(csv.DictReader(io.StringIO("\n".join(lines[start:])))):
        row = {k.strip(): (v or "").strip() for k, v in row.items() if k}
        idx = row.get("Device ID", "")
        r = GpuReading(
            index=int(idx) if idx.isdigit() else pos,
            name=row.get("Device Name") or "Intel GPU",
            vendor="intel",
            memory_total_bytes=_bytes(row.get("Memory Physical Size")),
            source="xpu-smi",
        )
        if r.memory_total_bytes is None:
            r.notes.append(msg("xpu-smi did not report the memory size"))
        out.append(r)
    return out


def probe(
    sys_root: Path = Path("/sys"),
    run: Callable[..., RunResult] = run_command,
    which: Callable[..., str | None] = find_program,
) -> tuple[list[GpuReading], BackendStatus]:
    readings = read_sysfs(sys_root)
    if readings:
        return readings, BackendStatus(name="intel", present=True, devices=len(readings), reason=msg("via sysfs"))
    exe = which("xpu-smi")
    if not exe:
        return [], BackendStatus(name="intel", present=False, reason=msg("no Intel GPU in sysfs; xpu-smi not found"))
    res = run([exe, "discovery", "--dump", "1,2,16"])
    readings = parse_xpu_dump(res.stdout) if res.ok else []
    if readings:
        return readings, BackendStatus(name="intel", present=True, devices=len(readings), reason=msg("via xpu-smi"))
    return [], BackendStatus(name="intel", present=False, reason=res.reason or msg("xpu-smi listed no devices"),
                             failed=res.broken)
