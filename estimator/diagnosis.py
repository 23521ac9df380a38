"""The seed pages' "engineering diagnosis" as generated text, every number from the sizing core."""
from __future__ import annotations

from fitprobe.estimator.fields import doc, record, replace

from .message import Num, join, msg
from .plan import PlanResult, Sizer
from .quant import QuantFormat
from .settings import RunSettings

GIB = 1 << 30


@record
class Diagnosis:
    verdict: str = doc(description="what blocks the fit, or what headroom is left")
    kv: str = doc(description="KV cost from 8K to 32K and what a quantized KV cache saves")
    kv_8k_bytes: int
    kv_32k_bytes: int
    kv_alt_dtype: str | None = None
    kv_alt_32k_bytes: int | None = None
    kv_saving_32k_bytes: int | None = None
    tips: list[str] = doc(default_factory=list)


def _g(n: float) -> Num:
    return Num(n / GIB, ".2f", "GiB")


def alt_kv_dtype(st: RunSettings) -> str | None:
    """The 8-bit cache the engine offers: FP8 in vLLM/SGLang, Q8_0 in llama.cpp/Ollama/MLX."""
    if st.kv_cache_dtype in ("fp8", "q8_0", "q4_0"):
        return None
    return "fp8" if st.engine in ("vllm", "sglang") else "q8_0"


def diagnose(sizer: Sizer, fmt: QuantFormat, st: RunSettings, result: PlanResult, *, model: str, hardware: str,
             decode_tps: float | None = None, multi_gpu: str | None = None) -> Diagnosis:
    v, m = result.verdict, result.memory
    total = m.total_bytes + m.host_total_bytes
    tips: list[str] = []
    where = msg("system RAM") if v.limiting == "system RAM" else v.limiting
    if v.status == "exceeds":
        text = msg("%(hardware)s cannot hold %(model)s at %(quant)s with %(context)s tokens of context: %(where)s needs "
                   "%(required)s but only %(usable)s is usable (%(short)s short).", hardware=hardware, model=model,
                   quant=fmt.name, context=Num(st.context, ","), where=where, required=_g(v.required_bytes),
                   usable=_g(v.usable_bytes), short=_g(-v.margin_bytes))
        fitting = [r for r in result.matrix if r.status != "exceeds"]
        if fitting:
            best = max(fitting, key=lambda r: r.weights_bytes)
            tips.append(msg("the largest format that fits is %(quant)s (%(size)s in all)", quant=best.quant,
                            size=_g(best.total_bytes)))
        ctx_ok = [r.context for r in result.scaling if r.status != "exceeds"]
        if ctx_ok:
            tips.append(msg("at %(quant)s the context fits up to %(tokens)s tokens", quant=fmt.name,
                            tokens=Num(max(ctx_ok), ",")))
        if multi_gpu:
            tips.append(msg("or split it: %(gpus)s", gpus=multi_gpu))
        if st.engine in ("llama.cpp", "ollama"):
            tips.append(msg("or offload layers to system RAM with -ngl (decode then runs at RAM speed)"))
    else:
        args = dict(hardware=hardware, model=model, quant=fmt.name, total=_g(total), context=Num(st.context, ","),
                    margin=_g(v.margin_bytes), where=where)
        if v.status == "fits":
            text = (msg("%(hardware)s runs %(model)s at %(quant)s: %(total)s at %(context)s tokens of context, "
                        "%(margin)s free on %(where)s (~%(tps)s tok/s).", tps=Num(decode_tps, ".1f"), **args)
                    if decode_tps else
                    msg("%(hardware)s runs %(model)s at %(quant)s: %(total)s at %(context)s tokens of context, "
                        "%(margin)s free on %(where)s.", **args))
        else:
            text = (msg("%(hardware)s may run (inside the error band) %(model)s at %(quant)s: %(total)s at "
                        "%(context)s tokens of context, %(margin)s free on %(where)s (~%(tps)s tok/s).",
                        tps=Num(decode_tps, ".1f"), **args) if decode_tps else
                    msg("%(hardware)s may run (inside the error band) %(model)s at %(quant)s: %(total)s at "
                        "%(context)s tokens of context, %(margin)s free on %(where)s.", **args))
    kv8 = sizer.size(fmt, replace(st, context=8192))[0]
    kv32 = sizer.size(fmt, replace(st, context=32768))[0]
    k8 = kv8.kv_cache_bytes + kv8.host_kv_cache_bytes
    k32 = kv32.kv_cache_bytes + kv32.host_kv_cache_bytes
    kv_parts = [msg("From 8K to 32K tokens the %(kv)s KV cache grows from %(k8)s to %(k32)s (total %(total)s at 32K).",
                    kv=st.kv_cache_dtype, k8=_g(k8), k32=_g(k32), total=_g(kv32.total_bytes + kv32.host_total_bytes))]
    alt = alt_kv_dtype(st)
    alt32 = saving = None
    if alt:
        a = sizer.size(fmt, replace(st, context=32768, kv_cache_dtype=alt,
                                                  flash_attention=True))[0]
        alt32 = a.kv_cache_bytes + a.host_kv_cache_bytes
        saving = k32 - alt32
        kv_parts.append(msg("A %(kv)s KV cache saves %(saving)s at 32K (total %(total)s).", kv=alt.upper(),
                            saving=_g(saving), total=_g(a.total_bytes + a.host_total_bytes)))
    else:
        kv_parts.append(msg("The cache is already %(kv)s.", kv=st.kv_cache_dtype))
    if m.kv.recurrent and not m.kv.full:
        kv_parts.append(msg("Recurrent layers keep a fixed-size state that does not grow with context."))
    return Diagnosis(verdict=text, kv=join(kv_parts, " "), kv_8k_bytes=k8, kv_32k_bytes=k32, kv_alt_dtype=alt,
                     kv_alt_32k_bytes=alt32, kv_saving_32k_bytes=saving, tips=tips)
