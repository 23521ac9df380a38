"""The tensor inventory of a model, named and shaped as llama.cpp's GGUF converter writes it.

Shapes are in ggml order (ne0 = row length = input features first), because the GGUF
quantization rules key on tensor names and on whether ne0 divides the quant block.
Sizing weights per tensor (not with one average bits-per-weight) needs this list.
"""
from __future__ import annotations

from functools import lru_cache
from math import prod
from typing import NamedTuple

from .spec import ModelSpec


class Tensor(NamedTuple):
    name: str
    shape: tuple[int, ...]
    layer: int | None = None
    expert: bool = False  # routed-expert tensor: only n_used / n_experts of it is read per token
    mtp: bool = False  # next-token-prediction layer: in the checkpoint, not loaded for plain decoding
    vision: bool = False

    @property
    def n(self) -> int:
        return prod(self.shape)

    @property
    def quantizable(self) -> bool:
        """llama-quant.cpp only quantizes ≥2-D '*weight' tensors, never norms or the MoE router."""
        return (
            len(self.shape) >= 2
            and self.name.endswith("weight")
            and "_norm" not in self.name
            and "ffn_gate_inp" not in self.name
            and "ssm_conv1d" not in self.name
            and "shortconv.conv.weight" not in self.name
            and not self.vision
        )


def _attention(spec: ModelSpec, i: int, p: str) -> list[Tensor]:
    d, H, hd, vd = spec.hidden_size, spec.n_heads, spec.head_dim, spec.v_head_dim
    kv = spec.layers[i].n_kv_heads
    out: list[Tensor] = []
    if spec.architecture == "deepseek_v4":
        return _attention_v4(spec, i, p)
    if spec.mla is not None:
        m = spec.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            out += [Tensor(f"{p}attn_q_a.weight", (d, m.q_lora_rank), i),
                    Tensor(f"{p}attn_q_a_norm.weight", (m.q_lora_rank,), i),
                    Tensor(f"{p}attn_q_b.weight", (m.q_lora_rank, H * qk), i)]
        else:
            out.append(Tensor(f"{p}attn_q.weight", (d, H * qk), i))
        out += [Tensor(f"{p}attn_kv_a_mqa.weight", (d, m.kv_lora_rank + m.qk_rope_head_dim), i),
                Tensor(f"{p}attn_kv_a_norm.weight", (m.kv_lora_rank,), i),
                Tensor(f"{p}attn_k_b.weight", (m.qk_nope_head_dim, m.kv_lora_rank, H), i),
                Tensor(f"{p}attn_v_b.weight", (m.kv_lora_rank, m.v_head_dim, H), i),
                Tensor(f"{p}attn_output.weight", (H * m.v_head_dim, d), i)]
        if spec.indexer is not None:
            ix = spec.indexer
            q_in = m.q_lora_rank or d
            out += [Tensor(f"{p}indexer.attn_q_b.weight", (q_in, ix.n_heads * ix.head_dim), i),
                    Tensor(f"{p}indexer.attn_k.weight", (d, ix.head_dim), i),
                    Tensor(f"{p}indexer.proj.weight", (d, ix.n_heads), i),
                    Tensor(f"{p}indexer.k_norm.weight", (ix.head_dim,), i),
                    Tensor(f"{p}indexer.k_norm.bias", (ix.head_dim,), i)]
        return out
    layer = spec.layers[i]
    if layer.head_dim:
        hd = vd = layer.head_dim
    q_width = H * hd * (2 if spec.gated_attention_output else 1)
    if spec.architecture == "phi3":
        out.append(Tensor(f"{p}attn_qkv.weight", (d, H * hd + 2 * kv * hd), i))
    else:
        out += [Tensor(f"{p}attn_q.weight", (d, q_width), i),
                Tensor(f"{p}attn_k.weight", (d, kv * hd), i)]
        if not layer.k_eq_v:
            out.append(Tensor(f"{p}attn_v.weight", (d, kv * vd), i))
    out.append(Tensor(f"{p}attn_output.weight", (H * vd, d), i))
    if spec.qkv_bias or spec.attention_bias:
        out += [Tensor(f"{p}attn_q.bias", (H * hd,), i), Tensor(f"{p}attn_k.bias", (kv * hd,), i),
                Tensor(f"{p}attn_v.bias", (kv * vd,), i)]
    if spec.attention_bias:
        out.append(Tensor(f"{p}attn_output.bias", (d,), i))
    if spec.qk_norm and spec.architecture == "minimax_m2":  # one norm over all heads (src/models/minimax-m2.cpp)
        out += [Tensor(f"{p}attn_q_norm.weight", (H * hd,), i), Tensor(f"{p}attn_k_norm.weight", (kv * hd,), i)]
    elif spec.qk_norm:
        out += [Tensor(f"{p}attn_q_norm.weight", (hd,), i), Tensor(f"{p}attn_k_norm.weight", (hd,), i)]
    if spec.attention_sinks:
        out.append(Tensor(f"{p}attn_sinks.weight", (H,), i))
    return out


def _attention_v4(spec: ModelSpec, i: int, p: str) -> list[Tensor]:
    """DeepSeek V4: one shared K=V head, grouped low-rank output, per-ratio KV compressors and the
    lightning indexer on ratio-4 layers (transformers modular_deepseek_v4.py; /work notes in docs)."""
    d, H, hd = spec.hidden_size, spec.n_heads, spec.head_dim
    layer = spec.layers[i]
    q_rank = spec.q_lora_rank
    ix = spec.indexer
    out = [Tensor(f"{p}attn_q_a.weight", (d, q_rank), i), Tensor(f"{p}attn_q_a_norm.weight", (q_rank,), i),
           Tensor(f"{p}attn_q_b.weight", (q_rank, H * hd), i), Tensor(f"{p}attn_kv.weight", (d, hd), i),
           Tensor(f"{p}attn_kv_norm.weight", (hd,), i),
           Tensor(f"{p}attn_output_a.weight", (H * hd // spec.o_groups, spec.o_groups * spec.o_lora_rank), i),
           Tensor(f"{p}attn_output_b.weight", (spec.o_groups * spec.o_lora_rank, d), i),
           Tensor(f"{p}attn_sinks.weight", (H,), i)]
    r = layer.compress_ratio
    if r:
        width = 2 * hd if r == 4 else hd  # ratio-4 compressors use overlapping windows: twice the width
        out += [Tensor(f"{p}compressor.kv.weight", (d, width), i), Tensor(f"{p}compressor.gate.weight", (d, width), i),
                Tensor(f"{p}compressor.pos_bias", (width, r), i), Tensor(f"{p}compressor.norm.weight", (hd,), i)]
    if r == 4 and ix is not None:
        out += [Tensor(f"{p}indexer.kv.weight", (d, 2 * ix.head_dim), i),
                Tensor(f"{p}indexer.gate.weight", (d, 2 * ix.head_dim), i),
                Tensor(f"{p}indexer.pos_bias", (2 * ix.head_dim, 4), i),
                Tensor(f"{p}indexer.k_norm.weight", (ix.head_dim,), i),
                Tensor(f"{p}indexer.attn_q_b.weight", (q_rank, ix.n_heads * ix.head_dim), i),
                Tensor(f"{p}indexer.proj.weight", (d, ix.n_heads), i)]
    n = spec.hc_mult
    for part in ("attn", "ffn"):
        out += [Tensor(f"{p}hc_{part}.fn", (n * d, (2 + n) * n), i), Tensor(f"{p}hc_{part}.base", ((2 + n) * n,), i),
                Tensor(f"{p}hc_{part}.scale", (3,), i)]
    return out


def _ssm(spec: ModelSpec, i: int, p: str) -> list[Tensor]:
    s, d = spec.ssm, spec.hidden_size
    assert s is not None
    if s.kind == "gdn":
        qkvz = 2 * s.n_k_heads * s.k_head_dim + 2 * s.n_v_heads * s.v_head_dim
        conv_ch = 2 * s.n_k_heads * s.k_head_dim + s.n_v_heads * s.v_head_dim
        value = s.n_v_heads * s.v_head_dim
        if spec.architecture.startswith("qwen3_5"):
            # Qwen3.5 checkpoints keep q/k/v, the gate z, beta and alpha apart (llama.cpp src/models/qwen35.cpp)
            proj = [Tensor(f"{p}attn_qkv.weight", (d, conv_ch), i), Tensor(f"{p}attn_gate.weight", (d, value), i),
                    Tensor(f"{p}ssm_beta.weight", (d, s.n_v_heads), i), Tensor(f"{p}ssm_alpha.weight", (d, s.n_v_heads), i)]
        else:
            proj = [Tensor(f"{p}ssm_in.weight", (d, qkvz), i), Tensor(f"{p}ssm_ba.weight", (d, 2 * s.n_v_heads), i)]
        return proj + [Tensor(f"{p}ssm_conv1d.weight", (s.d_conv, conv_ch), i),
                       Tensor(f"{p}ssm_dt.bias", (s.n_v_heads,), i), Tensor(f"{p}ssm_a", (s.n_v_heads,), i),
                       Tensor(f"{p}ssm_norm.weight", (s.v_head_dim,), i), Tensor(f"{p}ssm_out.weight", (value, d), i)]
    if s.kind == "mamba2":
        # ggml shapes as llama.cpp creates them (src/models/nemotron-h.cpp, mamba2.cpp): A and D are
        # {1, n_head}, the gated norm {d_inner / n_group, n_group}
        conv_ch = s.d_inner + 2 * s.n_group * s.d_state
        return [Tensor(f"{p}ssm_in.weight", (d, s.d_inner + conv_ch + s.n_heads), i),
                Tensor(f"{p}ssm_conv1d.weight", (s.d_conv, conv_ch), i), Tensor(f"{p}ssm_conv1d.bias", (conv_ch,), i),
                Tensor(f"{p}ssm_dt.bias", (s.n_heads,), i), Tensor(f"{p}ssm_a", (1, s.n_heads), i),
                Tensor(f"{p}ssm_d", (1, s.n_heads), i),
                Tensor(f"{p}ssm_norm.weight", (s.d_inner // s.n_group, s.n_group), i),
                Tensor(f"{p}ssm_out.weight", (s.d_inner, d), i)]
    if s.kind == "mamba1":
        return [Tensor(f"{p}ssm_in.weight", (d, 2 * s.d_inner), i),
                Tensor(f"{p}ssm_conv1d.weight", (s.d_conv, s.d_inner), i), Tensor(f"{p}ssm_conv1d.bias", (s.d_inner,), i),
                Tensor(f"{p}ssm_x.weight", (s.d_inner, s.dt_rank + 2 * s.d_state), i),
                Tensor(f"{p}ssm_dt.weight", (s.dt_rank, s.d_inner), i), Tensor(f"{p}ssm_dt.bias", (s.d_inner,), i),
                Tensor(f"{p}ssm_a", (s.d_state, s.d_inner), i), Tensor(f"{p}ssm_d", (s.d_inner,), i),
                Tensor(f"{p}ssm_out.weight", (s.d_inner, d), i)]
    # shortconv (LFM2): in_proj to 3 gates, a depthwise conv, out_proj
    return [Tensor(f"{p}shortconv.in_proj.weight", (d, 3 * d), i),
            Tensor(f"{p}shortconv.conv.weight", (s.d_conv, d), i),
            Tensor(f"{p}shortconv.out_proj.weight", (d, d), i)]


def _ffn(spec: ModelSpec, i: int, p: str) -> list[Tensor]:
    layer, d = spec.layers[i], spec.hidden_size
    if layer.ffn == "none":
        return []
    if layer.ffn == "dense":
        ff = layer.ffn_size
        if spec.architecture in ("phi3", "glm4"):  # gate and up fused into one ffn_up (src/models/glm4.cpp)
            return [Tensor(f"{p}ffn_up.weight", (d, 2 * ff), i), Tensor(f"{p}ffn_down.weight", (ff, d), i)]
        if spec.architecture == "nemotron_h":  # squared-ReLU MLP: no gate projection
            return [Tensor(f"{p}ffn_up.weight", (d, ff), i), Tensor(f"{p}ffn_down.weight", (ff, d), i)]
        return [Tensor(f"{p}ffn_gate.weight", (d, ff), i), Tensor(f"{p}ffn_up.weight", (d, ff), i),
                Tensor(f"{p}ffn_down.weight", (ff, d), i)]
    m = spec.moe
    assert m is not None
    E, eff = m.n_experts, m.expert_ffn
    if spec.architecture in ("gemma4", "gemma4_text"):
        return _gemma4_moe(spec, i, p)
    out = [Tensor(f"{p}ffn_gate_inp.weight", (d, E), i)]
    if m.latent_size:  # LatentMoE: project to the latent width, run experts there, project back
        out += [Tensor(f"{p}ffn_latent_down.weight", (d, m.latent_size), i),
                Tensor(f"{p}ffn_latent_up.weight", (m.latent_size, d), i)]
    ed = m.latent_size or d
    if spec.architecture == "nemotron_h":
        out += [Tensor(f"{p}ffn_up_exps.weight", (ed, eff, E), i, expert=True),
                Tensor(f"{p}ffn_down_exps.weight", (eff, ed, E), i, expert=True)]
    else:
        out += [Tensor(f"{p}ffn_gate_exps.weight", (d, eff, E), i, expert=True),
                Tensor(f"{p}ffn_up_exps.weight", (d, eff, E), i, expert=True),
                Tensor(f"{p}ffn_down_exps.weight", (eff, d, E), i, expert=True)]
    if m.expert_bias:
        out += [Tensor(f"{p}ffn_gate_inp.bias", (E,), i),
                Tensor(f"{p}ffn_gate_exps.bias", (eff, E), i, expert=True),
                Tensor(f"{p}ffn_up_exps.bias", (eff, E), i, expert=True),
                Tensor(f"{p}ffn_down_exps.bias", (d, E), i, expert=True)]
    if spec.architecture in ("deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe", "glm_moe_dsa", "minimax_m2",
                             "nemotron_h"):
        out.append(Tensor(f"{p}exp_probs_b.bias", (E,), i))
    if m.n_shared_experts and m.shared_ffn and spec.architecture == "nemotron_h":
        out += [Tensor(f"{p}ffn_up_shexp.weight", (d, m.shared_ffn), i),
                Tensor(f"{p}ffn_down_shexp.weight", (m.shared_ffn, d), i)]
    elif m.n_shared_experts and m.shared_ffn:
        sff = m.shared_ffn
        out += [Tensor(f"{p}ffn_gate_shexp.weight", (d, sff), i), Tensor(f"{p}ffn_up_shexp.weight", (d, sff), i),
                Tensor(f"{p}ffn_down_shexp.weight", (sff, d), i)]
        if spec.architecture in ("qwen2_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"):
            out.append(Tensor(f"{p}ffn_gate_inp_shexp.weight", (d,), i))
    return out


def _gemma4_moe(spec: ModelSpec, i: int, p: str) -> list[Tensor]:
    """Gemma 4 MoE layer (llama.cpp src/models/gemma4.cpp): the dense FFN runs beside the routed
    experts, with a router scale, three extra norms and a per-expert output scale."""
    d, ff, m = spec.hidden_size, spec.layers[i].ffn_size, spec.moe
    E, eff = m.n_experts, m.expert_ffn
    return [Tensor(f"{p}ffn_gate.weight", (d, ff), i), Tensor(f"{p}ffn_up.weight", (d, ff), i),
            Tensor(f"{p}ffn_down.weight", (ff, d), i),
            Tensor(f"{p}ffn_gate_inp.weight", (d, E), i), Tensor(f"{p}ffn_gate_inp.scale", (d,), i),
            Tensor(f"{p}pre_ffw_norm_2.weight", (d,), i), Tensor(f"{p}post_ffw_norm_1.weight", (d,), i),
            Tensor(f"{p}post_ffw_norm_2.weight", (d,), i),
            Tensor(f"{p}ffn_gate_exps.weight", (d, eff, E), i, expert=True),
            Tensor(f"{p}ffn_up_exps.weight", (d, eff, E), i, expert=True),
            Tensor(f"{p}ffn_down_exps.weight", (eff, d, E), i, expert=True),
            Tensor(f"{p}ffn_down_exps.scale", (E,), i)]


# The converter names the pre-FFN norm after the checkpoint's `post_attention_layernorm` for these
# (llama.cpp src/models/qwen3next.cpp, qwen35.cpp, qwen35moe.cpp, openai-moe.cpp, glm4-moe.cpp:
# LLM_TENSOR_ATTN_POST_NORM).
_PRE_FFN_NORM = {a: "post_attention_norm" for a in ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe",
                                                     "qwen3_5_moe_text", "gpt_oss", "glm4_moe")}


def _block(spec: ModelSpec, i: int, *, mtp: bool = False) -> list[Tensor]:
    p, d = f"blk.{i}.", spec.hidden_size
    layer = spec.layers[min(i, spec.n_layers - 1)]
    out = [Tensor(f"{p}attn_norm.weight", (d,), i)]
    if layer.attention in ("full", "sliding", "chunked", "compressed"):
        out += _attention(spec, min(i, spec.n_layers - 1), p)
    if layer.attention in ("mamba", "linear", "conv") or spec.architecture == "falcon_h1":
        out += _ssm(spec, i, p)
    if spec.post_norms:
        out.append(Tensor(f"{p}post_attention_norm.weight", (d,), i))
    if layer.ffn != "none":
        # one norm per block (attn_norm) in Nemotron-H and in Command-R's parallel attention + FFN block
        # (src/models/nemotron-h.cpp, command-r.cpp)
        if spec.architecture not in ("nemotron_h", "cohere"):
            out.append(Tensor(f"{p}{_PRE_FFN_NORM.get(spec.architecture, 'ffn_norm')}.weight", (d,), i))
        out += _ffn(spec, min(i, spec.n_layers - 1), p)
        if spec.post_norms:
            out.append(Tensor(f"{p}post_ffw_norm.weight", (d,), i))
    if mtp:
        out += [Tensor(f"{p}nextn.eh_proj.weight", (2 * d, d), i), Tensor(f"{p}nextn.enorm.weight", (d,), i),
                Tensor(f"{p}nextn.hnorm.weight", (d,), i), Tensor(f"{p}nextn.shared_head_norm.weight", (d,), i)]
        out = [t._replace(mtp=True) for t in out]
    return out


@lru_cache(maxsize=512)
def _inventory(spec: ModelSpec) -> tuple[Tensor, ...]:
    d, V = spec.hidden_size, spec.vocab_size
    tensors = [Tensor("token_embd.weight", (d, V))]
    if spec.architecture.startswith("gemma4"):
        # the converter writes the proportional-RoPE frequencies of the global layers (llama.cpp gemma4.cpp
        # creates rope_freqs {head_dim / 2} and shares it across layers)
        full = next((layer for layer in spec.layers if layer.attention == "full" and layer.head_dim), None)
        tensors.append(Tensor("rope_freqs.weight", ((full.head_dim if full else spec.head_dim) // 2,)))
    for i in range(spec.n_layers):
        tensors += _block(spec, i)
    for j in range(spec.mtp_layers):
        tensors += _block(spec, spec.n_layers + j, mtp=True)
    # LFM2 normalizes the output through LLM_TENSOR_OUTPUT_NORM_LFM2, "token_embd_norm" (llama-arch.cpp)
    tensors.append(Tensor("token_embd_norm.weight" if spec.architecture == "lfm2" else "output_norm.weight", (d,)))
    if spec.hc_mult:
        n = spec.hc_mult
        tensors += [Tensor("hc_head.fn", (n * d, n)), Tensor("hc_head.base", (n,))]
    if not spec.tied_embeddings:
        tensors.append(Tensor("output.weight", (d, V)))
    if spec.vision_params:
        tensors.append(Tensor("vision.tower", (spec.vision_params,), vision=True))
    return tuple(tensors)


def inventory(spec: ModelSpec) -> tuple[Tensor, ...]:
    """Every tensor of the checkpoint (text model, MTP layers, the vision tower as one lump)."""
    return _inventory(spec)


class ParamCounts(NamedTuple):
    total: int  # what a checkpoint holds: text + vision + MTP layers
    text: int  # the language model an engine loads for plain decoding
    active: int  # parameters touched per token (embeddings and output included, as model cards count)
    vision: int
    mtp: int


def param_counts(spec: ModelSpec) -> ParamCounts:
    text = active = vision = mtp = 0
    used = spec.moe.n_experts_used / spec.moe.n_experts if spec.moe else 1.0
    for t in inventory(spec):
        if t.vision:
            vision += t.n
        elif t.mtp:
            mtp += t.n
        else:
            text += t.n
            active += t.n * used if t.expert else t.n
    return ParamCounts(total=text + vision + mtp, text=text, active=int(round(active)), vision=vision, mtp=mtp)
