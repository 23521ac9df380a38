"""A GGUF that declares a model's tensors and leaves their data as a sparse hole.

llama.cpp sizes a model from the GGUF header alone (`llama-fit-params`, `llama-quantize --dry-run`,
the no-alloc path behind `--fit`), and its loader checks every tensor's shape against the
architecture (`llama_model_loader::check_tensor_dims`) and every required metadata key. So a header
written from fitprobe's own model description — the metadata keys as llama.cpp's `llama-arch.cpp`
names them, every tensor of `estimator.tensors.inventory` with the type fitprobe's quantization
rules give it — lets the real engine check fitprobe's inventory, quantization mix and memory rules
on any model without its weights. The file is truncated past its last tensor, so it occupies a
few MB on disk whatever its declared size.

Keys that only change numerics (norm epsilon, rope base) get neutral values; every key that shapes
memory (layers, heads, head sizes, FFN widths, experts, windows, latent ranks, vocabulary size)
comes from the ModelSpec. Architectures without a mapping here fail closed, naming themselves.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from fitprobe.estimator.spec import ModelSpec

# config.json model_type -> llama.cpp architecture name (src/llama-arch.cpp LLM_ARCH_NAMES).
# The converter maps Mistral and Mixtral checkpoints to "llama" (convert_hf_to_gguf.py LlamaModel).
LLAMA_ARCH = {
    "llama": "llama", "mistral": "llama", "mixtral": "llama",
    "qwen2": "qwen2", "qwen2_moe": "qwen2moe", "qwen3": "qwen3", "qwen3_moe": "qwen3moe",
    "phi3": "phi3", "gemma2": "gemma2", "gemma3_text": "gemma3", "gemma3": "gemma3",
    "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2", "kimi_k2": "deepseek2",
    "gpt_oss": "gpt-oss", "qwen3_next": "qwen3next",
    "qwen3_5": "qwen35", "qwen3_5_text": "qwen35", "qwen3_5_moe": "qwen35moe", "qwen3_5_moe_text": "qwen35moe",
    "glm4": "glm4", "glm4_moe": "glm4moe", "glm_moe_dsa": "glm-dsa", "deepseek_v32": "deepseek32",
    "ernie4_5": "ernie4_5", "ernie4_5_moe": "ernie4_5-moe", "hunyuan": "hunyuan-moe",
    "minicpm": "minicpm", "cohere": "command-r", "minimax_m2": "minimax-m2", "ministral3": "mistral3",
    "lfm2": "lfm2", "llama4_text": "llama4", "llama4": "llama4", "nemotron_h": "nemotron_h",
    "gemma4_text": "gemma4", "gemma4": "gemma4",
}
# Bundled families the pinned build runs but this writer does not map yet, and what is missing.
NOT_MAPPED = {
    "deepseek_v4": "llama.cpp's deepseek4 needs the hash-routed layers' tid2eid tables, hc_*.weight names, "
                   "the head's hc scale and compressor keys that fitprobe's inventory does not describe yet",
}
# llama_model_deepseek2::load_arch_hparams: LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID for V3-style routers
_GATING_SIGMOID = 2


class UnsupportedArchitecture(ValueError):
    """The sparse-GGUF writer has no llama.cpp mapping for this architecture."""


def llama_arch(spec: ModelSpec) -> str:
    arch = LLAMA_ARCH.get(spec.architecture)
    if arch is None:
        why = NOT_MAPPED.get(spec.architecture)
        raise UnsupportedArchitecture(
            f"no llama.cpp GGUF mapping for architecture '{spec.architecture}' "
            + (f"({why})" if why else f"(supported: {', '.join(sorted(LLAMA_ARCH))})"))
    return arch


def _per_layer(values: list[int]) -> int | list[int]:
    """llama.cpp reads these keys as one value or one per layer (get_key_or_arr)."""
    return values[0] if len(set(values)) == 1 else values


def metadata(spec: ModelSpec) -> dict[str, object]:
    """The architecture keys llama.cpp's loader reads for this model (llama-arch.cpp LLM_KV_NAMES)."""
    a = llama_arch(spec)
    attn = [layer for layer in spec.layers if layer.attention in ("full", "sliding", "chunked")]
    kv: dict[str, object] = {
        f"{a}.vocab_size": spec.vocab_size,
        f"{a}.context_length": spec.max_context,
        f"{a}.embedding_length": spec.hidden_size,
        f"{a}.block_count": spec.n_layers,
        f"{a}.feed_forward_length": _per_layer([layer.ffn_size if layer.ffn == "dense" else spec.intermediate_size
                                                for layer in spec.layers]),
        f"{a}.attention.head_count": spec.n_heads,
        # one value when the attention layers agree (converters write an int; recurrent layers ignore it,
        # and a 0 there would make llama.cpp's n_gqa() - read at layer 0 - zero)
        f"{a}.attention.head_count_kv": (attn[0].n_kv_heads if len({x.n_kv_heads for x in attn}) == 1
                                         else [layer.n_kv_heads for layer in spec.layers]),
        f"{a}.attention.key_length": spec.head_dim,
        f"{a}.attention.value_length": spec.v_head_dim,
        f"{a}.attention.layer_norm_rms_epsilon": 1e-6,
        f"{a}.attention.layer_norm_epsilon": 1e-5,  # LayerNorm models (command-r, nemotron_h) read this one
        f"{a}.rope.dimension_count": spec.head_dim,
    }
    if spec.moe is not None:
        m = spec.moe
        kv |= {f"{a}.expert_count": m.n_experts, f"{a}.expert_used_count": m.n_experts_used,
               f"{a}.expert_feed_forward_length": m.expert_ffn}
        if m.n_shared_experts:
            kv[f"{a}.expert_shared_count"] = m.n_shared_experts
            kv[f"{a}.expert_shared_feed_forward_length"] = m.shared_ffn
        dense_lead = next((i for i, layer in enumerate(spec.layers) if layer.ffn == "moe"), 0)
        kv[f"{a}.leading_dense_block_count"] = dense_lead
        # llama4 / ernie4_5-moe: layer i is MoE iff (i + 1) % step == 0 (src/models/llama4.cpp is_moe_layer)
        kv[f"{a}.interleave_moe_layer_step"] = _moe_step(spec)
    windows = {layer.window for layer in attn if layer.attention != "full" and layer.window}
    if windows:
        kv[f"{a}.attention.sliding_window"] = max(windows)
        kv[f"{a}.attention.sliding_window_pattern"] = [layer.attention != "full" for layer in spec.layers]
    if spec.ssm is not None and spec.ssm.kind == "gdn":
        s = spec.ssm  # llama_model_qwen3next::load_arch_hparams; n_embd_r / n_embd_s in llama-hparams.cpp
        kv |= {f"{a}.ssm.conv_kernel": s.d_conv, f"{a}.ssm.inner_size": s.d_inner, f"{a}.ssm.state_size": s.d_state,
               f"{a}.ssm.time_step_rank": s.n_v_heads, f"{a}.ssm.group_count": s.n_group,
               f"{a}.full_attention_interval": _full_attention_interval(spec)}
        if a.startswith("qwen35"):  # required by llama_model_qwen35*::load_arch_hparams; M-RoPE numerics only
            kv[f"{a}.rope.dimension_sections"] = [0, 0, 0, 0]
    if a == "gemma4":
        # llama_model_gemma4::load_arch_hparams: full-attention layers take key_length / value_length,
        # sliding ones the *_swa sizes; no per-layer input embeddings on the text-only checkpoints
        full = next((layer for layer in spec.layers if layer.attention == "full"), spec.layers[0])
        head = full.head_dim or spec.head_dim
        kv |= {f"{a}.attention.key_length": head, f"{a}.attention.value_length": head,
               f"{a}.attention.key_length_swa": spec.head_dim, f"{a}.attention.value_length_swa": spec.head_dim,
               f"{a}.rope.dimension_count": head, f"{a}.embedding_length_per_layer_input": 0,
               f"{a}.attention.head_count_kv": [layer.n_kv_heads for layer in spec.layers]}
    if spec.ssm is not None and spec.ssm.kind == "shortconv":
        # llama_model_lfm2::load_arch_hparams: a layer is recurrent iff its n_head_kv is 0
        kv[f"{a}.shortconv.l_cache"] = spec.ssm.d_conv
        kv[f"{a}.attention.head_count_kv"] = [layer.n_kv_heads for layer in spec.layers]
    if spec.ssm is not None and spec.ssm.kind == "mamba2":
        s = spec.ssm  # llama_model_nemotron_h::load_arch_hparams: recurrent iff n_head_kv == 0 and n_ff == 0
        kv |= {f"{a}.ssm.conv_kernel": s.d_conv, f"{a}.ssm.inner_size": s.d_inner, f"{a}.ssm.state_size": s.d_state,
               f"{a}.ssm.time_step_rank": s.n_heads, f"{a}.ssm.group_count": s.n_group,
               f"{a}.attention.head_count_kv": [layer.n_kv_heads if layer.attention == "full" else 0
                                                for layer in spec.layers],
               f"{a}.feed_forward_length": [(layer.ffn_size or spec.moe.expert_ffn if spec.moe else layer.ffn_size)
                                            if layer.ffn != "none" else 0 for layer in spec.layers]}
        if spec.moe is not None and spec.moe.latent_size:
            kv[f"{a}.moe_latent_size"] = spec.moe.latent_size
    if spec.mla is not None:
        m = spec.mla
        # llama.cpp stores MLA as absorbed MQA: one "head" of the latent (+ rope part) for K, the latent for V
        kv |= {f"{a}.attention.head_count_kv": 1,
               f"{a}.attention.key_length": m.kv_lora_rank + m.qk_rope_head_dim,
               f"{a}.attention.value_length": m.kv_lora_rank,
               f"{a}.attention.key_length_mla": m.qk_nope_head_dim + m.qk_rope_head_dim,
               f"{a}.attention.value_length_mla": m.v_head_dim,
               f"{a}.attention.kv_lora_rank": m.kv_lora_rank,
               f"{a}.rope.dimension_count": m.qk_rope_head_dim}
        if m.q_lora_rank:
            kv[f"{a}.attention.q_lora_rank"] = m.q_lora_rank
        if spec.architecture != "deepseek_v2":
            kv[f"{a}.expert_gating_func"] = _GATING_SIGMOID
        if spec.indexer is not None:  # llama_model_deepseek32 / glm_dsa::load_arch_hparams
            ix = spec.indexer
            kv |= {f"{a}.attention.indexer.head_count": ix.n_heads, f"{a}.attention.indexer.key_length": ix.head_dim,
                   f"{a}.attention.indexer.top_k": ix.top_k,
                   # glm_dsa: 1 where a layer keeps its own indexer keys (LLM_KV_ATTENTION_INDEXER_TYPES)
                   f"{a}.attention.indexer.types": [int(i not in ix.shared_layers) for i in range(spec.n_layers)]}
    if spec.architecture == "minimax_m2":  # sigmoid router (config scoring_func); llama-graph.cpp aborts on none
        kv[f"{a}.expert_gating_func"] = _GATING_SIGMOID
    return kv


def _moe_step(spec: ModelSpec) -> int:
    """k > 1 when exactly the layers with (i + 1) % k == 0 are MoE (Llama 4 Maverick), else 1."""
    moe = [layer.ffn == "moe" for layer in spec.layers]
    k = moe.index(True) + 1 if True in moe else 1
    return k if k > 1 and moe == [(i + 1) % k == 0 for i in range(len(moe))] else 1


def _full_attention_interval(spec: ModelSpec) -> int:
    """Hybrid models mark every k-th layer as full attention (layer i is full iff (i + 1) % k == 0)."""
    full = [layer.attention == "full" for layer in spec.layers]
    k = full.index(True) + 1 if True in full else len(full) + 1
    if full != [(i + 1) % k == 0 for i in range(len(full))]:
        raise UnsupportedArchitecture(f"{spec.architecture}: attention layers are not every k-th layer")
    return k


def write_sparse_gguf(spec: ModelSpec, path: str | os.PathLike, types: Mapping[str, str], *,
                      file_type: int | None = None) -> int:
    """Write the header of `spec`'s GGUF, each tensor typed by `types` (name -> ggml type name, as
    `estimator.quant.tensor_types` gives it), and extend the file sparsely to its full size.
    Returns the declared size in bytes."""
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType, GGUFWriter

    arch = llama_arch(spec)
    writer = GGUFWriter(str(path), arch)
    writer.add_name(spec.name)
    writer.add_string("tokenizer.ggml.model", "none")  # llama-vocab.cpp: dummy tokens from {arch}.vocab_size
    if file_type is not None:
        writer.add_file_type(file_type)
    for key, value in metadata(spec).items():
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        else:
            writer.add_key_value(key, list(value), GGUFValueType.ARRAY)
    shapes = {t.name: t.shape for t in _tensors(spec)}
    missing = sorted(set(types) - set(shapes)) or sorted(set(shapes) - set(types))
    if missing:
        raise ValueError(f"tensor types and inventory disagree on {missing[0]}")
    for name, shape in shapes.items():
        ty = GGMLQuantizationType[types[name]]
        block, size = GGML_QUANT_SIZES[ty]
        rows = 1
        for n in shape[1:]:
            rows *= n
        writer.add_tensor_info(name, tuple(reversed(shape)), np.dtype(np.float32), rows * shape[0] // block * size,
                               raw_dtype=ty)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    assert writer.fout is not None
    end = writer.fout[0].tell()
    data_start = GGUFWriter.ggml_pad(end, writer.data_alignment)
    total = data_start + sum(GGUFWriter.ggml_pad(ti.nbytes, writer.data_alignment) for ti in writer.tensors[0].values())
    writer.close()
    os.truncate(Path(path), total)  # the data region: a hole, never written
    return total


def _tensors(spec: ModelSpec):
    """The tensors a llama.cpp GGUF holds: the text model (the vision tower goes to an mmproj file;
    MTP layers are dropped by the converters of the architectures mapped here)."""
    from fitprobe.estimator.tensors import inventory

    return [t for t in inventory(spec) if not t.vision and not t.mtp]
