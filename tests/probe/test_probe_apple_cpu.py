"""Apple (sysctl, system_profiler, Metal working set) and CPU/RAM/cgroup parsers on recordings."""
import re

import pytest
from probe_fixtures import fixture_text

from fitprobe.probe import apple
from fitprobe.probe.cpu import cgroup_memory_limit, cpufreq_max_ghz, parse_cpuinfo, parse_lscpu, parse_meminfo
from fitprobe.probe.run import RunResult
from fitprobe.probe.types import GiB, MiB


def _recorded_mib(name: str) -> float:
    """recommendedMaxWorkingSetSize as ggml printed it (its 'MB' is MiB; one locale uses a comma)."""
    m = re.search(r"recommendedMaxWorkingSetSize\s*=\s*([\d.,]+)", fixture_text(name))
    return float(m.group(1).replace(",", "."))


@pytest.mark.parametrize(
    "ram_gib,sample",
    [(32, "ggml-metal-init_M1Max-32GB.txt"), (64, "ggml-metal-init_M1Max-64GB.txt"), (96, "ggml-metal-init_M2Max-96GB.txt")],
)
def test_derived_working_set_matches_metal_recordings(ram_gib, sample):
    derived = apple.default_working_set(ram_gib * GiB) / MiB
    assert derived == pytest.approx(_recorded_mib(sample), abs=0.02)


def test_derived_working_set_8gb_mac():
    # ggml-metal-init_8GB-Mac.txt prints 5726.63 decimal MB = 5461.34 MiB
    recorded = _recorded_mib("ggml-metal-init_8GB-Mac.txt") * 1e6 / MiB
    assert apple.default_working_set(8 * GiB) / MiB == pytest.approx(recorded, abs=0.02)


def test_derived_working_set_is_a_floor_on_new_macos():
    text = fixture_text("metal-recommendedMaxWorkingSetSize_M5Max-128GB.txt")
    stock = float(re.search(r"([\d.]+) GiB\s+# stock", text).group(1))
    assert apple.default_working_set(128 * GiB) / GiB <= stock


def test_wired_limit_is_what_metal_reports():
    assert "MTL0: Apple M1 Max (26000 MiB" in fixture_text("llama-server-list-devices_M1Max-32GB_wired26000.txt")
    r = apple.build_reading(
        {"hw.memsize": str(32 * GiB), "machdep.cpu.brand_string": "Apple M1 Max", "iogpu.wired_limit_mb": "26000"}
    )
    assert r.usable_cap_bytes == 26000 * MiB and r.unified_memory and r.source == "sysctl"
    r0 = apple.build_reading({"hw.memsize": str(32 * GiB), "machdep.cpu.brand_string": "Apple M1 Max", "iogpu.wired_limit_mb": "0"})
    assert r0.usable_cap_bytes == apple.default_working_set(32 * GiB)
    rm = apple.build_reading({"hw.memsize": str(32 * GiB), "machdep.cpu.brand_string": "Apple M1 Max"}, metal_working_set=21845 * MiB)
    assert rm.source == "metal" and rm.usable_cap_bytes == 21845 * MiB


def test_intel_mac_is_not_apple_silicon():
    assert apple.build_reading({"hw.memsize": str(16 * GiB), "machdep.cpu.brand_string": "Intel(R) Core(TM) i9"}) is None


def test_sysctl_m1pro_perflevels():
    vals = apple.parse_sysctl(fixture_text("sysctl-a-hw_M1Pro.txt"))
    assert vals["hw.perflevel0.physicalcpu"] == "8" and vals["hw.perflevel1.physicalcpu"] == "2"
    assert apple.parse_sysctl(fixture_text("sysctl-a-cpu_M1.txt"))["hw.physicalcpu"] == "8"


def test_system_profiler_names():
    assert apple.parse_displays(fixture_text("system_profiler-displays_M3Pro.json")) == ("Apple M3 Pro", None)
    assert apple.parse_displays(fixture_text("system_profiler-displays_M1_BigSur-2021.json")) == ("Apple M1", None)


def test_apple_probe_reads_through_runner():
    out = {
        "sysctl": RunResult(True, f"hw.memsize: {36 * GiB}\nmachdep.cpu.brand_string: Apple M3 Pro\n"),
        "system_profiler": RunResult(True, fixture_text("system_profiler-displays_M3Pro.json")),
    }
    readings, status = apple.probe(
        run=lambda args, timeout=None: out[args[0]], which=lambda n, *a: n, metal=lambda: None
    )
    assert status.present and readings[0].name == "Apple M3 Pro"
    assert readings[0].usable_cap_bytes == apple.default_working_set(36 * GiB)


def test_cpuinfo_vm_generic_name():
    cpu = parse_cpuinfo(fixture_text("proc-cpuinfo_sandbox-VM_AMD-EPYC_cpu0.txt"))
    assert cpu.model == "AMD EPYC" and cpu.logical_cores == 1 and cpu.physical_cores == 1
    assert "avx2" in cpu.flags and "avx512f" not in cpu.flags
    assert any("VM" in n for n in cpu.notes)


def test_lscpu_amx_flags():
    cpu = parse_lscpu(fixture_text("lscpu-flags_Xeon-8488C_AWS-m7i_AMX.txt"))
    assert cpu.model == "Intel(R) Xeon(R) Platinum 8488C" and cpu.logical_cores == 8
    assert {"avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16"} <= set(cpu.flags)


def test_meminfo():
    assert parse_meminfo(fixture_text("proc-meminfo_sandbox-VM-2vCPU-24GiB_EPYC.txt")) == (24683656 * 1024, 24278484 * 1024)
    assert parse_meminfo(fixture_text("proc-meminfo_1GB-VM_2016.txt")) == (1019732 * 1024, 710280 * 1024)


def test_cgroup_v2_limit_on_own_path_under_host_namespace(tmp_path):
    (tmp_path / "memory.max").write_text("max\n")
    leaf = tmp_path / "system.slice" / "docker-abc.scope"
    leaf.mkdir(parents=True)
    (leaf / "memory.max").write_text(f"{512 * MiB}\n")
    limit, src = cgroup_memory_limit(tmp_path, "0::/system.slice/docker-abc.scope\n")
    assert limit == 512 * MiB and src.endswith("docker-abc.scope/memory.max")


def test_cgroup_v2_private_namespace_root(tmp_path):
    (tmp_path / "memory.max").write_text(f"{4 * GiB}\n")
    assert cgroup_memory_limit(tmp_path, "0::/\n")[0] == 4 * GiB


def test_cgroup_v1_unlimited_sentinel_and_missing_files(tmp_path):
    mem = tmp_path / "memory"
    mem.mkdir()
    (mem / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert cgroup_memory_limit(tmp_path, "4:memory:/\n") == (None, None)
    (mem / "memory.limit_in_bytes").write_text(f"{2 * GiB}\n")
    assert cgroup_memory_limit(tmp_path, "5:cpu,cpuacct:/\n4:memory:/\n")[0] == 2 * GiB
    assert cgroup_memory_limit(tmp_path / "none", "0::/\n") == (None, None)


def test_cpu_clock_readings(tmp_path):
    """The cores' clock for the speed model: cpufreq's maximum where the kernel has it (the highest core: a
    hybrid CPU's P-cores), lscpu's 'CPU max MHz', else cpuinfo's 'cpu MHz' (a VM's fixed nominal clock)."""
    assert parse_cpuinfo(fixture_text("proc-cpuinfo_sandbox-VM_AMD-EPYC_cpu0.txt")).max_ghz == 1.996
    assert parse_lscpu("Model name: X\nCPU max MHz:  4700.0000\nCPU min MHz: 800.0000\n").max_ghz == 4.7
    assert parse_lscpu(fixture_text("lscpu-flags_Xeon-8488C_AWS-m7i_AMX.txt")).max_ghz is None  # not in the capture
    root = tmp_path / "sys"
    for cpu, khz in (("cpu0", "4400000\n"), ("cpu1", "4400000\n"), ("cpu8", "3300000\n")):  # P, P, E core
        (root / "devices/system/cpu" / cpu / "cpufreq").mkdir(parents=True)
        (root / "devices/system/cpu" / cpu / "cpufreq/cpuinfo_max_freq").write_text(khz)
    assert cpufreq_max_ghz(root) == 4.4
    assert cpufreq_max_ghz(tmp_path / "none") is None
    (root / "devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").write_text("99999999999\n")  # no real core
    (root / "devices/system/cpu/cpu1/cpufreq/cpuinfo_max_freq").write_text("garbage\n")
    assert cpufreq_max_ghz(root) == 3.3
    assert parse_cpuinfo("processor: 0\ncpu MHz: 0.000\n").max_ghz is None


def test_instruction_set_names_and_core_classes():
    from fitprobe.probe.to_hardware import core_class, isa
    from fitprobe.probe.types import CpuReading

    assert [isa(m) for m in ("x86_64", "AMD64", "arm64", "aarch64", "riscv64", None)] == [
        "x86_64", "x86_64", "arm64", "arm64", None, None]
    mac = CpuReading(model="Apple M2 Max", arch="arm64", source="sysctl")
    graviton = CpuReading(model=None, arch="aarch64", source="procfs")
    epyc = parse_cpuinfo(fixture_text("proc-cpuinfo_sandbox-VM_AMD-EPYC_cpu0.txt"))
    epyc.arch = "x86_64"
    assert [core_class(c) for c in (mac, graviton, epyc)] == ["apple", "arm64", "x86_64"]
    # parts built only of Intel's Atom-line cores, by brand string; a hybrid CPU computes on its P-cores
    atoms = ("Intel(R) N100", "Intel(R) Core(TM) i3-N305", "Intel(R) Atom(TM) x7425E",
             "Intel(R) Celeron(R) N5105 @ 2.00GHz", "Intel(R) Pentium(R) Silver J5005 CPU @ 1.50GHz")
    cores = ("12th Gen Intel(R) Core(TM) i7-12700H", "Intel(R) Celeron(R) G6900", "Intel(R) Core(TM) Ultra 7 155H",
             "Intel(R) Xeon(R) Platinum 8488C", "AMD Ryzen 7 7840HS w/ Radeon 780M Graphics")
    assert {core_class(CpuReading(model=m, arch="x86_64", source="procfs")) for m in atoms} == {"atom"}
    assert {core_class(CpuReading(model=m, arch="x86_64", source="procfs")) for m in cores} == {"x86_64"}
    assert core_class(CpuReading(model="Intel(R) N100", arch="aarch64", source="procfs")) == "arm64"


def test_default_threads_are_llama_cpps_p_cores_on_hybrid_cpus(tmp_path):
    """llama.cpp's default -t skips a hybrid Intel CPU's E-cores and counts one thread per P-core
    (common_cpu_get_num_math), and on a Mac counts hw.perflevel0.physicalcpu: the plan's threads are those."""
    from fitprobe.probe.cpu import hybrid_performance_cores

    root = tmp_path / "sys"
    assert hybrid_performance_cores(root) is None  # no cpu_core / cpu_atom PMUs: not hybrid
    (root / "devices/cpu_core").mkdir(parents=True)
    (root / "devices/cpu_atom").mkdir(parents=True)
    (root / "devices/cpu_core/cpus").write_text("0-3\n")  # 2 P-cores with 2 threads each (an i3-1315U)
    (root / "devices/cpu_atom/cpus").write_text("4-7\n")
    for cpu, siblings in ((0, "03"), (1, "03"), (2, "0c"), (3, "0c")):
        topo = root / f"devices/system/cpu/cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "thread_siblings").write_text(siblings + "\n")
    assert hybrid_performance_cores(root) == 2
    vals = apple.parse_sysctl(fixture_text("sysctl-a-hw_M1Pro.txt"))
    assert vals["hw.perflevel0.physicalcpu"] == "8"  # what read_cpu takes on a Mac (M1 Pro: 8 P + 2 E)
    from fitprobe.probe.to_hardware import probe_hardware
    from fitprobe.probe.types import CpuReading, PlatformInfo, ProbeReport

    def threads(cpu):
        return probe_hardware(ProbeReport(platform=PlatformInfo(system="Linux"), cpu=cpu), catalog=[]).cpu_threads

    hybrid = CpuReading(model="13th Gen Intel(R) Core(TM) i3-1315U", physical_cores=6, logical_cores=8,
                        performance_cores=2, source="procfs")
    assert threads(hybrid) == 2
    assert threads(CpuReading(physical_cores=6, logical_cores=12, source="procfs")) == 6
