"""Huawei Ascend NPUs from the `npu-smi info` box table.

Each chip is one device: A3 boards list two chips under one NPU id (PROBING.md §5).
Memory = HBM (where weights go); the 910A's extra DDR is noted, not added.
"""
from __future__ import annotations

import re
from typing import Callable

from fitprobe.estimator.message import msg

from .run import RunResult, find_program, run_command
from .types import MiB, BackendStatus, GpuReading

_BUS = re.compile(r"^[0-9A-Fa-fx]{4,8}:[0-9A-Fa-fx]{2}:[0-9A-Fa-fx]{2}\.\d$")
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_npu_smi_info(text: str) -> list[GpuReading]:
    """Pairs of rows: 'NPU Name | Health | ...' then 'Chip [Phy-ID] | Bus-Id | AICore Memory HBM'."""
    rows = [_cells(ln) for ln in text.splitlines() if ln.strip().startswith("|") and not set(ln.strip()) <= set("|+=-")]
    version = re.search(r"npu-smi\s+(\S+)", text)
    out: list[GpuReading] = []
    for first, second in zip(rows, rows[1:]):
        if len(first) < 3 or len(second) < 3:
            continue
        head = re.fullmatch(r"(\d+)\s+(\S+)", first[0])
        if not head or not _BUS.match(second[1]):
            continue
        pairs = _PAIR.findall(second[2])
        if not pairs:
            continue
        hbm_used, hbm_total = (int(x) for x in pairs[-1])
        ddr_used, ddr_total = (int(x) for x in pairs[0]) if len(pairs) > 1 else (0, 0)
        chip = second[0].split()[0] if second[0] else "0"
        name = head.group(2)
        r = GpuReading(
            index=len(out),
            name=name if name.lower().startswith("ascend") else f"Ascend {name}",
            vendor="huawei",
            kind="npu",
            pci_bus_id=second[1],
            memory_total_bytes=hbm_total * MiB if hbm_total else None,
            memory_used_bytes=hbm_used * MiB if hbm_total else None,
            memory_free_bytes=(hbm_total - hbm_used) * MiB if hbm_total else None,
            driver=version.group(1) if version else None,
            source="npu-smi",
        )
        r.notes.append(msg("NPU %(npu)s chip %(chip)s", npu=head.group(1), chip=str(chip)))
        if ddr_total:
            r.notes.append(msg("also %(total)s MB DDR on the card (%(used)s MB used), not counted", total=str(ddr_total),
                               used=str(ddr_used)))
        if name.lower() in {"xxx", ""}:
            r.notes.append(msg("chip name masked in npu-smi output"))
        out.append(r)
    return out


def probe(
    run: Callable[..., RunResult] = run_command, which: Callable[..., str | None] = find_program
) -> tuple[list[GpuReading], BackendStatus]:
    exe = which("npu-smi")
    if not exe:
        return [], BackendStatus(name="ascend", present=False, reason=msg("npu-smi not found"))
    res = run([exe, "info"])
    readings = parse_npu_smi_info(res.stdout) if res.ok else []
    if readings:
        return readings, BackendStatus(name="ascend", present=True, devices=len(readings))
    # npu-smi ships with the Ascend driver: when it is installed but does not answer, the NPUs are unreadable
    return [], BackendStatus(name="ascend", present=False, reason=res.reason or msg("npu-smi listed no NPUs"),
                             failed=not res.ok and not res.missing)
