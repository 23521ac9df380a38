"""Typed readings from the probe. Every reading says where it came from (`source`) so a wrong
number can be traced to the tool that produced it. Records (`estimator.fields`), not pydantic models:
`check` probes on every run and should not pay for importing pydantic; `probe --json` writes them
through `fitprobe.record_json`, which checks each value against its declared type."""
from __future__ import annotations

from typing import Literal

from fitprobe.estimator.fields import doc, record

Source = Literal[
    "nvml",
    "nvidia-smi",
    "amdsmi",
    "rocm-smi",
    "sysfs",
    "sysctl",
    "system_profiler",
    "metal",
    "xpu-smi",
    "npu-smi",
    "psutil",
    "procfs",
    "cgroup",
    "platform",
]
Vendor = Literal["nvidia", "amd", "intel", "apple", "huawei"]


@record
class MigInstance:
    """One MIG slice: a process on it sees only this memory, not the parent GPU's."""

    index: int
    profile: str | None = None  # "1g.10gb", "3g.40gb"
    uuid: str | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    memory_total_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_used_bytes: int | None = None


@record
class GpuReading:
    """One accelerator as probed. Optional fields are None when the tool could not say."""

    index: int
    name: str
    vendor: Vendor
    kind: Literal["gpu", "npu"] = "gpu"
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    gtt_total_bytes: int | None = None  # AMD APUs: system RAM the GPU may map
    driver: str | None = None
    cuda_version: str | None = None
    compute_capability: str | None = None  # "9.0" (NVIDIA) or "gfx1100" (AMD)
    pcie_gen: int | None = None
    pcie_width: int | None = None
    nvlink_links: int | None = None
    mig_mode: bool | None = None
    mig_instances: list[MigInstance] = doc(default_factory=list)
    power_limit_w: float | None = None
    mem_clock_mhz: int | None = None  # max memory clock, as NVML/nvidia-smi report it
    mem_bus_width_bits: int | None = None
    derived_bandwidth_gbs: float | None = None
    gpu_cores: int | None = None  # Apple GPU cores (bins differ in bandwidth)
    integrated: bool = False
    unified_memory: bool = False
    usable_cap_bytes: int | None = None  # hard cap below total (Metal working set, APU pools)
    visible: bool = True
    hidden_reason: str | None = None
    catalog_key: str | None = None
    catalog_name: str | None = None
    match_note: str | None = None
    source: Source
    notes: list[str] = doc(default_factory=list)


@record
class CpuReading:
    """Host CPU: model, core counts and the SIMD/matrix flags that matter for CPU inference."""

    model: str | None = None
    arch: str | None = None
    physical_cores: int | None = None
    logical_cores: int | None = None
    flags: list[str] = doc(default_factory=list)
    performance_cores: int | None = doc(default=None, description="the cores llama.cpp computes on by default where "
                                        "it skips others: a hybrid Intel CPU's P-cores on Linux "
                                        "(common_cpu_get_num_math), an Apple chip's (hw.perflevel0.physicalcpu)")
    max_ghz: float | None = doc(default=None, description="the cores' highest clock: cpufreq's cpuinfo_max_freq, "
                                                          "lscpu's 'CPU max MHz', or (VMs without cpufreq) cpuinfo's "
                                                          "'cpu MHz'")
    source: Source
    notes: list[str] = doc(default_factory=list)


@record
class BackendStatus:
    """Whether one probe backend found anything, and if not, why (never an exception).

    `failed`: the vendor's tool or library is there but did not answer (driver not loaded, hung,
    crashed, flooded its output, an absurd device count): the machine is not probeable, which
    `check` reports as exit 4 instead of planning as if the GPUs were absent."""

    name: str
    present: bool
    reason: str | None = None
    devices: int = 0
    failed: bool = False


@record
class PlatformInfo:
    system: str  # platform.system(): Linux, Darwin, Windows
    release: str | None = None
    machine: str | None = None
    wsl: bool = False


@record
class ProbeReport:
    """Everything the probe saw on this machine."""

    platform: PlatformInfo
    gpus: list[GpuReading] = doc(default_factory=list)
    cpu: CpuReading | None = None
    ram_total_bytes: int | None = None
    ram_available_bytes: int | None = None
    ram_source: Source | None = None
    cgroup_limit_bytes: int | None = None
    cgroup_source: str | None = None
    ram_bandwidth_gbs: float | None = None  # measured by `probe --bench` (probe/membw.py)
    ram_bandwidth_method: str | None = None
    visible_masks: dict[str, str] = doc(default_factory=dict)
    backends: list[BackendStatus] = doc(default_factory=list)
    notes: list[str] = doc(default_factory=list)

    @property
    def visible_gpus(self) -> list[GpuReading]:
        return [g for g in self.gpus if g.visible]


MAX_DEVICES_PER_BACKEND = 64  # the densest nodes hold 16 accelerators (MI300X OAM: 8, 8 x MIG 7); more is garbage
MiB = 1024**2
GiB = 1024**3


def derive_bandwidth_gbs(mem_clock_mhz: int | None, bus_width_bits: int | None) -> float | None:
    """Peak bandwidth from max memory clock x 2 (DDR) x bus width / 8 (PROBING.md §1.5, checked
    against H100/A100/RTX 30xx/T4 spec sheets)."""
    if not mem_clock_mhz or not bus_width_bits:
        return None
    return round(mem_clock_mhz * 2 * bus_width_bits / 8 / 1000, 1)
