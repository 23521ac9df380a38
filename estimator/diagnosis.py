"""The seed pages' "engineering diagnosis" as generated text, every number from the sizing core."""
from __future__ import annotations

from fitprobe.estimator.fields import doc, record, replace

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


def _g(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def alt_kv_dtype(st: RunSettings) -> str | None:
    """The 8-bit cache the engine offers: FP8 in vLLM/SGLang, Q8_0 in llama.cpp/Ollama/MLX."""
    if st.kv_cache_dtype in ("fp8", "q8_0", "q4_0"):
        return None
    return "fp8" if st.engine in ("vllm", "sglang") else "q8_0"


def diagnose(sizer: Sizer, fmt: QuantFormat, st: RunSettings, result: PlanResult, *, model: str, hardware: str,
             decode_tps: float | None = None, multi_gpu: str | None = None) -> Diagnosis:
    v, m = result.verdict, result.memory
    total = m.total_bytes + m.host_total_bytes
    speed = f" (~{decode_tps:.1f} tok/s)" if decode_tps else ""
    tips: list[str] = []
    if v.status == "exceeds":
        text = (f"{hardware} cannot hold {model} at {fmt.name} with {st.context:,} tokens of context: {v.limiting} needs "
                f"{_g(v.required_bytes)} but only {_g(v.usable_bytes)} is usable ({_g(-v.margin_bytes)} short).")
        fitting = [r for r in result.matrix if r.status != "exceeds"]
        if fitting:
            best = max(fitting, key=lambda r: r.weights_bytes)
            tips.append(f"the largest format that fits is {best.quant} ({_g(best.total_bytes)} in all)")
        ctx_ok = [r.context for r in result.scaling if r.status != "exceeds"]
        if ctx_ok:
            tips.append(f"at {fmt.name} the context fits up to {max(ctx_ok):,} tokens")
        if multi_gpu:
            tips.append(f"or split it: {multi_gpu}")
        if st.engine in ("llama.cpp", "ollama"):
            tips.append("or offload layers to system RAM with -ngl (decode then runs at RAM speed)")
    else:
        word = "runs" if v.status == "fits" else "may run (inside the error band)"
        text = (f"{hardware} {word} {model} at {fmt.name}: {_g(total)} at {st.context:,} tokens of context, "
                f"{_g(v.margin_bytes)} free on {v.limiting}{speed}.")
    kv8 = sizer.size(fmt, replace(st, context=8192))[0]
    kv32 = sizer.size(fmt, replace(st, context=32768))[0]
    k8 = kv8.kv_cache_bytes + kv8.host_kv_cache_bytes
    k32 = kv32.kv_cache_bytes + kv32.host_kv_cache_bytes
    kv_text = (f"From 8K to 32K tokens the {st.kv_cache_dtype} KV cache grows from {_g(k8)} to {_g(k32)} "
               f"(total {_g(kv32.total_bytes + kv32.host_total_bytes)} at 32K).")
    alt = alt_kv_dtype(st)
    alt32 = saving = None
    if alt:
        a = sizer.size(fmt, replace(st, context=32768, kv_cache_dtype=alt,
                                                  flash_attention=True))[0]
        alt32 = a.kv_cache_bytes + a.host_kv_cache_bytes
        saving = k32 - alt32
        kv_text += f" A {alt.upper()} KV cache saves {_g(saving)} at 32K (total {_g(a.total_bytes + a.host_total_bytes)})."
    else:
        kv_text += f" The cache is already {st.kv_cache_dtype}."
    if m.kv.recurrent and not m.kv.full:
        kv_text += " Recurrent layers keep a fixed-size state that does not grow with context."
    return Diagnosis(verdict=text, kv=kv_text, kv_8k_bytes=k8, kv_32k_bytes=k32, kv_alt_dtype=alt,
                     kv_alt_32k_bytes=alt32, kv_saving_32k_bytes=saving, tips=tips)
