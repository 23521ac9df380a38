"""Run llama.cpp's own tools (llama-quantize, llama-fit-params) with deadlines and read what they print.

The lines parsed here are llama.cpp's log formats at the pinned build (LLAMA_CPP_BUILD):
src/llama-quant.cpp (dry-run tensor lines, `quant size`), src/llama-kv-cache.cpp (`llama_kv_cache: size`),
src/llama-memory-recurrent.cpp (`llama_memory_recurrent: size`), src/llama-model.cpp (`model buffer size`),
src/llama-context.cpp (`compute buffer size`, `output buffer size`) and common/fit.cpp `common_fit_print`
(`--fit-print on`: device, model, context, compute in MiB). Any failure is a one-line ToolError.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

from fitprobe.estimator.llama_rules import LLAMA_CPP_BUILD

MIB = 1 << 20
TOOLS = ("llama-quantize", "llama-fit-params", "llama-server", "ggml-rpc-server")


class ToolError(RuntimeError):
    """A llama.cpp tool could not run, timed out or failed; the message is one line."""


def cache_bin_dir(build: int = LLAMA_CPP_BUILD) -> Path:
    """Where scripts/build_llama_cpp.sh puts the pinned build (same default and override)."""
    root = os.environ.get("FITPROBE_LLAMA_CPP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "fitprobe")
    return Path(root) / f"llama.cpp-b{build}" / "bin"


def find_bin_dir() -> Path | None:
    """FITPROBE_LLAMA_CPP_BIN if set, else the pinned build's cache, else None."""
    explicit = os.environ.get("FITPROBE_LLAMA_CPP_BIN")
    if explicit:
        return Path(explicit)
    cached = cache_bin_dir()
    return cached if all((cached / t).is_file() for t in TOOLS) else None


def run(cmd: list[str], *, timeout_s: float, done=None, attempts: int = 3) -> tuple[str, str]:
    """(stdout, stderr) of a successful run; ToolError naming the tool and its last error line otherwise.
    `done(stdout, stderr)` says the tool printed everything asked for, so an abort after that still counts
    and a clean exit short of it is run again, `attempts` times in all: llama.cpp's tools log through
    common/log.cpp's worker thread, which nothing joins at exit (common_log_main leaks the logger on
    purpose), so on a busy machine a run's last log lines can be lost."""
    tool = Path(cmd[0]).name
    if not (shutil.which(cmd[0]) or os.access(cmd[0], os.X_OK)):
        raise ToolError(f"{tool} is not an executable: {cmd[0]}")
    for _ in range(attempts):
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ToolError(f"{tool} did not finish in {timeout_s:g} s") from None
        except OSError as exc:
            raise ToolError(f"cannot run {tool}: {exc.strerror or exc}") from None
        complete = done is None or done(proc.stdout, proc.stderr)
        if proc.returncode != 0 and not complete:
            lines = [x for x in proc.stderr.splitlines() if x.strip()] or ["no output"]
            last = next((x for x in reversed(lines) if "error" in x.lower() or "exception" in x.lower()), lines[-1])
            raise ToolError(f"{tool} exited {proc.returncode}: {last.strip()}")
        if complete:
            return proc.stdout, proc.stderr
    raise ToolError(f"{tool} exited 0 without printing what was asked, {attempts} times")


class QuantizedTensor(NamedTuple):
    name: str
    shape: tuple[int, ...]  # ggml order, trailing 1s dropped
    source_type: str
    type: str  # upper-case ggml type name, as fitprobe spells it


# "[   1/ 291]                    token_embd.weight - [ 4096, 128256,     1,     1], type =    f16,
#  size =   1002.00 MiB ->   281.81 MiB (q4_K)"   or   "... type =    f32, size =    0.016 MiB"
_QUANT_LINE = re.compile(r"\[\s*\d+/\s*\d+\]\s+(\S+)\s+-\s+\[([\d,\s]+)\], type =\s+(\w+), "
                         r"size =\s+[\d.]+ MiB(?: ->\s+[\d.]+ MiB \((\w+)\))?")
_QUANT_SIZE = re.compile(r"quant size\s+=\s+([\d.]+) MiB")


def parse_quantize(text: str) -> tuple[list[QuantizedTensor], float | None]:
    """Every tensor's new type from `llama-quantize --dry-run`, and the printed quant size in MiB."""
    tensors = []
    for m in _QUANT_LINE.finditer(text):
        dims = [int(x) for x in m.group(2).split(",")]
        while len(dims) > 1 and dims[-1] == 1:
            dims.pop()
        tensors.append(QuantizedTensor(m.group(1), tuple(dims), m.group(3).upper(), (m.group(4) or m.group(3)).upper()))
    size = _QUANT_SIZE.search(text)
    return tensors, float(size.group(1)) if size else None


def quantize_dry_run(quantize: str, gguf: str | os.PathLike, ftype: str, *, imatrix: str | None = None,
                     timeout_s: float = 120) -> tuple[list[QuantizedTensor], float | None]:
    cmd = [quantize, "--dry-run"] + (["--imatrix", imatrix] if imatrix else []) + [str(gguf), ftype]
    out, err = run(cmd, timeout_s=timeout_s)
    return parse_quantize(out + "\n" + err)


class KvLine(NamedTuple):
    """One `llama_kv_cache: size = ...` line (an iSWA model prints one per cache)."""

    mib: float
    cells: int
    layers: int
    k_type: str
    k_mib: float
    v_type: str
    v_mib: float


class RecurrentLine(NamedTuple):
    mib: float
    cells: int
    layers: int
    r_mib: float
    s_mib: float


class MemoryLog(NamedTuple):
    kv: list[KvLine]
    recurrent: list[RecurrentLine]
    model: dict[str, float]  # buffer name (CPU_Mapped, CUDA0, ...) -> MiB
    compute: dict[str, float]
    output: dict[str, float]


_KV = re.compile(r"llama_kv_cache: size =\s+([\d.]+) MiB \(\s*(\d+) cells,\s+(\d+) layers,.*?\), "
                 r"K \((\w+)\):\s+([\d.]+) MiB, V \((\w+)\):\s+([\d.]+) MiB")
_RS = re.compile(r"llama_memory_recurrent: size =\s+([\d.]+) MiB \(\s*(\d+) cells,\s+(\d+) layers,.*?\), "
                 r"R \(\w+\):\s+([\d.]+) MiB, S \(\w+\):\s+([\d.]+) MiB")
_BUF = re.compile(r"(\S+) (model|compute|output) buffer size =\s+([\d.]+) MiB")


def parse_memory(text: str) -> MemoryLog:
    log = MemoryLog([], [], {}, {}, {})
    for m in _KV.finditer(text):
        log.kv.append(KvLine(float(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4).upper(),
                             float(m.group(5)), m.group(6).upper(), float(m.group(7))))
    for m in _RS.finditer(text):
        log.recurrent.append(RecurrentLine(float(m.group(1)), int(m.group(2)), int(m.group(3)),
                                           float(m.group(4)), float(m.group(5))))
    for m in _BUF.finditer(text):
        getattr(log, m.group(2))[m.group(1)] = float(m.group(3))
    return log


def printed_mib_matches(nbytes: int, printed: float) -> bool:
    """Whether a byte count prints as `printed` under llama.cpp's %.2f MiB (computed in float32 for the
    KV lines, so allow its rounding at large sizes too)."""
    mib = nbytes / MIB
    return abs(mib - printed) <= 0.005 + mib * 2.0 ** -23 + 1e-9


class DeviceMemory(NamedTuple):
    """One line of `llama-fit-params --fit-print on`: MiB (floored) per component on a device or the host."""

    device: str
    model_mib: int
    context_mib: int
    compute_mib: int


_FIT_PRINT = re.compile(r"^(\S+) (\d+) (\d+) (\d+) ?$", re.M)


def parse_fit_print(stdout: str) -> list[DeviceMemory]:
    return [DeviceMemory(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))
            for m in _FIT_PRINT.finditer(stdout)]


def summary_printed(stdout: str, stderr: str) -> bool:
    """The --fit-print summary ends with the Host line."""
    return re.search(r"^Host \d+ \d+ \d+", stdout, re.M) is not None


def memory_printed(stdout: str, stderr: str) -> bool:
    """The dry-run context's KV and recurrent-state lines were all printed: llama_context logs
    `enumerating backends` right after creating its memory (src/llama-context.cpp)."""
    return "llama_context: enumerating backends" in stderr or "llama_context: enumerating backends" in stdout


def fit_print(fit_params: str, gguf: str | os.PathLike, args: list[str], *, timeout_s: float = 120,
              done=summary_printed) -> tuple[list[DeviceMemory], MemoryLog]:
    """llama.cpp's own projection for `args` (no weights loaded, nothing allocated): the per-device
    summary and, with -v, the KV / recurrent / buffer lines of the dry-run context. b11434 can abort
    after printing what was asked (a full ggml hash set in graph_reserve: Phi-3 at -c 3000 -np 3 -ctk
    q8_0) and its -v lines can be cut short at exit, so `done` decides whether the output is complete
    (memory_printed for the KV lines)."""
    out, err = run([fit_params, "-m", str(gguf), "--fit-print", "on", "-v", *args], timeout_s=timeout_s, done=done)
    return parse_fit_print(out), parse_memory(out + "\n" + err)
