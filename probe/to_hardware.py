"""ProbeReport → the estimator's typed Hardware: one Device per usable, visible accelerator.

Never collapses cards: mixed GPUs stay separate Devices. Left out (with a note added to
report.notes): hidden GPUs, integrated GPUs without their own pool (their memory is system RAM,
sized as CPU offload), and devices whose memory size is unknown. A MIG-enabled GPU is the one
slice a process gets (the one CUDA_VISIBLE_DEVICES names, else the first), sized by its own memory.
"""
from __future__ import annotations

import re
from typing import Any

from fitprobe.estimator.hardware import Device, Hardware
from fitprobe.estimator.message import msg

from .match import load_catalog
from .types import GpuReading, ProbeReport


def _note(report: ProbeReport, text: str) -> None:
    if text not in report.notes:
        report.notes.append(text)


def _device(g: GpuReading, entry: dict[str, Any] | None, report: ProbeReport) -> Device | None:
    entry = entry or {}
    name, total, free = g.name, g.memory_total_bytes, g.memory_free_bytes
    per_board = entry.get("devices_per_board") or 1  # one chip of a dual-chip board: its share
    bandwidth = entry["bandwidth_gbs"] / per_board if entry.get("bandwidth_gbs") else g.derived_bandwidth_gbs
    tflops = entry["fp16_tflops"] / per_board if entry.get("fp16_tflops") else None
    int8 = entry["int8_tops"] / per_board if entry.get("int8_tops") else None
    if g.mig_mode and g.mig_instances:
        inst = g.mig_instances[0]
        if not inst.memory_total_bytes:
            _note(report, msg("%(gpu)s: MIG enabled but slice memory unknown; left out", gpu=g.name))
            return None
        share = inst.memory_total_bytes / total if total else None
        # A MIG instance owns its memory slices and their memory controllers (NVIDIA MIG user
        # guide); bandwidth and compute scale roughly with its share of memory (approximation).
        bandwidth = bandwidth * share if bandwidth and share else None
        tflops = tflops * share if tflops and share else None
        int8 = int8 * share if int8 and share else None
        name = f"{g.name} MIG {inst.profile}" if inst.profile else f"{g.name} MIG {inst.index}"
        total, free = inst.memory_total_bytes, inst.memory_free_bytes
        if len(g.mig_instances) > 1:
            _note(report, msg("%(gpu)s: %(n)s MIG slices; a process uses one, sized on %(slice)s", gpu=g.name,
                               n=str(len(g.mig_instances)), slice=name))
    if not total:
        _note(report, msg("%(gpu)s: memory size unknown; left out", gpu=g.name))
        return None
    # what CUDA (and vLLM's torch.cuda.mem_get_info) reports as total: NVML's total less the driver's reserve
    reserved = g.memory_reserved_bytes if not g.mig_mode else None
    driver_total = total - reserved if reserved and 0 < reserved < total else None
    cap = g.usable_cap_bytes
    fraction = entry.get("gpu_working_set_fraction")
    if cap is None and g.vendor == "apple" and fraction:
        cap = int(total * float(fraction))
    return Device(
        name=name,
        kind="apple" if g.vendor == "apple" else ("npu" if g.kind == "npu" else "gpu"),
        memory_bytes=total,
        driver_total_bytes=driver_total,
        free_bytes=free if free is None or free >= 0 else 0,
        usable_cap_bytes=min(cap, total) if cap else None,
        bandwidth_gbs=float(bandwidth) if bandwidth else None,
        fp16_tflops=float(tflops) if tflops else None,
        int8_tops=float(int8) if int8 else None,
        fp8=bool(entry.get("fp8", False)),
        fp4=bool(entry.get("fp4", False)),
        unified_memory=g.unified_memory or bool(entry.get("unified_memory", False)),
        nvlink=bool(g.nvlink_links),
        tdp_w=entry.get("tdp_w") or g.power_limit_w,
        price_usd=entry["price_usd"] / per_board if entry.get("price_usd") else None,
        catalog_key=g.catalog_key,
        compute_capability=g.compute_capability or entry.get("compute_capability"),
    )


def probe_hardware(report: ProbeReport, catalog: list[dict[str, Any]] | None = None) -> Hardware:
    """Hardware for the sizing engine. RAM is capped by the container's cgroup limit."""
    catalog = load_catalog() if catalog is None else catalog
    by_key = {str(e.get("key") or e.get("name")): e for e in catalog}
    devices = []
    for g in report.gpus:
        if not g.visible:
            continue
        if g.integrated and not g.unified_memory:
            _note(report, msg("%(gpu)s: integrated GPU with a small carve-out; its memory is system RAM, left out",
                               gpu=g.name))
            continue
        dev = _device(g, by_key.get(g.catalog_key or ""), report)
        if dev is not None:
            devices.append(dev)
    ram, avail = report.ram_total_bytes, report.ram_available_bytes
    if report.cgroup_limit_bytes:
        ram = min(ram, report.cgroup_limit_bytes) if ram else report.cgroup_limit_bytes
        avail = min(avail, report.cgroup_limit_bytes) if avail is not None else None
    cpu = report.cpu
    return Hardware(
        devices=devices,
        system_ram_bytes=ram or None,
        ram_available_bytes=avail,
        ram_bandwidth_gbs=report.ram_bandwidth_gbs,
        cpu_threads=(cpu.performance_cores or cpu.physical_cores or cpu.logical_cores) if cpu else None,
        cpu_ghz=cpu.max_ghz if cpu else None,
        cpu_arch=core_class(cpu) if cpu else None,
    )


# Brand strings of Intel's x86 parts built only of Atom-line cores: "Intel(R) N100", "Intel(R) Core(TM) i3-N305",
# "Intel(R) Atom(TM) x7425E", "Intel(R) Celeron(R) N5105", "Intel(R) Pentium(R) Silver J5005". A hybrid CPU's
# E-cores are not counted here: llama.cpp computes on its P-cores (performance_cores).
ATOM_ONLY_CPU = re.compile(r"Intel\(R\) (?:Core\(TM\) (?:i3-|\d )|Core \d )?N\d{2,3}\b|\bAtom\(TM\)"
                           r"|\b(?:Celeron|Pentium)\(R\) (?:Silver )?[NJ]\d{4}\b")


def core_class(cpu) -> str | None:
    """The speed model's core class of a CPU reading: Apple silicon (its brand string, or an arm64 Mac), an Intel
    part of Atom-line cores only (its brand string), else the instruction set."""
    arch = isa(cpu.arch)
    if arch == "arm64" and ((cpu.model or "").startswith("Apple") or cpu.source == "sysctl"):
        return "apple"
    if arch == "x86_64" and ATOM_ONLY_CPU.search(cpu.model or ""):
        return "atom"
    return arch


def isa(machine: str | None) -> str | None:
    """platform.machine() / lscpu's Architecture as the speed model's instruction set (None: other)."""
    m = (machine or "").lower()
    if m in ("x86_64", "amd64", "x64"):
        return "x86_64"
    if m in ("arm64", "aarch64") or m.startswith("armv8"):
        return "arm64"
    return None
