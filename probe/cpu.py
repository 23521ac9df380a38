"""Host CPU and RAM: model, cores, SIMD/matrix flags, RAM total/available and the container's
cgroup memory limit (psutil reports the host's RAM, not the container's: PROBING.md §6.2)."""
from __future__ import annotations

import os
import platform
import re
from pathlib import Path

from fitprobe.estimator.message import msg

from .types import CpuReading

# Flags that change llama.cpp CPU speed (PROBING.md §6.3); ARM names from /proc/cpuinfo Features.
FLAGS_OF_INTEREST = (
    "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_fp16",
    "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "asimd", "asimddp", "sve", "sve2", "i8mm", "bf16",
)
# cgroup v1 'no limit' is LONG_MAX rounded to pages (9223372036854771712); older Docker showed 2^64-1.
_UNLIMITED = 1 << 62


def _interesting(flags: list[str]) -> list[str]:
    have = set(flags)
    return [f for f in FLAGS_OF_INTEREST if f in have]


def parse_cpuinfo(text: str) -> CpuReading:
    """/proc/cpuinfo: model name (x86) or Hardware/CPU part (ARM), flags/Features, and physical
    cores from distinct (physical id, core id) pairs."""
    model = None
    flags: list[str] = []
    mhz = 0.0
    cores: set[tuple[str, str]] = set()
    logical = 0
    phys_id = core_id = None
    for line in text.splitlines() + [""]:
        if not line.strip():
            if phys_id is not None and core_id is not None:
                cores.add((phys_id, core_id))
            phys_id = core_id = None
            continue
        key, _, value = (p.strip() for p in line.partition(":"))
        k = key.lower()
        if k == "processor" and value.isdigit():
            logical += 1
        elif k in ("model name", "hardware", "cpu model") and not model:
            model = value
        elif k in ("flags", "features") and not flags:
            flags = value.split()
        elif k == "cpu mhz":
            mhz = max(mhz, _number(value))
        elif k == "physical id":
            phys_id = value
        elif k == "core id":
            core_id = value
    reading = CpuReading(
        model=model,
        logical_cores=logical or None,
        physical_cores=len(cores) or None,
        flags=_interesting(flags),
        max_ghz=_ghz(mhz),
        source="procfs",
    )
    if model and re.fullmatch(r"(AMD EPYC|Intel Xeon Processor.*|Common KVM processor|QEMU.*)", model):
        reading.notes.append(msg("generic CPU name: a VM may also hide AVX-512/AMX flags"))
    return reading


def parse_lscpu(text: str) -> CpuReading:
    """`lscpu` text: 'Model name:', 'CPU(s):', 'Flags:'."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values.setdefault(key.strip().lower(), value.strip())
    cpus = values.get("cpu(s)", "")
    return CpuReading(
        model=values.get("model name"),
        arch=values.get("architecture"),
        logical_cores=int(cpus) if cpus.isdigit() else None,
        flags=_interesting(values.get("flags", "").split()),
        max_ghz=_ghz(_number(values.get("cpu max mhz", ""))),
        source="procfs",
    )


def _number(text: str) -> float:
    try:
        return float(text.replace(",", "."))
    except ValueError:
        return 0.0


def _ghz(mhz: float) -> float | None:
    """A clock a core can have (0.3-10 GHz) in GHz, or None: a bad or absent reading never sizes anything."""
    return round(mhz / 1e3, 3) if 300 <= mhz <= 10_000 else None


def cpufreq_max_ghz(sys_root: Path = Path("/sys")) -> float | None:
    """The highest cpuinfo_max_freq (kHz) of any core: the P-cores' turbo on a hybrid CPU. Absent in most VMs."""
    clocks = []
    for f in (sys_root / "devices/system/cpu").glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq"):
        try:
            clocks.append(_ghz(_number(f.read_text().strip()) / 1e3))
        except OSError:
            continue
    return max((c for c in clocks if c), default=None)


def parse_meminfo(text: str) -> tuple[int | None, int | None]:
    """/proc/meminfo → (MemTotal, MemAvailable) in bytes; MemAvailable absent on old kernels."""
    vals = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if m:
            vals[m.group(1)] = int(m.group(2)) * 1024
    avail = vals.get("MemAvailable")
    if avail is None and "MemFree" in vals:
        avail = vals["MemFree"] + vals.get("Buffers", 0) + vals.get("Cached", 0)
    return vals.get("MemTotal"), avail


def _limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None  # cgroup v2 'max'
    value = int(text)
    return value if value < _UNLIMITED else None


def cgroup_memory_limit(cgroup_root: Path, self_cgroup: str) -> tuple[int | None, str | None]:
    """Tightest memory limit on this process's cgroup path and its ancestors (under cgroupns=host
    the mount root is the host's, so reading only the root misses the container's limit).

    self_cgroup is /proc/self/cgroup: '0::/path' (v2) or 'N:memory:/path' (v1)."""
    best: tuple[int, str] | None = None
    for line in self_cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if controllers == "":
            base, fname = cgroup_root, "memory.max"
        elif "memory" in controllers.split(","):
            base, fname = cgroup_root / "memory", "memory.limit_in_bytes"
        else:
            continue
        rel_parts = [p for p in rel.split("/") if p]
        # Walk from the process's own cgroup up to the mount root; with a private namespace the
        # path is '/', and the root itself holds the limit.
        for depth in range(len(rel_parts), -1, -1):
            path = base.joinpath(*rel_parts[:depth], fname)
            value = _limit(path)
            if value is not None and (best is None or value < best[0]):
                best = (value, str(path))
    return (best[0], best[1]) if best else (None, None)


def hybrid_performance_cores(sys_root: Path = Path("/sys")) -> int | None:
    """P-cores of a hybrid Intel CPU (Linux lists them under the cpu_core PMU, E-cores under cpu_atom): distinct
    thread-sibling sets among the cpu_core CPUs. llama.cpp's default thread count on such a CPU is this number
    (common/common.cpp common_cpu_get_num_math: E-cores skipped, one thread per core). None: not hybrid."""
    core = sys_root / "devices/cpu_core/cpus"
    if not core.exists() or not (sys_root / "devices/cpu_atom/cpus").exists():
        return None
    try:
        cpus = _cpu_list(core.read_text().strip())
        siblings = {(sys_root / f"devices/system/cpu/cpu{c}/topology/thread_siblings").read_text().strip()
                    for c in cpus}
    except (OSError, ValueError):
        return None
    return len(siblings) or None


def _cpu_list(text: str) -> list[int]:
    """A kernel CPU list ('0-3,8,10-11') as numbers."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def read_cpu() -> CpuReading:
    """Read layer: /proc/cpuinfo on Linux, sysctl on macOS, platform elsewhere; cores from psutil."""
    system = platform.system()
    reading = None
    if system == "Linux":
        try:
            reading = parse_cpuinfo(Path("/proc/cpuinfo").read_text(errors="replace"))
        except OSError:
            reading = None
        if reading is not None:  # cpuinfo's 'cpu MHz' is the current clock: only a VM's (fixed) one stands in
            reading.max_ghz = cpufreq_max_ghz() or reading.max_ghz
            reading.performance_cores = hybrid_performance_cores()
    elif system == "Darwin":
        from .apple import parse_sysctl
        from .run import run_command

        res = run_command(["sysctl", "machdep.cpu.brand_string", "machdep.cpu.features", "machdep.cpu.leaf7_features",
                           "hw.cpufrequency_max",  # Intel Macs only: Apple silicon publishes no clock
                           "hw.perflevel0.physicalcpu"])  # the P-cores, llama.cpp's default thread count
        vals = parse_sysctl(res.stdout)
        feats = (vals.get("machdep.cpu.features", "") + " " + vals.get("machdep.cpu.leaf7_features", "")).lower()
        reading = CpuReading(
            model=vals.get("machdep.cpu.brand_string"),
            flags=_interesting(feats.replace(".", "_").split()),
            max_ghz=_ghz(_number(vals.get("hw.cpufrequency_max", "")) / 1e6),
            performance_cores=int(_number(vals.get("hw.perflevel0.physicalcpu", ""))) or None,
            source="sysctl",
        )
    if reading is None:
        reading = CpuReading(model=platform.processor() or None, source="platform")
    reading.arch = reading.arch or platform.machine() or None
    try:
        import psutil  # noqa: PLC0415

        reading.logical_cores = psutil.cpu_count() or reading.logical_cores
        reading.physical_cores = psutil.cpu_count(logical=False) or reading.physical_cores
        if reading.max_ghz is None and system not in ("Linux", "Darwin"):  # Windows: the processor's rated clock
            freq = psutil.cpu_freq()
            reading.max_ghz = _ghz(freq.max) if freq else None
    except Exception:  # noqa: BLE001
        pass
    if hasattr(os, "sched_getaffinity"):
        usable = len(os.sched_getaffinity(0))
        if reading.logical_cores and usable < reading.logical_cores:
            reading.notes.append(msg("process may use %(usable)s of %(cores)s logical CPUs (affinity)", usable=str(usable),
                                      cores=str(reading.logical_cores)))
    return reading


def host_ram(sys_root: Path = Path("/sys"), proc_root: Path = Path("/proc")) -> tuple[int | None, int | None]:
    """(total, available) RAM this process may use: read_ram capped by its cgroup memory limit."""
    total, available, _ = read_ram()
    try:
        limit, _ = cgroup_memory_limit(sys_root / "fs" / "cgroup", (proc_root / "self" / "cgroup").read_text())
    except OSError:
        limit = None
    if limit:
        total = min(total, limit) if total else limit
        available = min(available, limit) if available is not None else None
    return total, available


def read_ram() -> tuple[int | None, int | None, str | None]:
    """(total, available, source): psutil, else /proc/meminfo."""
    try:
        import psutil  # noqa: PLC0415

        vm = psutil.virtual_memory()
        return int(vm.total), int(vm.available), "psutil"
    except Exception:  # noqa: BLE001
        pass
    try:
        total, avail = parse_meminfo(Path("/proc/meminfo").read_text())
        return total, avail, "procfs"
    except OSError:
        return None, None, None
