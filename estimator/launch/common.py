"""Shared pieces of the launch planners: the plan model, the fit test and the searches.

Every planner is a pure function of a `LaunchInput` (spec, requested settings, hardware, the
Sizer that holds the memory model, and what is known about where the weights live) and returns
a `LaunchPlan` whose flag values were chosen by sizing candidates with `Sizer.size`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable

from fitprobe.estimator.fields import doc, record, replace

from .. import message
from ..hardware import Hardware
from ..memory import MemoryBreakdown
from ..message import Num, msg
from ..plan import Sizer
from ..quant import QuantFormat, QuantTable
from ..settings import RunSettings
from ..spec import ModelSpec
from ..speed import Speed
from ..verdict import Status, Verdict, band_bytes, band_for, judge
from .refs import ModelRefs

GIB, MIB = 1 << 30, 1 << 20
# A multi-node split is assumed at 8 accelerators per node (the largest NVLink/HGX board).
GPUS_PER_NODE = 8
# llama.cpp --fit never shrinks the context below --fit-ctx (default 4096, FORMULAS §2.4);
# the planners use the same floor before turning to slower levers (CPU offload).
MIN_USEFUL_CONTEXT = 4096


@record
class Flag:
    flag: str = doc(description="the option or environment variable exactly as typed")
    value: str | None = doc(default=None, description="its value; None for a switch")
    reason: str = doc(description="why the planner set it")


@record
class LaunchPlan:
    """One engine's command, each flag justified, and whether that configuration fits."""

    engine: str
    command: str = doc(description="pasteable command (setup commands first, one per line)")
    setup: list[str] = doc(default_factory=list, description="commands to run before (ray start, rpc-server, sysctl)")
    flags: list[Flag] = doc(default_factory=list)
    env: dict[str, str] = doc(default_factory=dict, description="environment variables the command sets")
    fits: bool
    status: Status = doc(description="fits | tight | exceeds for this configuration")
    margin_bytes: int
    total_bytes: int = doc(description="memory this plan needs on the accelerators")
    host_bytes: int = doc(description="memory this plan needs in system RAM")
    context: int = doc(description="tokens per sequence this plan serves")
    quant: str
    kv_cache_dtype: str
    gpu_layers: int | None = None
    cpu_moe_layers: int = 0
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    nodes: int = 1
    tensor_split: list[int] | None = doc(default=None, description="layers per device (llama.cpp --tensor-split)")
    max_context: int | None = doc(default=None, description="the longest context (tokens per sequence) this "
                                                            "configuration fits, up to the model's maximum")
    speed: Speed | None = doc(default=None, description="this command's own decode/prefill estimate")
    notes: list[str] = doc(default_factory=list)


@dataclass
class LaunchInput:
    """What every planner reads. `sizer` sizes any (format, settings) on `hw`; `calibration` is the
    speed fit (catalogs.speed_calibration) the edge loaded: planners compare speeds, the core reads no file."""

    spec: ModelSpec
    fmt: QuantFormat
    settings: RunSettings
    hw: Hardware
    sizer: Sizer
    table: QuantTable
    calibration: object
    hf_id: str | None = None
    gguf_repo: str | None = None
    gguf_path: str | None = None
    ollama_name: str | None = None
    model_path: str | None = None  # a local checkpoint directory: commands keep its path
    refs: ModelRefs = field(default_factory=ModelRefs)
    kv_explicit: bool = False  # the user chose the KV type: planners keep it
    longest_context: bool = False  # --ctx max: the longest context that fits, instead of the one asked
    with_max_context: bool = True  # every plan states its longest context (a ranking that never reads it skips it)
    gpus_per_node: int = GPUS_PER_NODE
    now: bool = False

    @property
    def model_ref(self) -> str:
        return self.model_path or self.hf_id or self.spec.name


@dataclass
class Sized:
    mem: MemoryBreakdown
    verdict: Verdict

    @property
    def ok(self) -> bool:
        return self.verdict.status != "exceeds"


def size(inp: LaunchInput, fmt: QuantFormat, st: RunSettings, hw: Hardware | None = None) -> Sized:
    """Size one candidate; another hardware set gets its own Sizer (same weights cache rules)."""
    if hw is None or hw is inp.hw:
        mem, verdict, _ = inp.sizer.size(fmt, st, now=inp.now)
    else:
        other = Sizer(inp.spec, inp.table, hw, error_band=inp.sizer.error_band,
                      min_margin_bytes=inp.sizer.min_margin, known_weights=inp.sizer.known)
        other._weights = inp.sizer._weights  # weights do not depend on the hardware: share the cache
        mem, verdict, _ = other.size(fmt, st, now=inp.now)
    return Sized(mem, verdict)


def device_fits(sized: Sized, band: float | None = None) -> bool:
    """Every device within its usable memory (the host side is judged separately): the test that is
    monotone in how much is offloaded, unlike the whole verdict, which RAM can also fail. With the
    error `band`, each device must also keep its own error band free (a 'fits', not a 'tight')."""
    for d in sized.mem.per_device:
        spare = d.usable_bytes - d.total_bytes
        if spare < 0 or band is not None and spare < band_bytes(band, d.total_bytes, d.weights_bytes,
                                                               d.kv_cache_bytes, d.buffers_bytes):
            return False
    return True


def rejudge(inp: LaunchInput, mem: MemoryBreakdown, hw: Hardware | None = None, *, engine: str,
            fmt: QuantFormat | None = None) -> Verdict:
    """Judge adjusted memory again; with `fmt`, in that format's band (an approximate one is wider)."""
    band = inp.sizer.band(fmt, engine) if fmt is not None else band_for(inp.sizer.error_band, engine)
    return judge(mem, hw or inp.hw, error_band=band, min_margin_bytes=inp.sizer.min_margin)


def largest_fitting(lo: int, hi: int, fits: Callable[[int], bool], step: int = 1) -> int | None:
    """Largest multiple of `step` in [lo, hi] for which the monotone test holds (binary search)."""
    a, b = math.ceil(lo / step), hi // step
    if b < a or not fits(a * step):
        return None
    while a < b:
        mid = (a + b + 1) // 2
        if fits(mid * step):
            a = mid
        else:
            b = mid - 1
    return a * step


def smallest_fitting(lo: int, hi: int, fits: Callable[[int], bool]) -> int | None:
    if hi < lo or not fits(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def model_max_context(spec: ModelSpec) -> int | None:
    """The longest context the checkpoint declares (max_position_embeddings); None when unknown
    (the config parser stores 1 when the key is missing)."""
    return spec.max_context if spec.max_context and spec.max_context > 1 else None


def longest_context(inp: LaunchInput, fmt: QuantFormat, st: RunSettings, *, step: int,
                    hw: Hardware | None = None) -> int:
    """The longest context (the model's maximum, else a multiple of `step`) at which this placement
    still fits: every plan states it, and `--ctx max` serves it."""
    limit = max(model_max_context(inp.spec) or 1 << 20, st.context)

    def fits(c: int) -> bool:
        return size(inp, fmt, replace(st, context=c), hw).ok

    if fits(limit):
        return limit
    return largest_fitting(st.context, limit, fits, step=step) or st.context


YARN_ENGINES = ("llama.cpp", "vllm", "sglang")  # the engines whose command line can switch YaRN on


def cap_context(inp: LaunchInput, st: RunSettings, engine: str) -> tuple[RunSettings, str | None]:
    """Settings with the context cut to the model's maximum, and the reason, when more was asked.

    vLLM and SGLang refuse a --max-model-len / --context-length above the derived maximum
    (vllm/config ModelConfig: "User-specified max_model_len ... is greater than the derived
    max_model_len"); llama.cpp runs past n_ctx_train but warns that the model was not trained for it.
    A YaRN scaling the model documents (spec.yarn) extends the maximum for the engines that can
    switch it on from the command line (`rope_flags`).
    """
    limit = model_max_context(inp.spec)
    yarn = inp.spec.yarn
    if yarn is not None and engine in YARN_ENGINES:
        limit = max(limit or 0, yarn.max_context)
    if limit is None or st.context <= limit:
        return st, None
    why = {"vllm": msg("vLLM refuses a longer --max-model-len"),
           "sglang": msg("SGLang refuses a longer --context-length"),
           "llama.cpp": msg("llama.cpp would run past the trained context (its own warning) and quality breaks down"),
           "ollama": msg("Ollama's runner would run past the trained context and quality breaks down"),
           }.get(engine) or msg("past it the model was not trained")
    what = msg("with YaRN, the longest the model documents") if yarn is not None and engine in YARN_ENGINES else \
        msg("the model's maximum context (max_position_embeddings)")
    if yarn is not None and engine not in YARN_ENGINES:
        why = message.join([why, msg("%(engine)s has no command-line switch for the YaRN the model documents "
                                     "(llama.cpp, vLLM, SGLang do)", engine=engine)])
    return (replace(st, context=limit), msg("capped at %(limit)s tokens, %(what)s; %(asked)s was asked and %(why)s",
                                            limit=Num(limit, ","), what=what, asked=Num(st.context, ","), why=why))


def rope_flags(inp: LaunchInput, st: RunSettings, engine: str) -> tuple[list[Flag], dict[str, str]]:
    """The flags that switch on the model's documented YaRN, when the context goes past the trained
    window: llama.cpp common/arg.cpp (--rope-scaling yarn, --rope-scale, --yarn-orig-ctx); vLLM
    --hf-overrides of rope_scaling (its derived max_model_len is then original x factor,
    vllm/config _get_and_verify_max_len); SGLang --json-model-override-args, the same override."""
    yarn, native = inp.spec.yarn, model_max_context(inp.spec)
    if yarn is None or engine not in YARN_ENGINES or native is None or st.context <= native:
        return [], {}
    why = msg("%(context)s is past the trained %(native)s: YaRN x%(factor)s over the original %(original)s "
              "(%(source)s); static YaRN slightly lowers quality on short prompts", context=ctx_text(st.context),
              native=ctx_text(native), factor=Num(yarn.factor, "g"), original=ctx_text(yarn.original_context),
              source=yarn.source)
    scaling = {"rope_type": "yarn", "factor": yarn.factor, "original_max_position_embeddings": yarn.original_context}
    if engine == "llama.cpp":
        return [Flag(flag="--rope-scaling", value="yarn", reason=why),
                Flag(flag="--rope-scale", value=f"{yarn.factor:g}", reason=msg("the YaRN factor")),
                Flag(flag="--yarn-orig-ctx", value=str(yarn.original_context),
                     reason=msg("the trained window YaRN scales"))], {}
    import json

    override = json.dumps({"rope_scaling": scaling}, separators=(",", ":"))
    if engine == "vllm":
        return [Flag(flag="--hf-overrides", value=override, reason=why)], {}
    return ([Flag(flag="--json-model-override-args", value=override, reason=why)],
            {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"})


def unified(hw: Hardware) -> bool:
    """One memory pool (Apple silicon): moving layers or experts to the CPU frees nothing."""
    return bool(hw.devices) and all(d.unified_memory for d in hw.devices)


def can_offload(inp: LaunchInput) -> bool:
    """CPU offload is planned only on GPUs with their own memory and a known system RAM: an unknown
    RAM cannot be judged, so no plan leans on it."""
    return bool(inp.hw.devices) and not unified(inp.hw) and bool(inp.hw.system_ram_bytes)


def gib(n: float) -> Num:
    """'12.3 GiB' in an f-string; a number an edge can show in the reader's locale in a msg()."""
    return message.gib(n, 1)


def ctx_text(n: int) -> str | Num:
    return f"{n // 1024}K" if n % 1024 == 0 else Num(n, ",")


def shell_join(parts: list[str]) -> str:
    import shlex

    return " ".join(p if p.startswith("$") else shlex.quote(p) for p in parts)


def render(prefix: list[str], flags: list[Flag], env: dict[str, str] | None = None) -> str:
    """The command line: env assignments, program, then each flag with its value."""
    parts: list[str] = []
    for k, v in (env or {}).items():
        parts.append(f"{k}={v}")
    parts += prefix
    for f in flags:
        if f.flag.startswith("OLLAMA_") or f.flag == "num_ctx":
            continue  # environment / Modelfile entries, not argv
        parts.append(f.flag)
        if f.value is not None:
            parts.append(f.value)
    return shell_join(parts)


def plan_from(engine: str, inp: LaunchInput, sized: Sized, st: RunSettings, fmt: QuantFormat, *,
              command: str, flags: list[Flag], setup: list[str] | None = None, env: dict | None = None,
              notes: list[str] | None = None, **extra) -> LaunchPlan:
    m, v = sized.mem, sized.verdict
    full = "\n".join([*(setup or []), command])
    plan = LaunchPlan(engine=engine, command=full, setup=setup or [], flags=flags, env=env or {},
                      fits=v.status != "exceeds", status=v.status, margin_bytes=v.margin_bytes,
                      total_bytes=m.total_bytes, host_bytes=m.host_total_bytes, context=st.context,
                      quant=fmt.name, kv_cache_dtype=st.kv_cache_dtype, notes=[*(notes or []), *m.notes], **extra)
    # What the plan was judged on, for the deployment summary and its speed (not part of the contract).
    plan.sized, plan.settings = sized, st
    return plan


def engine_format(engine: str, inp: LaunchInput) -> tuple[QuantFormat, str | None]:
    """The format an engine loads for this request, and a note when it is not the one asked.

    GGUF engines (llama.cpp, Ollama) read GGUF: a checkpoint format maps to the GGUF quant of the
    same width. vLLM / SGLang read checkpoints: a GGUF quant maps to the checkpoint's own format.
    """
    fmt, table = inp.fmt, inp.table
    if engine in ("llama.cpp", "ollama") and fmt.kind in ("checkpoint", "mlx"):
        name = "Q8_0" if (fmt.bits or 16) >= 8 else "Q6_K" if (fmt.bits or 16) >= 6 else "Q4_K_M"
        other = table.find(name)
        return other, msg("%(engine)s does not load %(quant)s weights: sized at the GGUF %(name)s of the same width",
                          engine=engine, quant=fmt.name, name=name)
    if engine == "mlx" and fmt.kind != "mlx" and fmt.kind != "native" and inp.spec.prequant is None:
        bits = min((b for b in (3, 4, 6, 8) if b >= _nominal_bits(fmt.name)), default=8)
        mlx = table.find(f"MLX-{bits}bit")
        if mlx is not None:
            return mlx, msg("MLX quantizes its own way: sized at %(name)s, the nearest MLX width to %(quant)s",
                            name=mlx.name, quant=fmt.name)
    if engine in ("vllm", "sglang") and fmt.kind in ("gguf", "mlx"):
        native = native_checkpoint_format(inp)
        if native.name == "BF16" and fmt.name not in ("BF16", "F16"):
            # same width class: 6-8-bit GGUF -> FP8 (quantized on load), 4-5-bit and below -> AWQ int4
            wide = any(t in fmt.name.upper() for t in ("Q8", "Q6", "Q5"))
            native = table.find("FP8" if wide else "AWQ") or native
        return native, msg("%(engine)s serves checkpoints, not GGUF: sized at %(name)s, the nearest width to %(quant)s",
                           engine=engine, name=native.name, quant=fmt.name)
    return fmt, None


def _nominal_bits(name: str) -> int:
    """The width a quant name states (Q4_K_M -> 4, IQ2_XXS -> 2, FP8 -> 8, NVFP4/AWQ -> 4)."""
    upper = name.upper()
    if upper == "FP8":
        return 8
    m = re.search(r"(\d+)", upper.replace("FP4", "Q4"))
    return int(m.group(1)) if m and upper not in ("AWQ", "GPTQ", "NF4") else 4


def native_checkpoint_format(inp: LaunchInput) -> QuantFormat:
    q = inp.spec.prequant
    name = "BF16"
    if q is not None:
        name = {"fp8": "FP8", "awq": "AWQ", "gptq": "GPTQ", "mxfp4": "MXFP4", "bitsandbytes": "NF4"}.get(q.method, name)
        if q.method == "compressed-tensors":
            name = "FP8" if q.bits == 8 else "GPTQ"
        if q.method == "modelopt":
            name = "NVFP4" if q.fmt and "fp4" in q.fmt.lower() else "FP8"
    return inp.table.find(name) or inp.table.find("BF16")


def kv_ladder(engine: str) -> list[str]:
    """Cache types to try when KV pressure decides fit, least lossy first."""
    return {"llama.cpp": ["q8_0"], "ollama": ["q8_0"], "vllm": ["fp8"], "sglang": ["fp8"]}.get(engine, [])
