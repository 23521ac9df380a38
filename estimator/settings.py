"""Run settings: what the user asks for (engine, quant, context, KV dtype, concurrency)."""
from __future__ import annotations

from typing import Literal

from fitprobe.estimator.fields import doc, record

Engine = Literal["llama.cpp", "vllm", "sglang", "ollama", "mlx"]
ENGINES: tuple[str, ...] = ("llama.cpp", "vllm", "sglang", "ollama", "mlx")

# Bytes per cached element; q8_0/q4_0 are ggml blocks of 32 (34 / 18 bytes), see FORMULAS §2.2.
KV_DTYPE_BYTES: dict[str, float] = {
    "f32": 4.0, "f16": 2.0, "bf16": 2.0, "fp8": 1.0, "q8_0": 34 / 32, "q4_0": 18 / 32,
}
# Which cache types each engine accepts (llama.cpp common/arg.cpp -ctk; vLLM --kv-cache-dtype;
# SGLang --kv-cache-dtype; Ollama OLLAMA_KV_CACHE_TYPE; mlx-lm --kv-bits 8/4).
ENGINE_KV_DTYPES: dict[str, tuple[str, ...]] = {
    "llama.cpp": ("f16", "bf16", "f32", "q8_0", "q4_0"),
    "ollama": ("f16", "q8_0", "q4_0"),
    "vllm": ("auto", "f16", "bf16", "fp8"),
    "sglang": ("auto", "f16", "bf16", "fp8"),
    "mlx": ("f16", "bf16", "q8_0", "q4_0"),
}
# The oldest NVIDIA compute capability each engine runs on: vLLM's GPU requirements ("compute capability 7.0
# or higher", docs.vllm.ai getting_started/installation/gpu), SGLang's quickstart ("sm75 and above").
MIN_CUDA_CC = {"vllm": 7.0, "sglang": 7.5}


def too_old_for(engine: str, hw) -> str | None:
    """The first NVIDIA GPU whose compute capability is below what `engine` runs on, by name (None: all run it)."""
    need = MIN_CUDA_CC.get(engine)
    for d in hw.devices if need else ():
        try:
            if d.compute_capability and float(d.compute_capability) < need:
                return d.name
        except ValueError:  # AMD's "gfx1100"
            continue
    return None


_KV_ALIASES = {"fp16": "f16", "float16": "f16", "bfloat16": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8",
               "q8": "q8_0", "int8": "q8_0", "q4": "q4_0", "int4": "q4_0"}


def normalize_kv_dtype(value: str) -> str:
    value = value.strip().lower()
    value = _KV_ALIASES.get(value, value)
    if value not in KV_DTYPE_BYTES and value != "auto":
        raise ValueError(f"unknown KV cache type '{value}' (choose from: auto, {', '.join(KV_DTYPE_BYTES)})")
    return value


@record
class RunSettings:
    quant: str = "Q4_K_M"
    context: int = doc(default=8192, gt=0, description="tokens per sequence")
    kv_cache_dtype: str = "f16"
    batch: int = doc(default=1, gt=0, description="concurrent sequences, each with the full context")
    engine: Engine = "llama.cpp"
    ubatch: int = doc(default=512, gt=0, description="llama.cpp -ub: micro-batch the compute buffer is sized for")
    flash_attention: bool = True
    kv_unified: bool = doc(default=False, description="llama.cpp --kv-unified: one KV buffer shared by all "
                                                      "sequences instead of one stream per sequence")
    gpu_layers: int | None = doc(default=None, ge=0, description="llama.cpp -ngl; None = every layer")
    gpu_memory_utilization: float = doc(default=0.9, gt=0, le=1, description="vLLM's share of each GPU")
    cpu_moe_layers: int = doc(default=0, ge=0, description="llama.cpp --n-cpu-moe: routed experts of blocks "
                                                           "0..N-1 kept in system RAM")
    tensor_split: tuple[int, ...] | None = doc(
        default=None, description="llama.cpp --tensor-split as layer counts per device (the last one counts the "
                                  "output layer); None = llama.cpp's default split by device memory")

    def __post_init__(self) -> None:
        self.kv_cache_dtype = normalize_kv_dtype(self.kv_cache_dtype)
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine '{self.engine}' (choose from: {', '.join(ENGINES)})")

    def kv_bytes_per_element(self, native_dtype: str = "bfloat16") -> float:
        """'auto' means the model's own dtype (vLLM/SGLang default)."""
        if self.kv_cache_dtype == "auto":
            return 4.0 if "float32" in native_dtype else 2.0
        return KV_DTYPE_BYTES[self.kv_cache_dtype]
