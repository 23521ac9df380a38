"""One sizing run: the breakdown and verdict, the quantization matrix, the context-scaling table."""
from __future__ import annotations

from fitprobe.estimator.fields import doc, record, replace

from .hardware import Hardware
from .kv import KvCache, kv_cache
from .memory import MemoryBreakdown, estimate
from .message import msg
from .quant import QuantFormat, QuantTable, WeightBytes, is_approximate, weight_bytes
from .settings import RunSettings
from .spec import ModelSpec
from .spread import WeightSpread, weight_spread, widened
from .verdict import Status, Verdict, band_for, judge

SCALING_CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072)
APPROXIMATE = msg("approximate formula")  # weights_source of a format sized by an unconfirmed mix


@record
class MatrixRow:
    """One quantization format at the asked context (the seed pages' quantization matrix)."""

    quant: str
    label: str
    engine: str = doc(description="the engine sized: the chosen one, or vLLM for checkpoint formats llama.cpp cannot load")
    weights_bytes: int = doc(description="weights, accelerators and host RAM together")
    kv_cache_bytes: int
    total_bytes: int = doc(description="weights + KV + buffers, accelerators and host RAM together")
    status: Status
    weights_source: str = doc(description="formula, approximate formula, real file size, exact from checkpoint")
    note: str = doc(default="", description="why a row cannot run here (e.g. a checkpoint format with no GPU)")
    decode_tps: float | None = doc(default=None, description="report only: decode tokens/s per sequence at this "
                                   "format and the row's settings, as if it fit (null: not estimated)")


@record
class ScalingRow:
    """The chosen format at one context length."""

    context: int
    kv_cache_bytes: int
    total_bytes: int
    status: Status
    beyond_model_max: bool = doc(default=False, description="longer than max_position_embeddings: needs RoPE scaling")


@record
class PlanResult:
    memory: MemoryBreakdown
    verdict: Verdict
    weights_source: str
    matrix: list[MatrixRow]
    scaling: list[ScalingRow]


def row_engine(fmt: QuantFormat, engine: str) -> str:
    """The engine a matrix row is sized for: the chosen one, unless it cannot load that format
    (llama.cpp / Ollama / MLX do not read FP8, AWQ, GPTQ, NF4 or NVFP4 checkpoints: vLLM does)."""
    if fmt.kind == "checkpoint" and engine in ("llama.cpp", "ollama", "mlx"):
        return "vllm"
    if fmt.kind == "mlx":
        return "mlx"
    return engine


def row_settings(st: RunSettings, fmt: QuantFormat) -> RunSettings:
    """The settings a matrix row is sized at: the asked ones, in the row's format and engine."""
    engine = row_engine(fmt, st.engine)
    return replace(st, quant=fmt.name, engine=engine, kv_cache_dtype=_row_kv(st.kv_cache_dtype, engine))


def _row_kv(kv: str, engine: str) -> str:
    """The asked KV type in the row engine's vocabulary (llama.cpp q8_0 ~ vLLM fp8, both 8-bit)."""
    if engine in ("vllm", "sglang"):
        return {"q8_0": "fp8", "q4_0": "fp8", "f32": "auto"}.get(kv, kv)
    return kv


class Sizer:
    """Sizes one model on one hardware set; caches weights per format across table rows.

    `known_weights` maps a format name to exact sizes (real GGUF file, safetensors metadata). A format
    sized approximately is judged with its measured spread added to the band (`band`, estimator/spread.py).
    """

    def __init__(self, spec: ModelSpec, table: QuantTable, hw: Hardware, *, error_band: float,
                 min_margin_bytes: int = 0, known_weights: dict[str, tuple[WeightBytes, str]] | None = None):
        self.spec, self.table, self.hw = spec, table, hw
        self.error_band, self.min_margin = error_band, min_margin_bytes
        self.known = known_weights or {}
        self._weights: dict[str, tuple[WeightBytes, str]] = {}
        self._kv: dict[tuple, KvCache] = {}
        self._spreads: dict[str, WeightSpread | None] = {}

    def weights(self, fmt: QuantFormat) -> tuple[WeightBytes, str]:
        if fmt.name not in self._weights:
            self._weights[fmt.name] = self.known.get(fmt.name) or (
                weight_bytes(self.spec, fmt, self.table),
                APPROXIMATE if is_approximate(fmt, self.spec) else msg("formula"))
        return self._weights[fmt.name]

    def spread(self, fmt: QuantFormat) -> WeightSpread | None:
        """The measured spread of a format sized approximately here (none for known real sizes)."""
        if fmt.name not in self._spreads:
            by_formula = self.weights(fmt)[1] == APPROXIMATE  # a real file's size needs no spread
            self._spreads[fmt.name] = weight_spread(fmt, self.spec, self.table) if by_formula else None
        return self._spreads[fmt.name]

    def band(self, fmt: QuantFormat, engine: str) -> float:
        """The error band a plan in this format on this engine is judged with."""
        return widened(band_for(self.error_band, engine), self.spread(fmt))

    def size(self, fmt: QuantFormat, st: RunSettings, *, now: bool = False) -> tuple[MemoryBreakdown, Verdict, str]:
        w, source = self.weights(fmt)
        mem = estimate(self.spec, fmt, self.table, st, self.hw, weights=w, now=now, kv=self.kv_for(st))
        verdict = judge(mem, self.hw, error_band=self.band(fmt, st.engine), min_margin_bytes=self.min_margin, now=now)
        return mem, verdict, source

    def kv_for(self, st: RunSettings) -> KvCache | None:
        """The llama.cpp-family cache for these settings, computed once: it depends on the engine,
        context, sequences, cache type and micro-batch, not on the format or the placement (every
        quantization-matrix row and every offload candidate shares it). Paged engines size their
        cache per tensor-parallel rank inside `estimate`."""
        if st.engine in ("vllm", "sglang"):
            return None
        key = (st.engine, st.context, st.batch, st.kv_cache_dtype, st.ubatch)
        if key not in self._kv:
            self._kv[key] = kv_cache(self.spec, st)
        return self._kv[key]

    def plan(self, fmt: QuantFormat, st: RunSettings, *, formats: list[QuantFormat] | None = None,
             now: bool = False) -> PlanResult:
        mem, verdict, source = self.size(fmt, st, now=now)
        matrix = []
        for other in formats if formats is not None else self.table.formats:
            row_st = row_settings(st, other)
            engine = row_st.engine
            m, v, src = self.size(other, row_st, now=now)
            status, note = v.status, ""
            if engine in ("vllm", "sglang") and not self.hw.devices:
                status, note = "exceeds", msg("%(engine)s needs a GPU", engine=engine)
            elif other.kind not in ("native", "checkpoint") and any(d.kind == "hpu" for d in self.hw.devices):
                status, note = "exceeds", msg("no engine loads GGUF on Intel Gaudi")
            matrix.append(MatrixRow(quant=other.name, label=other.label, engine=engine,
                                    weights_bytes=m.weights_bytes + m.host_weights_bytes,
                                    kv_cache_bytes=m.kv_cache_bytes + m.host_kv_cache_bytes,
                                    total_bytes=m.total_bytes + m.host_total_bytes, status=status,
                                    weights_source=src, note=note))
        contexts = sorted(set(SCALING_CONTEXTS) | {self.spec.max_context})
        scaling = []
        for ctx in contexts:
            m, v, _ = self.size(fmt, replace(st, context=ctx), now=now)
            scaling.append(ScalingRow(context=ctx, kv_cache_bytes=m.kv_cache_bytes + m.host_kv_cache_bytes,
                                      total_bytes=m.total_bytes + m.host_total_bytes, status=v.status,
                                      beyond_model_max=ctx > self.spec.max_context))
        return PlanResult(memory=mem, verdict=verdict, weights_source=source, matrix=matrix, scaling=scaling)
