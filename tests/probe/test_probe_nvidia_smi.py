"""nvidia-smi fallback, fed with real captures (fixtures/SOURCES.md)."""
from probe_fixtures import capture_section, fixture_text

from fitprobe.probe import nvidia_smi
from fitprobe.probe.nvidia_nvml import fill_unified_from_host
from fitprobe.probe.run import RunResult
from fitprobe.probe.types import MiB

H100 = "nvidia-smi-capture_H100-80GB-HBM3_drv590_linux.txt"
MIG = "nvidia-smi-capture_H100-MIG_drv590_linux.txt"
WIN = "nvidia-smi-capture_RTX2080SUPER_drv610_windows.txt"


def _readings(capture):
    rows = nvidia_smi.parse_query_csv(capture_section(capture, "idle :: query-gpu"))
    return [nvidia_smi.row_to_reading(r, i) for i, r in enumerate(rows)]


def test_h100_query_csv_with_units_and_reserved_memory():
    (r,) = _readings(H100)
    assert r.name == "NVIDIA H100 80GB HBM3"
    assert r.memory_total_bytes == 81559 * MiB
    assert r.memory_reserved_bytes == 479 * MiB
    assert r.memory_free_bytes == 81081 * MiB
    assert (r.compute_capability, r.pcie_gen, r.pcie_width) == ("9.0", 5, 16)
    assert r.mem_clock_mhz == 2619 and r.power_limit_w == 700.0
    assert r.driver == "590.48.01" and r.mig_mode is False and r.source == "nvidia-smi"
    assert not r.unified_memory  # addressing_mode None


def test_h200_and_l40s_hmm_is_not_unified():
    (h200,) = _readings("nvidia-smi-capture_H200_drv590_linux.txt")
    assert h200.name == "NVIDIA H200" and h200.memory_total_bytes == 143771 * MiB
    (l40s,) = _readings("nvidia-smi-capture_L40S_drv595_linux.txt")
    assert l40s.memory_total_bytes == 46068 * MiB
    assert not l40s.unified_memory  # addressing_mode HMM on a discrete card


def test_windows_wddm_memory_used_by_other_programs_and_610_banner():
    (r,) = _readings(WIN)
    assert r.memory_used_bytes == 797 * MiB  # desktop apps already hold memory
    assert r.memory_free_bytes == 7191 * MiB
    assert any("WDDM" in n for n in r.notes)
    banner = capture_section(WIN, "idle :: nvidia-smi (default table)")
    assert nvidia_smi.parse_banner_versions(banner) == ("610.62", "13.3")  # KMD / CUDA UMD labels


def test_mig_instances_from_q_and_L():
    readings = _readings(MIG)
    assert readings[0].mig_mode is True
    nvidia_smi.attach_mig(
        readings, capture_section(MIG, "idle :: query (-q)"), capture_section(MIG, "capabilities :: list (-L)")
    )
    insts = readings[0].mig_instances
    assert [i.profile for i in insts] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert [i.memory_total_bytes // MiB for i in insts] == [40448, 20096, 9984, 9984]
    assert [i.memory_used_bytes // MiB for i in insts] == [26, 17, 9, 9]
    assert insts[0].uuid == "MIG-00000000-0000-0000-0000-000000000000"
    assert (insts[2].gpu_instance_id, insts[2].compute_instance_id) == (9, 0)


def test_gb10_na_memory_becomes_host_ram_once():
    text = fixture_text("nvidia-smi-query_GB10_DGX-Spark.csv")
    (row,) = nvidia_smi.parse_query_csv(text)  # first line is the pasted command
    assert row["memory.total"] is None
    r = nvidia_smi.row_to_reading(row, 0)
    r.name = "NVIDIA GB10"  # that query did not ask for the name
    meminfo = fixture_text("nvml-ctypes_GB10_DGX-Spark.txt")
    assert "127600748 kB" in meminfo
    fill_unified_from_host(r, 127600748 * 1024, 118566368 * 1024)
    assert r.unified_memory and r.memory_total_bytes == 127600748 * 1024
    assert r.memory_free_bytes == 118566368 * 1024
    (row_b,) = nvidia_smi.parse_query_csv(fixture_text("nvidia-smi-query_GB10_DGX-Spark_b.csv"))
    assert row_b == {"memory.free": None, "memory.total": None, "memory.used": None}


def _fake(results):
    calls = []

    def run(args, timeout=None):
        calls.append(args)
        return results.pop(0)

    return run, calls


def test_probe_retries_fewer_fields_then_succeeds():
    csv = capture_section(H100, "idle :: query-gpu")
    run, calls = _fake([RunResult(False, returncode=2, reason="nvidia-smi exited 2"), RunResult(True, csv)])
    readings, status = nvidia_smi.probe(run, lambda *a: "/usr/bin/nvidia-smi")
    assert status.present and len(readings) == 1
    assert calls[1][1].startswith("--query-gpu=index,name,uuid,memory.total")


def test_probe_wsl_failures_give_reasons_not_exceptions():
    parts = fixture_text("wsl2_nvidia-smi-failures.txt").split("---")
    no_driver = RunResult(False, parts[0], "", 9, "nvidia-smi exited 9: " + parts[0].strip().splitlines()[0])
    run, _ = _fake([no_driver] * 3)
    readings, status = nvidia_smi.probe(run, lambda *a: "/usr/lib/wsl/lib/nvidia-smi")
    assert readings == [] and not status.present
    assert "couldn't communicate with the NVIDIA driver" in status.reason
    segv = RunResult(False, parts[2], "", -11, "nvidia-smi crashed (signal 11)")
    run, calls = _fake([segv])
    readings, status = nvidia_smi.probe(run, lambda *a: "nvidia-smi")
    assert not status.present and "signal 11" in status.reason and len(calls) == 1  # no retry after a crash


def test_probe_missing_tool():
    readings, status = nvidia_smi.probe(lambda *a, **k: None, lambda *a: None)
    assert readings == [] and status.reason == "nvidia-smi not found"


def test_h100_cuda_total_is_nvml_total_less_the_drivers_reserve():
    # vLLM sizes on torch.cuda.mem_get_info()'s total: 81559 - 479 = 81080 MiB (79.18 GiB) on this driver
    from fitprobe.probe.to_hardware import probe_hardware
    from fitprobe.probe.types import PlatformInfo, ProbeReport

    (r,) = _readings(H100)
    hw = probe_hardware(ProbeReport(platform=PlatformInfo(system="Linux"), gpus=[r]), catalog=[])
    assert hw.devices[0].memory_bytes == 81559 * MiB
    assert hw.devices[0].driver_total_bytes == 81080 * MiB
