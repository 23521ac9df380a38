"""`probe_machine()`: run every backend, collect what each saw, never raise.

Like llmfit (and unlike an early exit on the first vendor found), all vendors are asked, so a box
with an NVIDIA card and an AMD iGPU reports both. Each backend's failure becomes a BackendStatus.
The vendors run at once under one deadline (PROBE_DEADLINE_S): four hung tools cost 5 s, not 4 x 8 s.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Callable, Mapping

from fitprobe.deadline import Deadline, DeadlinePassed, Job
from fitprobe.estimator.fields import replace
from fitprobe.estimator.message import Num, msg

from . import amd, apple, ascend, intel, nvidia_nvml, nvidia_smi
from .cpu import cgroup_memory_limit, read_cpu, read_ram
from .masks import active_masks, apply_masks
from .match import match_all
from .run import DEFAULT_TIMEOUT_S, find_program, run_command
from .types import MAX_DEVICES_PER_BACKEND, BackendStatus, GpuReading, PlatformInfo, ProbeReport


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


PROBE_DEADLINE_S = 5.0  # every vendor at once; a healthy nvidia-smi answers in ~0.1-0.5 s, a hung one never


def _guard(name: str, fn: Callable[[], tuple[list[GpuReading], BackendStatus]]):
    try:
        found, status = fn()
    except Exception as exc:  # noqa: BLE001 - odd output or a bug in one backend must not stop the rest
        error = f"{type(exc).__name__}: {exc}"
        return [], BackendStatus(name=name, present=False, failed=True, reason=msg("probe error: %(error)s", error=error))
    if len(found) > MAX_DEVICES_PER_BACKEND:
        return [], BackendStatus(name=name, present=False, failed=True,
                                 reason=msg("%(n)s devices listed: not a believable answer", n=Num(len(found), ",")))
    return found, status


def _nvidia(nvml_module, run, which) -> tuple[list[GpuReading], list[BackendStatus]]:
    """NVML, else nvidia-smi. NVIDIA is unreadable when one of them is there but neither answers."""
    found, nvml = _guard("nvml", lambda: nvidia_nvml.probe(nvml_module))
    if found:
        return found, [nvml]
    found, smi = _guard("nvidia-smi", lambda: nvidia_smi.probe(run, which))
    if found:  # nvidia-smi read the GPUs: NVML's failure is a note, not a blocker
        nvml = replace(nvml, failed=False)
    return found, [nvml, smi]


def probe_machine(
    env: Mapping[str, str] | None = None,
    sys_root: Path = Path("/sys"),
    proc_root: Path = Path("/proc"),
    run: Callable = run_command,
    which: Callable = find_program,
    nvml_module=None,
    catalog: list | None = None,
    deadline_s: float = PROBE_DEADLINE_S,
) -> ProbeReport:
    """Every backend at once under one deadline; a backend still running at the deadline is failed
    (its tool hung), and its thread is left behind."""
    env = os.environ if env is None else env
    deadline = Deadline(deadline_s)
    system = platform.system()
    report = ProbeReport(
        platform=PlatformInfo(
            system=system, release=platform.release(), machine=platform.machine(), wsl=detect_wsl(env, proc_root)
        )
    )

    def bounded_run(args, timeout: float = DEFAULT_TIMEOUT_S, **kw):
        return run(args, timeout=max(0.05, min(timeout, deadline.remaining())), **kw)

    try:
        report.ram_total_bytes, report.ram_available_bytes, report.ram_source = read_ram()
    except Exception as exc:  # noqa: BLE001
        report.notes.append(msg("RAM not readable: %(exc)s", exc=exc))
    ram_available = report.ram_available_bytes
    vendors: dict[str, Job] = {"nvidia": Job(lambda: _nvidia(nvml_module, bounded_run, which), "probe-nvidia")}
    if system == "Linux":
        vendors["amd"] = Job(lambda: _listed(_guard("amd", lambda: amd.probe(sys_root, None, bounded_run, which))))
        vendors["intel"] = Job(lambda: _listed(_guard("intel", lambda: intel.probe(sys_root, bounded_run, which))))
        vendors["ascend"] = Job(lambda: _listed(_guard("ascend", lambda: ascend.probe(bounded_run, which))))
    elif system == "Darwin":
        vendors["apple"] = Job(lambda: _listed(_guard(
            "apple", lambda: apple.probe(bounded_run, which, ram_available=ram_available))))

    try:
        report.cpu = read_cpu()
    except Exception as exc:  # noqa: BLE001
        report.notes.append(msg("CPU not readable: %(exc)s", exc=exc))
    if system == "Linux":
        try:
            self_cg = (proc_root / "self" / "cgroup").read_text()
            report.cgroup_limit_bytes, report.cgroup_source = cgroup_memory_limit(sys_root / "fs" / "cgroup", self_cg)
        except OSError:
            pass

    gpus: list[GpuReading] = []
    statuses: list[BackendStatus] = []
    for vendor, job in vendors.items():
        try:
            found, status_list = job.result(deadline.remaining() + 0.5)  # a killed tool needs a moment to reap
        except DeadlinePassed:
            found, status_list = [], [BackendStatus(name=vendor, present=False, failed=True,
                                                    reason=msg("did not answer within the %(seconds)s s probe deadline", seconds=Num(deadline_s, "g")))]
        if vendor == "nvidia":
            for r in found:
                nvidia_nvml.fill_unified_from_host(r, report.ram_total_bytes, report.ram_available_bytes)
        elif vendor == "amd":
            for r in found:
                amd.apply_apu_pools(r, report.ram_total_bytes)
        gpus += found
        statuses += status_list
    if system not in ("Linux", "Darwin"):
        statuses.append(BackendStatus(name="amd/intel/ascend", present=False, reason=msg("not probed on %(system)s", system=system)))

    report.visible_masks = active_masks(env)
    report.notes += apply_masks(gpus, env)
    try:
        match_all(gpus, catalog)
    except Exception as exc:  # noqa: BLE001
        report.notes.append(msg("catalog match failed: %(exc)s", exc=exc))
    if report.platform.wsl and not gpus:
        report.notes.append(msg("WSL2: NVIDIA libraries live in /usr/lib/wsl/lib; check the Windows driver"))
    report.gpus = gpus
    report.backends = statuses
    return report


def _listed(result: tuple[list[GpuReading], BackendStatus]) -> tuple[list[GpuReading], list[BackendStatus]]:
    found, status = result
    return found, [status]
