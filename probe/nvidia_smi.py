"""NVIDIA through the nvidia-smi CLI: the fallback when the NVML library cannot be loaded.

Read layer runs the tool; parse layer turns its CSV / `-q` / `-L` text into readings.
"""
from __future__ import annotations

import re
from typing import Callable

from fitprobe.estimator.message import Num, msg

from .run import RunResult, find_program, run_command
from .types import MAX_DEVICES_PER_BACKEND, MiB, BackendStatus, GpuReading, MigInstance

# Full query first; an unknown field makes the whole query fail on old drivers, so fewer next
# (PROBING.md §1.6, llmfit/llm-checker do the same).
QUERIES = [
    "index,name,uuid,pci.bus_id,memory.total,memory.reserved,memory.used,memory.free,compute_cap,"
    "pcie.link.gen.max,pcie.link.width.max,clocks.max.memory,power.limit,driver_version,"
    "mig.mode.current,addressing_mode,driver_model.current",
    "index,name,uuid,memory.total,memory.used,memory.free,driver_version",
    "name,memory.total",
]
WSL_PATHS = ("/usr/lib/wsl/lib/nvidia-smi",)
_EMPTY = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]"}


def _cell(value: str) -> str | None:
    value = value.strip()
    if value.lower() in _EMPTY or value.startswith("[Requested functionality") or value.startswith("["):
        return None
    return value


def _number(value: str | None) -> float | None:
    """'81559 MiB' / '700.00 W' / '81559' → float; None for N/A cells."""
    if value is None:
        return None
    m = re.match(r"^\s*(-?\d+(?:\.\d+)?)", value)
    return float(m.group(1)) if m else None


def _mib(value: str | None) -> int | None:
    n = _number(value)
    return int(n * MiB) if n is not None else None


def _int(value: str | None) -> int | None:
    n = _number(value)
    return int(n) if n is not None else None


def parse_query_csv(text: str) -> list[dict[str, str | None]]:
    """Rows of `--query-gpu ... --format=csv[,nounits]` keyed by field name ('memory.total').

    Header units ('memory.total [MiB]') are dropped; N/A / Not Supported cells become None.
    Lines before the header (a pasted command line) are skipped."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(("$", "#"))]
    if not lines:
        return []
    header = [re.sub(r"\s*\[[^\]]*\]$", "", h.strip()) for h in lines[0].split(",")]
    rows = []
    for line in lines[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < len(header):
            cells += [""] * (len(header) - len(cells))
        rows.append({h: _cell(c) for h, c in zip(header, cells)})
    return rows


def row_to_reading(row: dict[str, str | None], position: int) -> GpuReading:
    """One CSV row → GpuReading (memory in MiB → bytes)."""
    name = row.get("name") or "NVIDIA GPU"
    index = _int(row.get("index"))
    reading = GpuReading(
        index=index if index is not None else position,
        name=name,
        vendor="nvidia",
        uuid=row.get("uuid"),
        pci_bus_id=row.get("pci.bus_id"),
        memory_total_bytes=_mib(row.get("memory.total")),
        memory_free_bytes=_mib(row.get("memory.free")),
        memory_used_bytes=_mib(row.get("memory.used")),
        memory_reserved_bytes=_mib(row.get("memory.reserved")),
        driver=row.get("driver_version"),
        compute_capability=row.get("compute_cap"),
        pcie_gen=_int(row.get("pcie.link.gen.max")),
        pcie_width=_int(row.get("pcie.link.width.max")),
        power_limit_w=_number(row.get("power.limit")),
        mem_clock_mhz=_int(row.get("clocks.max.memory")),
        mig_mode=(row["mig.mode.current"].lower() == "enabled") if row.get("mig.mode.current") else None,
        source="nvidia-smi",
    )
    mode = (row.get("addressing_mode") or "").upper()
    if mode == "ATS":  # HMM shows up on plain discrete cards too; only ATS means shared memory
        reading.unified_memory = True
    if (row.get("driver_model.current") or "").upper() == "WDDM":
        reading.notes.append(msg("Windows WDDM: free memory already excludes other applications' use"))
    return reading


def parse_banner_versions(text: str) -> tuple[str | None, str | None]:
    """(driver, CUDA) from the table banner or `-q` header; driver 610 renamed both labels."""
    drv = re.search(r"(?:Driver|KMD) Version\s*:\s*([0-9][\w.]*)", text, re.I)
    cuda = re.search(r"CUDA (?:UMD )?Version\s*:\s*([0-9][\d.]*)", text, re.I)
    return (drv.group(1) if drv else None, cuda.group(1) if cuda else None)


def parse_list(text: str) -> dict[int, list[tuple[str, int, str]]]:
    """`nvidia-smi -L` → {gpu index: [(MIG profile, MIG device index, MIG UUID), ...]}."""
    out: dict[int, list[tuple[str, int, str]]] = {}
    current = None
    for line in text.splitlines():
        gpu = re.match(r"^GPU (\d+):", line)
        if gpu:
            current = int(gpu.group(1))
            out.setdefault(current, [])
            continue
        mig = re.match(r"^\s+MIG (\S+)\s+Device\s+(\d+):\s*\(UUID:\s*(MIG-[^)]+)\)", line)
        if mig and current is not None:
            out[current].append((mig.group(1), int(mig.group(2)), mig.group(3).strip()))
    return out


def parse_q_mig(text: str) -> dict[str, list[MigInstance]]:
    """`nvidia-smi -q` → {bus id: MIG instances with their own FB memory}."""
    out: dict[str, list[MigInstance]] = {}
    bus = None
    mig: MigInstance | None = None
    section = None
    for raw in text.splitlines():
        line = raw.rstrip()
        gpu = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$", line)
        if gpu:
            bus, mig, section = gpu.group(1), None, None
            out.setdefault(bus, [])
            continue
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped == "MIG Device" and bus is not None:
            mig = MigInstance(index=len(out[bus]))
            out[bus].append(mig)
            section = None
            continue
        if mig is None:
            continue
        if indent <= 4 and stripped and stripped != "MIG Device":
            mig, section = None, None  # back at GPU level: the MIG list is over
            continue
        if ":" not in stripped:
            section = stripped
            continue
        key, _, value = (p.strip() for p in stripped.partition(":"))
        if key == "Index":
            mig.index = int(value)
        elif key == "GPU Instance ID":
            mig.gpu_instance_id = _int(value)
        elif key == "Compute Instance ID":
            mig.compute_instance_id = _int(value)
        elif section and "FB Memory" in section and "BAR1" not in section:
            if key == "Total":
                mig.memory_total_bytes = _mib(value)
            elif key == "Used":
                mig.memory_used_bytes = _mib(value)
            elif key == "Free":
                mig.memory_free_bytes = _mib(value)
    return out


def attach_mig(readings: list[GpuReading], q_text: str, list_text: str) -> None:
    """Fill each MIG-enabled reading's instances from `-q` (memory) and `-L` (profile, UUID)."""
    by_bus = parse_q_mig(q_text)
    listed = parse_list(list_text)
    for r in readings:
        if not r.mig_mode:
            continue
        key = _norm_bus(r.pci_bus_id)
        instances = next((v for k, v in by_bus.items() if _norm_bus(k) == key), [])
        for profile, dev, uuid in listed.get(r.index, []):
            for inst in instances:
                if inst.index == dev:
                    inst.profile, inst.uuid = profile, uuid
        r.mig_instances = instances


def _norm_bus(bus: str | None) -> str:
    """'00000000:00:09.0' (NVML) and '0000:00:09.0' (sysfs) name the same device."""
    if not bus:
        return ""
    dom, _, rest = bus.lower().partition(":")
    return f"{int(dom, 16):04x}:{rest}" if dom and rest else bus.lower()


def probe(
    run: Callable[..., RunResult] = run_command, which: Callable[..., str | None] = find_program
) -> tuple[list[GpuReading], BackendStatus]:
    """Read layer: run nvidia-smi (fewer fields on failure), never raise."""
    exe = which("nvidia-smi", WSL_PATHS)
    if exe is None:
        return [], BackendStatus(name="nvidia-smi", present=False, reason=msg("nvidia-smi not found"))
    for fields in QUERIES:
        res = run([exe, f"--query-gpu={fields}", "--format=csv"])
        if res.ok or res.returncode is None or res.returncode < 0 or res.returncode == 6:
            break  # answered, or missing, hung, crashed, no GPU: fewer fields will not help
    if not res.ok:
        # exit 6 "No devices were found": driver utilities on a machine without an NVIDIA GPU;
        # anything else (9: "couldn't communicate with the NVIDIA driver", a hang, a crash) is a failure
        absent = res.missing or res.returncode == 6
        return [], BackendStatus(name="nvidia-smi", present=False, reason=res.reason, failed=not absent)
    rows = parse_query_csv(res.stdout)
    if len(rows) > MAX_DEVICES_PER_BACKEND:
        return [], BackendStatus(name="nvidia-smi", present=False, failed=True,
                                 reason=msg("nvidia-smi listed %(n)s GPUs: not a believable answer", n=Num(len(rows), ",")))
    readings = [row_to_reading(row, i) for i, row in enumerate(rows)]
    if not readings:
        return [], BackendStatus(name="nvidia-smi", present=False, reason=msg("nvidia-smi listed no GPUs"), failed=True)
    if any(r.mig_mode for r in readings):
        q = run([exe, "-q"])
        lst = run([exe, "-L"])
        attach_mig(readings, q.stdout if q.ok else "", lst.stdout if lst.ok else "")
        if q.ok:
            _, cuda = parse_banner_versions(q.stdout)
            for r in readings:
                r.cuda_version = cuda
    return readings, BackendStatus(name="nvidia-smi", present=True, devices=len(readings))
