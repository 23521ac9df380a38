"""Apple silicon: one GPU sharing unified memory; what it may use is Metal's working-set limit.

Order: Metal's own `recommendedMaxWorkingSetSize` when pyobjc-framework-Metal is importable;
else `iogpu.wired_limit_mb` when set (Metal then reports exactly that value: llama-server sample
with 26000 MiB); else a derived default from RAM size (see `default_working_set`).
"""
from __future__ import annotations

import json
import re
from typing import Callable

from fitprobe.estimator.message import msg

from .run import RunResult, find_program, run_command
from .types import GiB, MiB, BackendStatus, GpuReading

SYSCTL_KEYS = [
    "hw.memsize",
    "machdep.cpu.brand_string",
    "hw.physicalcpu",
    "hw.logicalcpu",
    "hw.perflevel0.physicalcpu",
    "hw.perflevel1.physicalcpu",
    "iogpu.wired_limit_mb",
]


def parse_sysctl(text: str) -> dict[str, str]:
    """'key: value' lines (`sysctl a b c` and `sysctl -a` print the same form)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([a-z][\w.]*)\s*[:=]\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def default_working_set(ram_bytes: int) -> int:
    """Stock Metal limit when it cannot be asked: 2/3 of RAM up to 36 GiB, 3/4 above.

    Matches the recordings exactly for 8 GB (5461.34 MiB), 32 GB (21845.34 MiB), 64 GB (49152 MiB)
    and 96 GB (73728 MB) Macs (ggml-metal-init samples). It is a floor: an M3 16 GB reported
    0.74 and an M5 Max 128 GB on macOS 26 reported 107.52 GiB (0.84) (PROBING.md §3.3)."""
    fraction = 2 / 3 if ram_bytes <= 36 * GiB else 3 / 4
    return int(ram_bytes * fraction)


def parse_displays(text: str) -> tuple[str | None, int | None]:
    """`system_profiler SPDisplaysDataType -json` → (GPU name, GPU cores). Old macOS (Big Sur)
    names the M1 'kHW_AppleM1Item' and has no sppci_cores; output may be cut, so fall back to regex."""
    start = text.find("{")
    name = cores = None
    try:
        data = json.loads(text[start:])
        for gpu in data.get("SPDisplaysDataType", []):
            name = gpu.get("sppci_model") or gpu.get("_name")
            c = gpu.get("sppci_cores")
            cores = int(c) if c and str(c).isdigit() else None
            break
    except (ValueError, AttributeError):
        m = re.search(r'"(?:sppci_model|_name)"\s*:\s*"([^"]+)"', text)
        name = m.group(1) if m else None
        c = re.search(r'"sppci_cores"\s*:\s*"(\d+)"', text)
        cores = int(c.group(1)) if c else None
    if name:
        m = re.fullmatch(r"kHW_Apple(M\d\w*)Item", name)
        if m:
            name = f"Apple {m.group(1)}"
    return name, cores


def build_reading(
    sysctl: dict[str, str],
    display_name: str | None = None,
    gpu_cores: int | None = None,
    metal_working_set: int | None = None,
    ram_available: int | None = None,
) -> GpuReading | None:
    """Parse layer: sysctl values (+ system_profiler, + Metal when known) → the Apple GPU reading."""
    try:
        ram = int(sysctl.get("hw.memsize", ""))
    except ValueError:
        return None
    brand = sysctl.get("machdep.cpu.brand_string", "")
    name = display_name or brand
    if not name.startswith("Apple"):
        return None  # Intel Mac: its GPU is a PCIe device with its own VRAM, not this case
    r = GpuReading(
        index=0,
        name=name,
        vendor="apple",
        memory_total_bytes=ram,
        memory_free_bytes=ram_available,
        unified_memory=True,
        integrated=True,
        gpu_cores=gpu_cores,
        source="metal" if metal_working_set else "sysctl",
    )
    wired = sysctl.get("iogpu.wired_limit_mb", "")
    if metal_working_set:
        r.usable_cap_bytes = min(metal_working_set, ram)
        r.notes.append(msg("usable = Metal recommendedMaxWorkingSetSize"))
    elif wired.isdigit() and int(wired) > 0:
        r.usable_cap_bytes = min(int(wired) * MiB, ram)  # values above RAM are accepted by the sysctl
        r.notes.append(msg("usable = iogpu.wired_limit_mb (%(mib)s MiB)", mib=str(wired)))
    else:
        r.usable_cap_bytes = default_working_set(ram)
        r.notes.append(msg("usable = derived Metal default (2/3 of RAM <= 36 GiB, else 3/4); may be low on new macOS"))
    return r


def _metal_working_set() -> int | None:
    try:
        import Metal  # noqa: PLC0415 - pyobjc-framework-Metal, optional

        dev = Metal.MTLCreateSystemDefaultDevice()
        return int(dev.recommendedMaxWorkingSetSize()) if dev is not None else None
    except Exception:  # noqa: BLE001
        return None


def probe(
    run: Callable[..., RunResult] = run_command,
    which: Callable[..., str | None] = find_program,
    metal: Callable[[], int | None] = _metal_working_set,
    ram_available: int | None = None,
) -> tuple[list[GpuReading], BackendStatus]:
    exe = which("sysctl", ("/usr/sbin/sysctl",))
    if not exe:
        return [], BackendStatus(name="apple", present=False, reason=msg("sysctl not found"))
    res = run([exe, *SYSCTL_KEYS])  # unknown keys (iogpu on old macOS) fail alone, others still print
    values = parse_sysctl(res.stdout)
    if "hw.memsize" not in values:
        return [], BackendStatus(name="apple", present=False, reason=res.reason or msg("hw.memsize not readable"),
                                 failed=res.broken)
    name = cores = None
    sp = which("system_profiler", ("/usr/sbin/system_profiler",))
    if sp:
        disp = run([sp, "SPDisplaysDataType", "-json"], timeout=15)
        if disp.stdout:
            name, cores = parse_displays(disp.stdout)
    reading = build_reading(values, name, cores, metal(), ram_available)
    if reading is None:
        return [], BackendStatus(name="apple", present=False, reason=msg("not Apple silicon"))
    return [reading], BackendStatus(name="apple", present=True, devices=1)
