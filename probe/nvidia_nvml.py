"""NVIDIA through NVML (`pynvml`, from the nvidia-ml-py package).

Read layer: `read_devices(pynvml)` asks NVML and returns plain dicts (a missing optional value is
None). Parse layer: `to_reading(raw)` turns one dict into a GpuReading. Every call that is not
essential goes through `_safe`, since NotSupported is normal on consumer cards, Jetson, WSL and GB10.
"""
from __future__ import annotations

from typing import Any

from fitprobe.estimator.message import join, msg

from .types import BackendStatus, GpuReading, MigInstance, derive_bandwidth_gbs

# Names whose memory lives in host RAM (GB10/DGX Spark, Jetson "Orin (nvgpu)"): PROBING.md §1.8.
UNIFIED_NAME_HINTS = ("gb10", "(nvgpu)", "jetson", "thor")


def _text(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _safe(nv, fn_name: str, *args, default=None):
    """Call an optional NVML function; any NVMLError or a missing symbol means 'unknown'."""
    fn = getattr(nv, fn_name, None)
    if fn is None:
        return default
    try:
        return _text(fn(*args))
    except Exception:  # noqa: BLE001 - NVMLError subclasses, ctypes errors on odd drivers
        return default


def _memory(nv, handle) -> tuple[dict | None, str | None]:
    """Memory v2 (separates driver-reserved memory, drivers >= 515), else v1. (None, reason) if neither."""
    version = getattr(nv, "nvmlMemory_v2", None)
    if version is not None:
        try:
            m = nv.nvmlDeviceGetMemoryInfo(handle, version=version)
            return {"total": m.total, "free": m.free, "used": m.used, "reserved": getattr(m, "reserved", None)}, None
        except TypeError:
            pass  # old binding without the version keyword
        except Exception as exc:  # noqa: BLE001
            if "NotSupported" in type(exc).__name__:
                return None, "NVML memory query not supported"
    try:
        m = nv.nvmlDeviceGetMemoryInfo(handle)
        return {"total": m.total, "free": m.free, "used": m.used, "reserved": None}, None
    except Exception as exc:  # noqa: BLE001
        return None, f"NVML memory query failed: {exc}"


def _nvlink_links(nv, handle) -> int | None:
    """Active NVLink links; every per-link error (no NVLink on PCIe cards) counts as absent."""
    max_links = getattr(nv, "NVML_NVLINK_MAX_LINKS", 0)
    active, answered = 0, False
    for link in range(max_links):
        state = _safe(nv, "nvmlDeviceGetNvLinkState", handle, link)
        if state is None:
            continue
        answered = True
        active += 1 if state == 1 else 0
    return active if answered else None


def _mig(nv, handle) -> tuple[bool | None, list[dict]]:
    mode = _safe(nv, "nvmlDeviceGetMigMode", handle)
    enabled = bool(mode[0]) if isinstance(mode, (list, tuple)) and mode else None
    instances: list[dict] = []
    if not enabled:
        return enabled, instances
    count = _safe(nv, "nvmlDeviceGetMaxMigDeviceCount", handle, default=0) or 0
    for i in range(count):
        mig = _safe(nv, "nvmlDeviceGetMigDeviceHandleByIndex", handle, i)
        if mig is None:
            continue  # empty slot
        mem, _ = _memory(nv, mig)
        instances.append(
            {
                "index": i,
                "name": _safe(nv, "nvmlDeviceGetName", mig),
                "uuid": _safe(nv, "nvmlDeviceGetUUID", mig),
                "gi": _safe(nv, "nvmlDeviceGetGpuInstanceId", mig),
                "ci": _safe(nv, "nvmlDeviceGetComputeInstanceId", mig),
                "memory": mem,
            }
        )
    return enabled, instances


def read_devices(nv) -> list[dict]:
    """Read layer: one dict per physical GPU. Raises only if NVML itself cannot start."""
    nv.nvmlInit()
    try:
        driver = _safe(nv, "nvmlSystemGetDriverVersion")
        cuda = _safe(nv, "nvmlSystemGetCudaDriverVersion_v2") or _safe(nv, "nvmlSystemGetCudaDriverVersion")
        out = []
        for i in range(nv.nvmlDeviceGetCount()):
            try:
                h = nv.nvmlDeviceGetHandleByIndex(i)
            except Exception as exc:  # noqa: BLE001 - GpuIsLost etc.: skip this one, keep the rest
                out.append({"index": i, "error": f"{type(exc).__name__}: {exc}"})
                continue
            mem, mem_reason = _memory(nv, h)
            pci = _safe(nv, "nvmlDeviceGetPciInfo", h)
            cc = _safe(nv, "nvmlDeviceGetCudaComputeCapability", h)
            power_mw = _safe(nv, "nvmlDeviceGetPowerManagementLimit", h)
            mig_enabled, migs = _mig(nv, h)
            out.append(
                {
                    "index": i,
                    "name": _safe(nv, "nvmlDeviceGetName", h) or "NVIDIA GPU",
                    "uuid": _safe(nv, "nvmlDeviceGetUUID", h),
                    "pci_bus_id": _text(getattr(pci, "busId", None)) if pci is not None else None,
                    "memory": mem,
                    "memory_reason": mem_reason,
                    "driver": driver,
                    "cuda": cuda,
                    "cc": tuple(cc) if cc else None,
                    "pcie_gen": _safe(nv, "nvmlDeviceGetMaxPcieLinkGeneration", h),
                    "pcie_width": _safe(nv, "nvmlDeviceGetMaxPcieLinkWidth", h),
                    "nvlink_links": _nvlink_links(nv, h),
                    "mig_mode": mig_enabled,
                    "mig": migs,
                    "power_limit_mw": power_mw,
                    "mem_clock_mhz": _safe(nv, "nvmlDeviceGetMaxClockInfo", h, getattr(nv, "NVML_CLOCK_MEM", 2)),
                    "bus_width": _safe(nv, "nvmlDeviceGetMemoryBusWidth", h),
                    "addressing_mode": _safe(nv, "nvmlDeviceGetAddressingMode", h),
                }
            )
        return out
    finally:
        _safe(nv, "nvmlShutdown")


def _cuda_str(v: Any) -> str | None:
    """13010 → '13.1' (major = v // 1000, minor = v % 1000 // 10)."""
    if not isinstance(v, int) or v <= 0:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def _mig_profile(name: str | None) -> str | None:
    if not name or "MIG" not in name:
        return None
    return name.split("MIG", 1)[1].strip() or None


def to_reading(raw: dict) -> GpuReading:
    """Parse layer: one read_devices() dict → GpuReading."""
    mem = raw.get("memory") or {}
    total = mem.get("total") or None  # 0 means 'not supported' on GB10 (nvml-ctypes_GB10 sample)
    r = GpuReading(
        index=raw["index"],
        name=raw.get("name") or "NVIDIA GPU",
        vendor="nvidia",
        uuid=raw.get("uuid"),
        pci_bus_id=raw.get("pci_bus_id"),
        memory_total_bytes=total,
        memory_free_bytes=mem.get("free") if total else None,
        memory_used_bytes=mem.get("used") if total else None,
        memory_reserved_bytes=mem.get("reserved") if total else None,
        driver=raw.get("driver"),
        cuda_version=_cuda_str(raw.get("cuda")),
        compute_capability=f"{raw['cc'][0]}.{raw['cc'][1]}" if raw.get("cc") else None,
        pcie_gen=raw.get("pcie_gen"),
        pcie_width=raw.get("pcie_width"),
        nvlink_links=raw.get("nvlink_links"),
        mig_mode=raw.get("mig_mode"),
        power_limit_w=raw["power_limit_mw"] / 1000 if raw.get("power_limit_mw") else None,
        mem_clock_mhz=raw.get("mem_clock_mhz"),
        mem_bus_width_bits=raw.get("bus_width"),
        source="nvml",
    )
    r.derived_bandwidth_gbs = derive_bandwidth_gbs(r.mem_clock_mhz, r.mem_bus_width_bits)
    if raw.get("addressing_mode") == 2:  # NVML_DEVICE_ADDRESSING_MODE_ATS; HMM (1) is not unified
        r.unified_memory = True
    if raw.get("memory_reason") and not total:
        r.notes.append(raw["memory_reason"])
    for m in raw.get("mig") or []:
        mm = m.get("memory") or {}
        r.mig_instances.append(
            MigInstance(
                index=m["index"],
                profile=_mig_profile(m.get("name")),
                uuid=m.get("uuid"),
                gpu_instance_id=m.get("gi"),
                compute_instance_id=m.get("ci"),
                memory_total_bytes=mm.get("total"),
                memory_free_bytes=mm.get("free"),
                memory_used_bytes=mm.get("used"),
            )
        )
    return r


def fill_unified_from_host(r: GpuReading, ram_total: int | None, ram_available: int | None) -> None:
    """GB10/Jetson report no memory of their own (NotSupported / [N/A]); the GPU uses host RAM.

    Count it once, as the device's memory; free = MemAvailable (what llama.cpp does on UMA)."""
    if r.memory_total_bytes or not ram_total:
        return
    if not (r.unified_memory or any(h in r.name.lower() for h in UNIFIED_NAME_HINTS)):
        r.notes.append(msg("memory size not reported by the driver"))
        return
    r.unified_memory = True
    r.integrated = True
    r.memory_total_bytes = ram_total
    r.memory_free_bytes = ram_available
    r.notes.append(msg("no dedicated memory reported: GPU shares host RAM (counted once, as GPU memory)"))


def probe(nv=None) -> tuple[list[GpuReading], BackendStatus]:
    """Never raises: a missing library or driver becomes BackendStatus(present=False, reason)."""
    try:
        if nv is None:
            import pynvml as nv  # noqa: PLC0415 - keep CLI start-up fast
        raws = read_devices(nv)
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, segfault-free failures
        # no library (or no binding) means no NVIDIA driver here; a library that fails means a broken one
        absent = isinstance(exc, ImportError) or "LibraryNotFound" in type(exc).__name__
        return [], BackendStatus(name="nvml", present=False, reason=f"{type(exc).__name__}: {exc}", failed=not absent)
    readings, skipped = [], []
    for raw in raws:
        if "error" in raw:
            skipped.append(msg("GPU %(index)s: %(error)s", index=str(raw["index"]), error=raw["error"]))
            continue
        readings.append(to_reading(raw))
    if not readings:
        reason = join(skipped) if skipped else msg("NVML found no GPUs")
        return [], BackendStatus(name="nvml", present=False, reason=reason, failed=bool(skipped))
    return readings, BackendStatus(
        name="nvml", present=True, devices=len(readings), reason=join(skipped) if skipped else None
    )
