"""`probe_machine()`: run every backend, collect what each saw, never raise.

Like llmfit (and unlike an early exit on the first vendor found), all vendors are asked, so a box
with an NVIDIA card and an AMD iGPU reports both. Each backend's failure becomes a BackendStatus.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Callable, Mapping

from . import amd, apple, ascend, intel, nvidia_nvml, nvidia_smi
from .cpu import cgroup_memory_limit, read_cpu, read_ram
from .masks import active_masks, apply_masks
from .match import match_all
from .run import find_program, run_command
from .types import BackendStatus, GpuReading, PlatformInfo, ProbeReport


def detect_wsl(env: Mapping[str, str], proc_root: Path = Path("/proc")) -> bool:
    """llmfit's test: WSL_INTEROP / WSL_DISTRO_NAME set, or 'microsoft' in the kernel release."""
    if env.get("WSL_INTEROP") or env.get("WSL_DISTRO_NAME"):
        return True
    for f in (proc_root / "sys" / "kernel" / "osrelease", proc_root / "version"):
        try:
            if "microsoft" in f.read_text().lower():
                return True
        except OSError:
            continue
    return False


def _guard(name: str, fn: Callable[[], tuple[list[GpuReading], BackendStatus]]):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - odd output or a bug in one backend must not stop the rest
        return [], BackendStatus(name=name, present=False, reason=f"probe error: {type(exc).__name__}: {exc}")


def probe_machine(
    env: Mapping[str, str] | None = None,
    sys_root: Path = Path("/sys"),
    proc_root: Path = Path("/proc"),
    run: Callable = run_command,
    which: Callable = find_program,
    nvml_module=None,
    catalog: list | None = None,
) -> ProbeReport:
    env = os.environ if env is None else env
    system = platform.system()
    report = ProbeReport(
        platform=PlatformInfo(
            system=system, release=platform.release(), machine=platform.machine(), wsl=detect_wsl(env, proc_root)
        )
    )
    try:
        report.ram_total_bytes, report.ram_available_bytes, report.ram_source = read_ram()
    except Exception as exc:  # noqa: BLE001
        report.notes.append(f"RAM not readable: {exc}")
    try:
        report.cpu = read_cpu()
    except Exception as exc:  # noqa: BLE001
        report.notes.append(f"CPU not readable: {exc}")
    if system == "Linux":
        try:
            self_cg = (proc_root / "self" / "cgroup").read_text()
            report.cgroup_limit_bytes, report.cgroup_source = cgroup_memory_limit(sys_root / "fs" / "cgroup", self_cg)
        except OSError:
            pass

    gpus: list[GpuReading] = []
    statuses: list[BackendStatus] = []

    found, status = _guard("nvml", lambda: nvidia_nvml.probe(nvml_module))
    statuses.append(status)
    if not found:
        found, smi_status = _guard("nvidia-smi", lambda: nvidia_smi.probe(run, which))
        statuses.append(smi_status)
    for r in found:
        nvidia_nvml.fill_unified_from_host(r, report.ram_total_bytes, report.ram_available_bytes)
    gpus += found

    if system == "Linux":
        found, status = _guard("amd", lambda: amd.probe(sys_root, None, run, which))
        for r in found:
            amd.apply_apu_pools(r, report.ram_total_bytes)
        gpus += found
        statuses.append(status)
        found, status = _guard("intel", lambda: intel.probe(sys_root, run, which))
        gpus += found
        statuses.append(status)
        found, status = _guard("ascend", lambda: ascend.probe(run, which))
        gpus += found
        statuses.append(status)
    elif system == "Darwin":
        found, status = _guard("apple", lambda: apple.probe(run, which, ram_available=report.ram_available_bytes))
        gpus += found
        statuses.append(status)
    else:
        statuses.append(BackendStatus(name="amd/intel/ascend", present=False, reason=f"not probed on {system}"))

    report.visible_masks = active_masks(env)
    report.notes += apply_masks(gpus, env)
    try:
        match_all(gpus, catalog)
    except Exception as exc:  # noqa: BLE001
        report.notes.append(f"catalog match failed: {exc}")
    if report.platform.wsl and not gpus:
        report.notes.append("WSL2: NVIDIA libraries live in /usr/lib/wsl/lib; check the Windows driver")
    report.gpus = gpus
    report.backends = statuses
    return report
