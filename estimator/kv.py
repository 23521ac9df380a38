"""KV cache and recurrent state, per engine, because engines allocate differently.

llama.cpp (src/llama-kv-cache.cpp, llama-kv-cache-iswa.cpp, llama-memory-recurrent.cpp):
cells padded to 256; sliding/chunked layers capped at window x sequences + ubatch; MLA caches
only the 576-wide latent K (V is a view of it); recurrent layers hold F32 r/s states per
sequence. vLLM (v1/kv_cache_interface.py): 16-token blocks; sliding layers keep
window - 1 + max_num_batched_tokens tokens plus one block; MLA latent replicated per TP rank;
KV heads split over TP ranks but never below one per rank.
FORMULAS.md §2.2 and §3.2 give the derivations and sources.
"""
from __future__ import annotations

from math import ceil

from fitprobe.estimator.fields import record

from .settings import RunSettings
from .spec import ModelSpec

LLAMA_CPP_PAD = 256  # GGML_PAD(n_ctx, 256) in llama_context
VLLM_BLOCK = 16  # default block_size on CUDA


@record
class KvCache:
    """Bytes of the attention cache and recurrent state over all devices, with per-layer detail."""

    total: int
    full: int = 0
    windowed: int = 0  # sliding-window and chunked-attention layers
    latent: int = 0  # MLA latent cache
    indexer: int = 0  # DSA indexer keys
    recurrent: int = 0  # Mamba / gated-delta-net / short-conv state
    per_layer: list[int]
    cells_full: int = 0
    cells_window: int = 0
    note: str = ""


def _pad(n: int, to: int) -> int:
    return -(-n // to) * to


def _row(n_elements: int, bytes_per_element: float) -> float:
    return n_elements * bytes_per_element


def recurrent_state_bytes(spec: ModelSpec, sequences: int, *, dtype_bytes: float = 4.0) -> int:
    """One layer's r (conv) + s (ssm) state for `sequences` sequences (llama.cpp keeps both in F32)."""
    s = spec.ssm
    if s is None:
        return 0
    if s.kind in ("mamba2", "gdn"):
        r = (s.d_conv - 1) * (s.d_inner + 2 * s.n_group * s.d_state)
        st = s.d_state * s.d_inner
    elif s.kind == "mamba1":
        r = (s.d_conv - 1) * s.d_inner
        st = s.d_state * s.d_inner
    else:  # shortconv
        r, st = (s.d_conv - 1) * spec.hidden_size, 0
    return int((r + st) * dtype_bytes * max(1, sequences))


V4_VLLM_ENTRY = 584  # fp8_ds_mla entry: 448 fp8 NoPE + 64 bf16 RoPE + 8 scale bytes (vLLM deepseek_v4_attention.py)
V4_VLLM_INDEX_ENTRY = 132  # 128 fp8 + one fp32 scale (DeepseekV4IndexerCache)


def _v4_layer(spec: ModelSpec, layer, context: int, seqs: int, e: float, paged: bool) -> tuple[float, float, float]:
    """DeepSeek V4 (window, compressed, indexer) bytes of one layer: a sliding window of the shared
    K=V head, one compressed entry per `compress_ratio` tokens, and on ratio-4 layers indexer keys.
    vLLM stores fp8 584-byte entries; the reference layout stores head_dim values per entry."""
    entry = V4_VLLM_ENTRY if paged else spec.head_dim * e
    index_entry = V4_VLLM_INDEX_ENTRY if paged else (spec.indexer.head_dim * e if spec.indexer else 0)
    window = min(context, layer.window or 0) * entry
    compressed = ceil(context / layer.compress_ratio) * entry if layer.compress_ratio else 0
    index = ceil(context / 4) * index_entry if layer.compress_ratio == 4 else 0
    return window * seqs, compressed * seqs, index * seqs


def kv_cache(spec: ModelSpec, settings: RunSettings, *, tensor_parallel: int = 1,
             max_num_batched_tokens: int = 2048) -> KvCache:
    if settings.engine in ("vllm", "sglang"):
        return _kv_paged(spec, settings, tensor_parallel, max_num_batched_tokens)
    return _kv_ggml(spec, settings)


def _v_width(spec: ModelSpec, layer) -> int:
    return layer.n_kv_heads * (layer.head_dim or spec.v_head_dim)


def _sum_layers(spec: ModelSpec, e: float, *, cells, kv_heads, copies: int, index_e: float,
                recurrent_each: int, v4, v_row_min: int = 0) -> tuple[list[int], dict[str, float]]:
    """Per-layer cache bytes by kind. The engine decides `cells(layer)` (cells held for the layer),
    `kv_heads(layer)` (heads stored, summed over ranks), how many ranks hold a copy of an MLA latent,
    and the DeepSeek V4 layout `v4(layer)` -> (window, compressed, indexer) bytes."""
    per_layer, out = [], dict(full=0.0, windowed=0.0, latent=0.0, indexer=0.0, recurrent=0.0)
    for i, layer in enumerate(spec.layers):
        b = 0.0
        if spec.architecture == "deepseek_v4":
            for kind, part in zip(("windowed", "latent", "indexer"), v4(layer)):
                out[kind] += part
                b += part
        elif layer.attention in ("full", "sliding", "chunked"):
            n = cells(layer)
            if spec.mla is not None:
                parts = {"latent": n * _row(spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim, e) * copies}
                if spec.indexer is not None and i not in spec.indexer.shared_layers:
                    parts["indexer"] = n * _row(spec.indexer.head_dim, index_e) * copies
            else:
                kd, vd = (layer.head_dim, layer.head_dim) if layer.head_dim else (spec.head_dim, spec.v_head_dim)
                kind = "full" if layer.attention == "full" else "windowed"
                parts = {kind: n * (kv_heads(layer) * _row(kd, e) + max(kv_heads(layer) * _row(vd, e), _row(v_row_min, e)))}
            for kind, part in parts.items():
                out[kind] += part
                b += part
        if layer.attention in ("mamba", "linear", "conv") or spec.architecture == "falcon_h1":
            out["recurrent"] += recurrent_each
            b += recurrent_each
        per_layer.append(int(b))
    return per_layer, out


def _kv_ggml(spec: ModelSpec, st: RunSettings) -> KvCache:
    """llama.cpp / Ollama (same allocator) and MLX (no padding, rotating caches for windows)."""
    e = st.kv_bytes_per_element(spec.native_dtype)
    np_ = st.batch
    mlx = st.engine == "mlx"
    unified = st.kv_unified and not mlx
    # llama_context: n_ctx = GGML_PAD(n_ctx, 256); per-sequence streams of GGML_PAD(n_ctx / n_seq, 256) cells
    # each, or one stream of n_ctx cells with --kv-unified (src/llama-context.cpp l. 292-306)
    seq_cells = st.context if mlx else _pad(st.context, LLAMA_CPP_PAD)
    cells_full = _pad(st.context * np_, LLAMA_CPP_PAD) if unified else seq_cells * np_

    def cells(layer) -> int:
        if layer.attention == "full" or not layer.window:
            return cells_full
        if mlx:
            return min(st.context, layer.window) * np_
        # the SWA cache: GGML_PAD(min(size, n_swa * (unified ? n_seq : 1) + n_ubatch), 256) cells per stream
        # (src/llama-kv-cache-iswa.cpp l. 73)
        if unified:
            return _pad(min(cells_full, layer.window * np_ + st.ubatch), LLAMA_CPP_PAD)
        return np_ * min(seq_cells, _pad(layer.window + st.ubatch, LLAMA_CPP_PAD))

    windowed = [cells(layer) for layer in spec.layers if layer.attention in ("sliding", "chunked")]
    # without flash attention V is stored transposed, every layer's row as wide as the widest layer's
    # (src/llama-kv-cache.cpp l. 157-160, 210 [TAG_V_CACHE_VARIABLE]: Gemma 4's 512-wide global heads)
    v_row_min = 0 if mlx or st.flash_attention else max(
        (_v_width(spec, layer) for layer in spec.layers if layer.attention in ("full", "sliding", "chunked")), default=0)
    # the DSA indexer-key cache is a second llama_kv_cache of -ctk's type, K only (src/llama-kv-cache-dsa.cpp l. 49-52)
    per_layer, out = _sum_layers(
        spec, e, cells=cells, kv_heads=lambda layer: layer.n_kv_heads, copies=1, index_e=e,
        recurrent_each=recurrent_state_bytes(spec, np_, dtype_bytes=2.0 if mlx else 4.0),
        v4=lambda layer: _v4_layer(spec, layer, st.context, np_, e, paged=False), v_row_min=v_row_min)
    return KvCache(total=sum(per_layer), per_layer=per_layer, cells_full=cells_full,
                   cells_window=windowed[-1] if windowed else 0, **{k: int(v) for k, v in out.items()})


def _kv_paged(spec: ModelSpec, st: RunSettings, tp: int, batched: int) -> KvCache:
    """vLLM / SGLang: paged blocks; the numbers are summed over the TP ranks."""
    e = st.kv_bytes_per_element(spec.native_dtype)
    blocks_full = ceil(st.context / VLLM_BLOCK)

    def cells(layer) -> int:
        tokens = blocks_full * VLLM_BLOCK
        if layer.attention != "full" and layer.window and st.engine == "vllm":
            span = min(layer.window - 1 + batched, st.context)
            tokens = (ceil(span / VLLM_BLOCK) + (1 if layer.attention == "sliding" else 0)) * VLLM_BLOCK
        return tokens * st.batch

    windowed = [cells(layer) for layer in spec.layers if layer.attention in ("sliding", "chunked")]
    state_dtype = 2.0 if "16" in spec.native_dtype or "bfloat" in spec.native_dtype else 4.0
    per_layer, out = _sum_layers(
        spec, e, cells=cells, kv_heads=lambda layer: max(1, layer.n_kv_heads // tp) * tp, copies=tp, index_e=e,
        recurrent_each=recurrent_state_bytes(spec, st.batch, dtype_bytes=state_dtype) * tp,
        v4=lambda layer: tuple(x * tp for x in _v4_layer(spec, layer, st.context, st.batch, e, paged=True)))
    return KvCache(total=sum(per_layer), per_layer=per_layer,
                   cells_full=blocks_full * VLLM_BLOCK * st.batch,
                   cells_window=windowed[-1] if windowed else 0, **{k: int(v) for k, v in out.items()})
