"""A stand-in for the `pynvml` module (nvidia-ml-py), driven by per-device dicts whose values come
from real recordings. Only the calls the probe makes exist; a missing key raises NotSupported,
as NVML does on consumer cards, Jetson, WSL and GB10."""
from __future__ import annotations

from types import SimpleNamespace


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_GpuIsLost(NVMLError):
    pass


class FakeNVML:
    nvmlMemory_v2 = 0x02000028
    NVML_CLOCK_MEM = 2
    NVML_NVLINK_MAX_LINKS = 18
    NVMLError = NVMLError

    def __init__(self, devices, driver="590.48.01", cuda=13010, init_error=None):
        self.devices = devices
        self.driver, self.cuda, self.init_error = driver, cuda, init_error
        self.shutdown = False

    def _get(self, h, key):
        value = h.get(key)
        if value is None:
            raise NVMLError_NotSupported("Not Supported")
        if isinstance(value, Exception):
            raise value
        return value

    def nvmlInit(self):
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self.cuda

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        dev = self.devices[i]
        if isinstance(dev, Exception):
            raise dev
        return dev

    def nvmlDeviceGetName(self, h):
        return self._get(h, "name")

    def nvmlDeviceGetUUID(self, h):
        return self._get(h, "uuid")

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        mem = self._get(h, "memory")
        if version is None:  # v1: used includes reserved
            return SimpleNamespace(total=mem["total"], free=mem["free"], used=mem["total"] - mem["free"])
        return SimpleNamespace(**mem)

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=self._get(h, "bus"))

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return self._get(h, "cc")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self._get(h, "pcie_gen")

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self._get(h, "pcie_width")

    def nvmlDeviceGetNvLinkState(self, h, link):
        links = self._get(h, "nvlink")
        if link >= links:
            raise NVMLError_NotSupported("Not Supported")
        return 1

    def nvmlDeviceGetMigMode(self, h):
        return [1, 1] if h.get("mig") else [0, 0]

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, i):
        migs = h.get("mig") or []
        if i >= len(migs):
            raise NVMLError("Not Found")
        return migs[i]

    def nvmlDeviceGetGpuInstanceId(self, h):
        return self._get(h, "gi")

    def nvmlDeviceGetComputeInstanceId(self, h):
        return self._get(h, "ci")

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return self._get(h, "power_mw")

    def nvmlDeviceGetMaxClockInfo(self, h, clock):
        return self._get(h, "mem_clock")

    def nvmlDeviceGetMemoryBusWidth(self, h):
        return self._get(h, "bus_width")

    def nvmlDeviceGetAddressingMode(self, h):
        return self._get(h, "addressing")
