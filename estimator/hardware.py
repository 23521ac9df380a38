"""Typed hardware the estimator sizes against: devices named by the user or probed.

The estimator never touches the machine; `probe/` and the GPU catalog build these values.
"""
from __future__ import annotations

from typing import Literal

from fitprobe.estimator.fields import doc, record

DeviceKind = Literal["gpu", "apple", "npu", "hpu", "cpu"]  # hpu: Intel Gaudi (runs vLLM only)


@record
class Device:
    """One accelerator as the estimator sees it (never several cards collapsed into one)."""

    name: str
    kind: DeviceKind = "gpu"
    memory_bytes: int = doc(gt=0, description="physical memory of the device")
    driver_total_bytes: int | None = doc(
        default=None, gt=0,
        description="the total CUDA reports (cudaMemGetInfo: physical minus driver-reserved); vLLM and SGLang size on it")
    free_bytes: int | None = doc(default=None, ge=0, description="free right now (probed only)")
    usable_cap_bytes: int | None = doc(
        default=None,
        gt=0,
        description="hard cap below physical memory: Metal working-set limit, MIG slice, carve-out + GTT",
    )
    bandwidth_gbs: float | None = doc(default=None, gt=0)
    fp16_tflops: float | None = doc(default=None, gt=0)
    int8_tops: float | None = doc(default=None, gt=0, description="dense INT8 tensor rate (the rate llama.cpp's "
                                                                   "quantized CUDA matmuls run at)")
    fp8: bool = False
    fp4: bool = False
    unified_memory: bool = False
    nvlink: bool = False
    tdp_w: float | None = None
    price_usd: float | None = None
    catalog_key: str | None = None
    compute_capability: str | None = doc(default=None, description='NVIDIA "8.6" (gates CUDA graphs); AMD "gfx1100"')
    gpu_cores: int | None = doc(default=None, gt=0, description="GPU cores of the chip's bin, where a chip is sold in "
                                                               "several (Apple: an M4 Max has 32 or 40)")


@record
class Hardware:
    """What a plan runs on: zero or more devices plus the host's RAM (for offload)."""

    devices: list[Device] = doc(default_factory=list)
    system_ram_bytes: int | None = doc(default=None, gt=0)
    ram_available_bytes: int | None = doc(default=None, ge=0)
    ram_bandwidth_gbs: float | None = doc(default=None, gt=0)
    cpu_threads: int | None = doc(default=None, gt=0, description="CPU cores llama.cpp computes on (physical)")
    cpu_ghz: float | None = doc(default=None, gt=0, le=10, description="those cores' clock (maximum turbo), GHz")
    cpu_arch: Literal["x86_64", "atom", "arm64", "apple"] | None = doc(
        default=None, description="their core class: x86_64, atom (Intel's Atom-line cores: N100, Celeron N/J), arm64 "
                                  "(Neoverse, Cortex, Oryon) or apple (Apple silicon's P-cores); None: x86_64")
    usable_fraction: float = doc(default=0.95, gt=0, le=1, description="share of physical memory treated as usable")

    @property
    def name(self) -> str:
        """'2× RTX 4090' for identical cards, 'RTX 3090 + RTX 4090' for mixed ones, 'CPU only' for none."""
        if not self.devices:
            return "CPU only"
        names = [d.name for d in self.devices]
        if len(set(names)) == 1:
            return names[0] if len(names) == 1 else f"{len(names)}x {names[0]}"
        return " + ".join(names)

    def usable_bytes(self, device: Device, *, now: bool = False) -> int:
        """Memory a model may use on one device: a share of physical memory, never above a hard cap.

        With now=True the free memory (other processes counted) bounds it too.
        """
        usable = int(device.memory_bytes * self.usable_fraction)
        if device.usable_cap_bytes is not None:
            usable = min(usable, device.usable_cap_bytes)
        if now and device.free_bytes is not None:
            usable = min(usable, device.free_bytes)
        return usable
