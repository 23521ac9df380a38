"""Engine working memory beside weights and KV: compute buffers and activation peaks.

llama.cpp reserves its compute buffer once for the worst-case micro-batch (`graph_reserve`,
n_tokens = min(n_ctx, n_ubatch)); the graph allocator reuses memory across layers, so the
buffer is the largest live set, not a sum: the output logits (F32, ubatch x vocab) plus the
hidden state, the FFN intermediates, or without flash attention the F32 KQ scores over the
whole cache (ubatch x n_kv x heads). Llama-3-8B, ub 512, FA: 4*512*(128256+4096) B = 258.5 MiB,
the figure its logs print. vLLM profiles a dummy forward of max_num_batched_tokens tokens
(activations) and the sampler over max_num_seqs rows (logits), plus non-torch allocations
(NCCL, cuBLAS workspaces): FORMULAS.md §2.3 and §3.1.
"""
from __future__ import annotations

from .settings import RunSettings
from .spec import ModelSpec

MIB = 1 << 20
GIB = 1 << 30
# vLLM's non-torch memory per rank (CUDA context, cuBLAS workspaces, NCCL and custom all-reduce
# buffers) as its profiler logs it: 1.79 GiB on one H100 (79.22 GiB) and 3.58 GiB per rank at TP 2
# (vLLM PR 10511, memory-profiling sanity checks), i.e. about 2.26 % of the device's memory per
# tensor-parallel rank; 4 x H100 then leaves the 8.11 GiB KV budget vLLM logged for Qwen3-235B-A22B-FP8
# (vLLM issue 21348). Over PCIe the growth is absent: RTX 3090s under TP logged 0.20 GiB per rank (vLLM
# PR 14447) and one RTX 3090 0.35 GiB (issue 10517), so without NVLink one rank's share is counted, which
# is conservative there. Measurements reach TP 4: beyond it the per-rank growth is held at the 4-rank
# figure rather than extrapolated (linear growth would claim 25 GiB per H200 at TP 8).
VLLM_NON_TORCH_FRACTION = 1.79 / 79.22
VLLM_NON_TORCH_MEASURED_RANKS = 4
# vLLM >= 0.21 profiles CUDA graphs before it sizes the KV cache ("Estimated CUDA graph memory: 0.52 GiB
# total" for Qwen3-8B, 51 piecewise + 35 full graphs; LMCache issue 3430); older versions did not.
VLLM_CUDA_GRAPH_BYTES = int(0.52 * GIB)


def llama_cpp_compute_bytes(spec: ModelSpec, st: RunSettings, n_kv: int, *, output_here: bool = True) -> int:
    """One device's compute buffer (llama.cpp graph_reserve worst case)."""
    ub = min(st.ubatch, max(n_kv, 1))
    d, V = spec.hidden_size, spec.vocab_size
    logits = 4 * ub * (V + d) if output_here else 4 * ub * d
    ffn = 4 * ub * (3 * spec.ffn_width + 2 * d)
    attention = 4 * ub * (spec.n_heads * spec.head_dim * 3 + 2 * d)
    if not st.flash_attention:
        attention += 4 * ub * n_kv * spec.n_heads  # F32 KQ scores over the whole cache
    return max(logits, ffn, attention)


# ggml-cuda.cu offload_op: a GPU backend takes over an op whose weight sits in host memory when the
# op's batch is at least GGML_OP_OFFLOAD_MIN_BATCH (default 32); decode (batch 1) stays on the CPU.
OP_OFFLOAD_MIN_BATCH = 32


def llama_cpp_offload_staging_bytes(spec: ModelSpec, fmt, table, st: RunSettings, cpu_layers) -> int:
    """Extra compute buffer on the first GPU when routed experts stay in RAM (--n-cpu-moe, -ot exps=CPU).

    For micro-batches of 32+ tokens ggml's scheduler runs the CPU-resident MoE matmuls on the GPU and
    copies their weight tensor into the GPU's compute buffer (ggml-backend.cpp split_graph: "by
    starting a new split, the memory of the previously offloaded weights can be reused", so one copy
    lives at a time). The buffer holds the largest such expert tensor (all experts of one of
    gate/up/down) plus that op's F32 activations for a micro-batch (ub x n_used x (2·ffn + d)),
    which is why it grows with -ub. GGUF formats only; 0 when no block keeps its experts in RAM.
    """
    layers = set(cpu_layers)
    if not layers or spec.moe is None or st.ubatch < OP_OFFLOAD_MIN_BATCH or fmt.kind != "gguf":
        return 0
    per_layer = _largest_expert_tensor(spec, fmt, table)
    largest = max((per_layer.get(i, 0) for i in layers), default=0)
    ub = min(st.ubatch, max(1, st.context))
    acts = 4 * ub * spec.moe.n_experts_used * (2 * spec.moe.expert_ffn + spec.hidden_size)
    return largest + acts if largest else 0


_LARGEST_EXPERT: dict[tuple, dict[int, int]] = {}


def _largest_expert_tensor(spec: ModelSpec, fmt, table) -> dict[int, int]:
    """Bytes of each block's largest routed-expert tensor at this format; computed once per
    (model, format, table), since every offload candidate of a plan asks again."""
    key = (spec.cache_key, fmt.name, id(table))
    if key not in _LARGEST_EXPERT:
        if len(_LARGEST_EXPERT) >= 4096:  # a long-running server sees many models: stay bounded
            _LARGEST_EXPERT.clear()
        from .quant import tensor_types
        from .tensors import inventory

        types = tensor_types(spec, fmt)
        out: dict[int, int] = {}
        for t in inventory(spec):
            if t.expert and t.layer is not None and len(t.shape) >= 2 and t.name in types:
                ty = table.ggml_types.get(types[t.name])
                if ty is not None:
                    out[t.layer] = max(out.get(t.layer, 0), (t.n // t.shape[0]) * ty.row_bytes(t.shape[0]))
        _LARGEST_EXPERT[key] = out
    return _LARGEST_EXPERT[key]


def llama_cpp_output_bytes(spec: ModelSpec, st: RunSettings) -> int:
    """Host-side logits buffer reserved for one output per sequence (output_reserve)."""
    return 4 * spec.vocab_size * st.batch


def vllm_batch_defaults(device_memory_bytes: int, device_name: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of `vllm serve` (EngineArgs.get_batch_defaults)."""
    if device_memory_bytes >= 70 * GIB and "a100" not in device_name.lower():
        return 8192, 1024
    return 2048, 256


def vllm_activation_bytes(spec: ModelSpec, tp: int, batched_tokens: int, max_seqs: int) -> int:
    """Per-rank activation peak of vLLM's profile run: hidden/FFN working set + sampler logits.

    Per token: gate+up outputs and the activated product (3 x FFN width / TP) and about four
    hidden-size tensors, in 16 bit; the sampler holds F32 logits for max_num_seqs rows.
    Checked against logged peaks (Llama-3.1-8B: 1.19 GiB at 8192 tokens / 256 seqs).
    """
    per_token = (3 * spec.ffn_width // tp + 4 * spec.hidden_size) * 2
    return batched_tokens * per_token + max_seqs * spec.vocab_size * 4


def vllm_mxfp4_pad_factor(spec: ModelSpec, tp: int) -> float:
    """vLLM pads MXFP4 expert weights for its MoE kernels: hidden size up to a multiple of 256 and
    the per-rank intermediate size up to 128 (vllm/model_executor/layers/quantization/mxfp4.py
    create_weights; gpt-oss 2880 -> 3072 x 2944, +9 %). Returns the expert-bytes growth factor."""
    if spec.moe is None or spec.prequant is None or spec.prequant.method != "mxfp4":
        return 1.0
    d, ff = spec.hidden_size, max(1, spec.moe.expert_ffn // tp)
    return (-(-d // 256) * 256) * (-(-ff // 128) * 128) / (d * ff)


def vllm_overhead_bytes(tp: int, device_memory_bytes: int, *, nvlink: bool = True, cuda_graphs: bool = True) -> int:
    """Per-rank memory beside weights, activations and KV: non-torch allocations (grow with TP over
    NVLink) and, in current vLLM, the CUDA graphs it captures."""
    ranks = min(max(1, tp), VLLM_NON_TORCH_MEASURED_RANKS) if nvlink else 1
    non_torch = int(VLLM_NON_TORCH_FRACTION * device_memory_bytes * ranks)
    return non_torch + (VLLM_CUDA_GRAPH_BYTES if cuda_graphs else 0)


def sglang_reserved_bytes(device_memory_bytes: int, tp: int) -> int:
    """SGLang's default reserve outside mem_fraction_static (server_args._handle_gpu_memory_settings)."""
    gib = device_memory_bytes / GIB
    tiers = [(20, 2048, 8), (35, 2048, 24), (60, 4096, 32), (90, 8192, 256), (160, 8192, 256)]
    chunked, graph_bs = 16384, 512
    for limit, c, g in tiers:
        if gib < limit:
            chunked, graph_bs = c, g
            break
    reserved_mib = 512 + max(chunked, 2048) * 1.5 + graph_bs * 2 + tp / 8 * 1024
    reserved = int(reserved_mib * MIB)
    if gib > 60:
        reserved = max(reserved, 10 * GIB)
    return reserved
