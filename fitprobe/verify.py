"""--verify: run llama.cpp's own fitter (`llama-fit-params`) and set its per-device projection beside fitprobe's.

The model needs no download: a local .gguf is used as it is; any other model (catalog, Hub id, config.json)
is written as a sparse GGUF (fitprobe/sparse_gguf.py: the header of the quant being planned, the data a
hole) into a temporary directory. llama-fit-params does no-alloc dry runs on the user's real devices, so it
needs only the header. Two runs: `--fit-print on` with the plan's own flags gives llama.cpp's model /
context / compute MiB per device, set beside fitprobe's component by component; the fitter proper prints
its projection on stderr and the fitted `-c/-ngl/-ts/-ot` on stdout (tools/fit-params/fit-params.cpp,
common/fit.cpp). Time-limited; any failure becomes a one-line reason, never a traceback.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile

from fitprobe.estimator.fields import doc, record, replace
from fitprobe.estimator.message import msg

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
class ComponentDifference:
    """One component on one device: llama.cpp's `--fit-print` MiB (floored) beside fitprobe's at the same flags."""

    device: str = doc(description="llama.cpp's device name (CUDA0, Metal, RPC0, ...) or Host")
    component: str = doc(description="model (weights) | context (KV cache, recurrent state, output buffer) | compute")
    llama_mib: int
    fitprobe_mib: int | None = None
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
    gguf: str | None = doc(default=None, description="the GGUF llama.cpp read: the local file, or 'sparse' when "
                                                      "written from the model description")
    projection_command: list[str] = doc(default_factory=list, description="the --fit-print run at the plan's flags")
    components: list[ComponentDifference] = doc(
        default_factory=list, description="llama.cpp's per-device projection at the plan's flags beside fitprobe's")
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
    return [tool, "--model", gguf, *settings_flags(st), "--fit-ctx", str(st.context * st.batch)]


def settings_flags(st) -> list[str]:
    """llama.cpp flags of run settings: context over all slots, slots, FA, KV type, ubatch."""
    args = ["-c", str(st.context * st.batch), "-np", str(st.batch), "-fa", "on" if st.flash_attention else "off"]
    if st.kv_cache_dtype not in ("f16", "auto"):
        args += ["-ctk", st.kv_cache_dtype, "-ctv", st.kv_cache_dtype]
    if st.ubatch != 512:
        args += ["-ub", str(st.ubatch)]
    return args


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
    from fitprobe.estimator.launch.common import size
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
        result.notes.append(msg("%(n)s layers keep their experts in RAM (-ot); fitprobe moves the same number of "
                                "layers' experts", n=overflow))
    diffs = []
    for dev, ours in zip(result.devices, mem.per_device):
        dev.fitprobe_mib = ours.total_bytes // MIB
        dev.difference_mib = dev.fitprobe_mib - dev.llama_mib
        diffs.append(dev.difference_mib)
    if len(result.devices) != len(mem.per_device):
        result.notes.append(msg("llama.cpp saw %(theirs)s device(s), fitprobe sized %(ours)s", theirs=len(result.devices),
                                ours=len(mem.per_device)))
    result.difference_mib = sum(diffs) if diffs else None
    return result


def plan_flags(inp) -> list[str]:
    """llama.cpp flags of the plan being verified: its run settings and -ngl."""
    st, n = inp.settings, inp.spec.n_layers
    ngl = (n + 1 if st.gpu_layers is None else st.gpu_layers) if inp.hw.devices else 0
    return [*settings_flags(st), "-ngl", str(ngl)]


def model_gguf(inp, directory: str) -> tuple[str, str]:
    """(path, label): the local GGUF, or a sparse one of the planned model and quant written into directory."""
    if inp.gguf_path:
        return inp.gguf_path, inp.gguf_path
    from fitprobe.estimator.quant import source_types, tensor_types
    from fitprobe.sparse_gguf import write_sparse_gguf

    fmt = inp.fmt
    if fmt.kind == "checkpoint":
        raise ValueError(f"--verify sizes llama.cpp GGUF files: {fmt.name} is a checkpoint format, "
                         "not a GGUF type (pick a GGUF --quant such as Q4_K_M, or BF16)")
    types = tensor_types(inp.spec, fmt) if fmt.kind == "gguf" else source_types(inp.spec)
    path = f"{directory}/{inp.spec.name.replace('/', '_')}-{fmt.name}.gguf"
    write_sparse_gguf(inp.spec, path, types)
    return path, "sparse"


def project(tool: str, gguf: str, inp, *, timeout_s: int) -> tuple[list[str], list[ComponentDifference], str | None]:
    """llama.cpp's per-device model/context/compute at the plan's flags beside fitprobe's; (cmd, rows, error)."""
    from fitprobe.estimator.launch.common import size
    from fitprobe.llama_tools import ToolError, fit_print

    # --no-repack: weights repacked for the CPU live in the CPU_REPACK extra buffer, which fit-print's Host
    # line leaves out (common/fit.cpp counts host buffer types only); the bytes are the same either way
    args = plan_flags(inp) + ["--no-repack"]
    cmd = [tool, "-m", gguf, "--fit-print", "on", *args]
    try:
        devices, _ = fit_print(tool, gguf, args, timeout_s=timeout_s)
    except ToolError as exc:
        return cmd, [], str(exc)
    mem = size(inp, inp.fmt, replace(inp.settings, engine="llama.cpp")).mem
    ours = [(d.weights_bytes, d.kv_cache_bytes, d.buffers_bytes) for d in mem.per_device]
    host = (mem.host_weights_bytes, mem.host_kv_cache_bytes, mem.host_buffers_bytes)
    gpus = [d for d in devices if d.device != "Host"]
    rows = []
    for i, d in enumerate(devices):
        mine = host if d.device == "Host" else (ours[gpus.index(d)] if gpus.index(d) < len(ours) else None)
        for component, llama_mib, k in (("model", d.model_mib, 0), ("context", d.context_mib, 1),
                                        ("compute", d.compute_mib, 2)):
            fp = mine[k] // MIB if mine else None
            rows.append(ComponentDifference(device=d.device, component=component, llama_mib=llama_mib, fitprobe_mib=fp,
                                            difference_mib=None if fp is None else fp - llama_mib))
    return cmd, rows, None


def verify_plan(tool: str, inp, *, timeout_s: int = DEFAULT_TIMEOUT_S) -> VerifyResult:
    """--verify for any model: the local GGUF or a sparse one, the fitter and the projection at the plan's flags."""
    from fitprobe.sparse_gguf import UnsupportedArchitecture

    with tempfile.TemporaryDirectory(prefix="fitprobe-verify-") as tmp:
        try:
            gguf, label = model_gguf(inp, tmp)
        except (UnsupportedArchitecture, ValueError, OSError) as exc:
            return VerifyResult(tool=tool, command=[], ok=False, error=f"--verify: {exc}")
        result = compare(run_fit_params(tool, gguf, inp.settings, timeout_s=timeout_s), inp)
        result.gguf = label
        result.projection_command, result.components, error = project(tool, gguf, inp, timeout_s=timeout_s)
    if error:
        result.notes.append(msg("per-component projection failed: %(error)s", error=error))
    if label == "sparse":
        result.notes.append(msg("llama.cpp read a sparse GGUF written from fitprobe's model description (tensor "
                                "names, shapes and types of this quant; no weights)"))
    return result


def render_verify(v: VerifyResult) -> list[str]:
    """The --verify section of the human report: llama.cpp's projection beside fitprobe's, per component."""
    from fitprobe.estimator.llama_rules import LLAMA_CPP_BUILD

    from fitprobe.i18n import _, ljust, rjust

    head = _("llama.cpp's own projection (llama-fit-params, %(gguf)s; rules checked on b%(build)s)") % {
        "gguf": v.gguf or "GGUF", "build": LLAMA_CPP_BUILD}
    if v.error and not v.components:
        return [head, "  " + _("failed: %(error)s") % {"error": v.error}]
    lines = [head, "  " + ljust(_("device"), 10) + ljust(_("component"), 10) + rjust(_("llama.cpp MiB"), 15)
             + rjust(_("fitprobe MiB"), 14) + rjust(_("diff"), 8)]
    for c in v.components:
        ours = "" if c.fitprobe_mib is None else str(c.fitprobe_mib)
        diff = "" if c.difference_mib is None else f"{c.difference_mib:+d}"
        lines.append(f"  {c.device:<10}{c.component:<10}{c.llama_mib:>15}{ours:>14}{diff:>8}")
    if v.fitted_args:
        lines.append("  " + _("llama.cpp's fitter chose: %(args)s") % {"args": v.fitted_args})
    elif v.error:
        lines.append("  " + _("fitter: %(error)s") % {"error": v.error})
    return lines
