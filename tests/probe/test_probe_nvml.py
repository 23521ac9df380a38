"""NVML through a stand-in `pynvml` fed with values from real recordings (fixtures/SOURCES.md)."""
import sys

from fake_pynvml import FakeNVML, NVMLError_GpuIsLost, NVMLError_LibraryNotFound

from fitprobe.probe import nvidia_nvml
from fitprobe.probe.registry import probe_machine
from fitprobe.probe.types import MiB

# nvidia-smi-capture_H200_drv590_linux.txt (idle): 143771 MiB total, 614 reserved, 0 used, 143158 free,
# compute 9.0, PCIe gen 5 x16, max mem clock 3201 MHz, power limit 700 W, driver 590.48.01, CUDA 13.1.
H200 = {
    "name": "NVIDIA H200",
    "uuid": "GPU-00000000-0000-0000-0000-000000000000",
    "bus": "00000000:83:00.0",
    "memory": {"total": 143771 * MiB, "reserved": 614 * MiB, "used": 0, "free": 143158 * MiB},
    "cc": (9, 0),
    "pcie_gen": 5,
    "pcie_width": 16,
    "mem_clock": 3201,
    "power_mw": 700000,
    "addressing": 0,
}
# nvidia-smi-capture_H100-80GB-HBM3: max mem clock 2619 MHz; bus width 5120 bits is the spec value
# PROBING.md §1.5 uses (the capture has no bus-width field).
H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-00000000-0000-0000-0000-000000000001",
    "memory": {"total": 81559 * MiB, "reserved": 479 * MiB, "used": 0, "free": 81081 * MiB},
    "cc": (9, 0),
    "mem_clock": 2619,
    "bus_width": 5120,
    "nvlink": 18,  # `nvidia-smi nvlink -s` in the H100 capture lists 18 links
}


def _mig(profile, gi, total, used, free, idx):
    return {
        "name": f"NVIDIA H100 80GB HBM3 MIG {profile}",
        "uuid": f"MIG-0000000{idx}-0000-0000-0000-00000000000{idx}",
        "gi": gi,
        "ci": 0,
        "memory": {"total": total * MiB, "reserved": 0, "used": used * MiB, "free": free * MiB},
    }


# nvidia-smi-capture_H100-MIG_drv590_linux.txt: the four MIG devices of `nvidia-smi -q`.
H100_MIG = dict(
    H100,
    mig=[
        _mig("3g.40gb", 2, 40448, 26, 40423, 0),
        _mig("2g.20gb", 3, 20096, 17, 20080, 1),
        _mig("1g.10gb", 9, 9984, 9, 9976, 2),
        _mig("1g.10gb", 10, 9984, 9, 9976, 3),
    ],
)


def test_h200_reading():
    (r,), status = nvidia_nvml.probe(FakeNVML([H200]))
    assert status.present and status.name == "nvml"
    assert r.memory_total_bytes == 143771 * MiB and r.memory_reserved_bytes == 614 * MiB
    assert r.memory_free_bytes == 143158 * MiB
    assert (r.compute_capability, r.cuda_version, r.driver) == ("9.0", "13.1", "590.48.01")
    assert (r.pcie_gen, r.pcie_width, r.power_limit_w, r.mem_clock_mhz) == (5, 16, 700.0, 3201)
    assert r.nvlink_links is None  # every link query NotSupported
    assert r.source == "nvml" and not r.unified_memory


def test_bandwidth_derived_from_clock_and_bus_width():
    (r,), _ = nvidia_nvml.probe(FakeNVML([H100]))
    assert r.derived_bandwidth_gbs == 3352.3  # spec 3.35 TB/s
    assert r.nvlink_links == 18


def test_mig_slices_carry_their_own_memory():
    (r,), _ = nvidia_nvml.probe(FakeNVML([H100_MIG]))
    assert r.mig_mode is True
    assert [m.profile for m in r.mig_instances] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert [m.memory_total_bytes // MiB for m in r.mig_instances] == [40448, 20096, 9984, 9984]
    assert r.mig_instances[2].gpu_instance_id == 9


def test_gb10_memory_not_supported_is_host_ram():
    # nvml-ctypes_GB10_DGX-Spark.txt: both memory calls NOT_SUPPORTED; MemTotal 127600748 kB.
    gb10 = {"name": "NVIDIA GB10", "uuid": "GPU-x", "cc": (12, 1)}
    (r,), status = nvidia_nvml.probe(FakeNVML([gb10], driver="580.173.02"))
    assert status.present and r.memory_total_bytes is None
    nvidia_nvml.fill_unified_from_host(r, 127600748 * 1024, 118566368 * 1024)
    assert r.unified_memory and r.memory_total_bytes == 127600748 * 1024


def test_heterogeneous_cards_stay_separate():
    # llama-server-list-devices_RTX3080Ti+RTXPRO4000_CUDA.txt: 11909 MiB (11650 free), 24026 MiB (23795 free)
    a = {"name": "NVIDIA GeForce RTX 3080 Ti", "memory": {"total": 11909 * MiB, "used": 259 * MiB, "free": 11650 * MiB, "reserved": None}}
    b = {"name": "NVIDIA RTX PRO 4000 Blackwell SFF Edition", "memory": {"total": 24026 * MiB, "used": 231 * MiB, "free": 23795 * MiB, "reserved": None}}
    readings, status = nvidia_nvml.probe(FakeNVML([a, b]))
    assert status.devices == 2
    assert [r.memory_total_bytes // MiB for r in readings] == [11909, 24026]
    assert readings[0].name != readings[1].name


def test_memory_already_used_by_other_processes():
    # nvidia-smi_2xRTX4090_drv550.txt: GPU 0 507MiB / 24564MiB used
    card = {"name": "NVIDIA GeForce RTX 4090", "memory": {"total": 24564 * MiB, "used": 507 * MiB, "free": 24057 * MiB, "reserved": None}}
    (r,), _ = nvidia_nvml.probe(FakeNVML([card]))
    assert r.memory_free_bytes == (24564 - 507) * MiB


def test_lost_gpu_is_skipped_and_the_rest_reported():
    (r,), status = nvidia_nvml.probe(FakeNVML([NVMLError_GpuIsLost("GPU is lost"), H200]))
    assert r.index == 1 and status.present and "GPU is lost" in status.reason


def test_library_not_found_is_a_reason():
    nv = FakeNVML([], init_error=NVMLError_LibraryNotFound("NVML Shared Library Not Found"))
    readings, status = nvidia_nvml.probe(nv)
    assert readings == [] and not status.present
    assert status.reason == "NVMLError_LibraryNotFound: NVML Shared Library Not Found"


def test_v1_fallback_when_binding_has_no_v2(monkeypatch):
    nv = FakeNVML([H200])
    monkeypatch.setattr(FakeNVML, "nvmlMemory_v2", None)
    (r,), _ = nvidia_nvml.probe(nv)
    assert r.memory_total_bytes == 143771 * MiB and r.memory_reserved_bytes is None


def test_registry_imports_pynvml_from_sys_modules(monkeypatch, tmp_path):
    """The module boundary: whatever `import pynvml` yields is what the registry uses."""
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([H200, H100]))
    report = probe_machine(env={}, sys_root=tmp_path, proc_root=tmp_path, which=lambda *a: None, catalog=[])
    assert [g.name for g in report.gpus] == ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]
    assert report.backends[0].present and report.backends[0].name == "nvml"
    assert all(b.name != "nvidia-smi" for b in report.backends)  # no fallback needed
