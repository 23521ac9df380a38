"""--verify: run llama.cpp's own fitter (`llama-fit-params`) on a local GGUF and set its per-device
projection beside fitprobe's. The tool does no-alloc dry runs (no weights in VRAM); it prints its
projection on stderr and the fitted `-c/-ngl/-ts/-ot` on stdout (tools/fit-params/fit-params.cpp,
README example). Time-limited; any failure becomes a one-line reason, never a traceback.
"""
from __future__ import annotations

import re
import shutil
import subprocess

from fitprobe.estimator.fields import doc, record, replace

DEFAULT_TIMEOUT_S = 120
MIB = 1 << 20

_TOTAL = re.compile(r"projected to use (\d+) MiB of device memory vs\. (\d+) MiB of free device memory")
_FITTED = re.compile(r"-\s+(\w+) \((.+?)\):\s+(\d+) layers(?: \((\d+) overflowing\))?,\s+(\d+) MiB used,\s+(-?\d+) MiB free")
_ARGS = re.compile(r"^-c (\d+) -ngl (-?\d+)(.*)$")


@record
class DeviceProjection:
    device: str
    name: str
    layers: int | None = None
    overflowing_layers: int = 0
    llama_mib: int = doc(description="llama-fit-params' projected use of this device")
    free_mib: int | None = None
    fitprobe_mib: int | None = doc(default=None, description="fitprobe's estimate at the same -ngl")
    difference_mib: int | None = doc(default=None, description="fitprobe minus llama.cpp")


@record
class VerifyResult:
    tool: str
    command: list[str]
    ok: bool
    error: str | None = None
    fitted_args: str | None = doc(default=None, description="the -c/-ngl/-ts/-ot line llama.cpp chose")
    context: int | None = None
    gpu_layers: int | None = None
    projected_initial_mib: int | None = doc(default=None, description="projection with the initial parameters")
    free_mib: int | None = None
    devices: list[DeviceProjection] = doc(default_factory=list)
    difference_mib: int | None = doc(default=None, description="sum over devices, fitprobe minus llama.cpp")
    notes: list[str] = doc(default_factory=list)


def find_tool(path: str | None) -> str | None:
    if path:
        return path if shutil.which(path) or _is_file(path) else None
    return shutil.which("llama-fit-params")


def _is_file(path: str) -> bool:
    import os

    return os.path.isfile(path) and os.access(path, os.X_OK)


def fit_params_command(tool: str, gguf: str, st) -> list[str]:
    """The fitter run with the plan's settings; --fit-ctx at the context asked keeps it from shrinking."""
    ctx = st.context * st.batch
    cmd = [tool, "--model", gguf, "-c", str(ctx), "-np", str(st.batch), "-fa", "on" if st.flash_attention else "off",
           "--fit-ctx", str(ctx)]
    if st.kv_cache_dtype not in ("f16", "auto"):
        cmd += ["-ctk", st.kv_cache_dtype, "-ctv", st.kv_cache_dtype]
    if st.ubatch != 512:
        cmd += ["-ub", str(st.ubatch)]
    return cmd


def parse_output(stdout: str, stderr: str) -> dict:
    """What the fitter said: initial projection, per-device fitted use, the chosen arguments."""
    text = stderr + "\n" + stdout
    out: dict = {"devices": []}
    m = _TOTAL.search(text)
    if m:
        out["projected_initial_mib"], out["free_mib"] = int(m.group(1)), int(m.group(2))
    for m in _FITTED.finditer(text):
        out["devices"].append(DeviceProjection(device=m.group(1), name=m.group(2), layers=int(m.group(3)),
                                               overflowing_layers=int(m.group(4) or 0), llama_mib=int(m.group(5)),
                                               free_mib=int(m.group(6))))
    for line in stdout.splitlines()[::-1]:
        a = _ARGS.match(line.strip())
        if a:
            out["fitted_args"], out["context"], out["gpu_layers"] = line.strip(), int(a.group(1)), int(a.group(2))
            break
    return out


def run_fit_params(tool: str, gguf: str, st, *, timeout_s: int = DEFAULT_TIMEOUT_S) -> VerifyResult:
    cmd = fit_params_command(tool, gguf, st)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return VerifyResult(tool=tool, command=cmd, ok=False, error=f"llama-fit-params did not finish in {timeout_s} s")
    except OSError as exc:
        return VerifyResult(tool=tool, command=cmd, ok=False, error=f"cannot run {tool}: {exc.strerror or exc}")
    parsed = parse_output(proc.stdout, proc.stderr)
    if proc.returncode != 0 or "fitted_args" not in parsed:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return VerifyResult(tool=tool, command=cmd, ok=False, error=f"llama-fit-params exited {proc.returncode}: {last}",
                            **{k: v for k, v in parsed.items() if k != "fitted_args"})
    return VerifyResult(tool=tool, command=cmd, ok=True, **parsed)


def compare(result: VerifyResult, inp) -> VerifyResult:
    """Size fitprobe's llama.cpp plan at the -ngl llama.cpp chose and record the per-device difference."""
    from fitprobe.estimator.launch.common import rejudge, size
    from fitprobe.estimator.launch.llama_cpp import moe_offload

    if not result.ok or result.gpu_layers is None or not inp.hw.devices:
        return result
    st = replace(inp.settings, engine="llama.cpp", gpu_layers=max(0, result.gpu_layers),
                                         context=(result.context or inp.settings.context) // inp.settings.batch)
    sized = size(inp, inp.fmt, st)
    mem = sized.mem
    overflow = sum(d.overflowing_layers for d in result.devices)
    if overflow:
        w, _ = inp.sizer.weights(inp.fmt)
        mem = moe_offload(mem, w, overflow)
        result.notes.append(f"{overflow} layers keep their experts in RAM (-ot); fitprobe moves the same number of "
                            "layers' experts")
    rejudge(inp, mem)
    diffs = []
    for dev, ours in zip(result.devices, mem.per_device):
        dev.fitprobe_mib = ours.total_bytes // MIB
        dev.difference_mib = dev.fitprobe_mib - dev.llama_mib
        diffs.append(dev.difference_mib)
    if len(result.devices) != len(mem.per_device):
        result.notes.append(f"llama.cpp saw {len(result.devices)} device(s), fitprobe sized {len(mem.per_device)}")
    result.difference_mib = sum(diffs) if diffs else None
    return result
