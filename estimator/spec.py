"""ModelSpec: the normalized, engine-independent description of a model that sizing needs.

Built from a real config.json by `estimator.config.spec_from_config`; every field is read
from the config (or from the family's documented default in transformers), never guessed.
"""
from __future__ import annotations

from functools import cached_property
from typing import Literal

from fitprobe.estimator.fields import doc, record

AttentionKind = Literal["full", "sliding", "chunked", "compressed", "linear", "mamba", "conv", "none"]
FfnKind = Literal["dense", "moe", "none"]


@record
class Layer:
    """One decoder block: how it attends (and so what it caches) and what its FFN is."""

    attention: AttentionKind = "full"
    ffn: FfnKind = "dense"
    n_kv_heads: int = 0
    window: int | None = doc(default=None, description="sliding window / attention chunk, in tokens")
    ffn_size: int = 0
    compress_ratio: int = doc(default=0, description="DeepSeek V4: tokens per compressed KV entry (4 or 128)")
    head_dim: int | None = doc(default=None, description="per-layer K/V head dim when it differs (Gemma 4 global layers)")
    k_eq_v: bool = doc(default=False, description="K and V share one projection (Gemma 4 attention_k_eq_v)")


@record
class MoE:
    n_experts: int
    n_experts_used: int
    expert_ffn: int
    n_shared_experts: int = 0
    shared_ffn: int = 0
    expert_bias: bool = False
    latent_size: int = doc(default=0, description="Nemotron LatentMoE: experts run at this width, not hidden_size")


@record
class MLA:
    """Multi-head latent attention (DeepSeek V2/V3, Kimi K2, GLM-5): the cache holds the latent."""

    kv_lora_rank: int
    q_lora_rank: int | None
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int


@record
class Indexer:
    """DeepSeek sparse attention (V3.2, GLM-5): a per-token indexer key cache beside the latent."""

    n_heads: int
    head_dim: int
    top_k: int = doc(default=0, description="tokens each query attends to (config index_topk)")
    shared_layers: list[int] = doc(default_factory=list,
                                   description="layers reusing the previous full indexer's keys (GLM-5.2 indexer_types 'shared')")


@record
class SSM:
    """Recurrent state of Mamba / gated-delta-net / short-conv layers (constant in context)."""

    kind: Literal["mamba1", "mamba2", "gdn", "shortconv"]
    d_inner: int
    d_state: int
    d_conv: int
    n_group: int = 1
    n_heads: int = 0
    dt_rank: int = 0
    # gated-delta-net only: key/value heads and dims
    n_k_heads: int = 0
    k_head_dim: int = 0
    n_v_heads: int = 0
    v_head_dim: int = 0


@record
class PreQuant:
    """quantization_config of a pre-quantized checkpoint, reduced to what sizing needs."""

    method: str
    bits: float | None = None
    group_size: int | None = None
    fmt: str | None = None
    expert_bpw: float | None = doc(default=None, description="routed experts stored at another width (DeepSeek V4 expert_dtype fp4: MXFP4)")
    modules_not_converted: list[str] = doc(default_factory=list)


@record
class Yarn:
    """YaRN RoPE scaling that extends the trained window (config rope_scaling, or the model card's)."""

    factor: float = doc(gt=1)
    original_context: int = doc(gt=0, description="original_max_position_embeddings")
    max_context: int = doc(gt=0, description="factor x original: the longest context YaRN serves")
    source: str = doc(default="config.json rope_scaling", description="where the scaling is documented")


@record
class ModelSpec:
    name: str
    architecture: str = doc(description="config.json model_type (of the text model)")
    hf_id: str | None = None
    n_layers: int = doc(gt=0)
    hidden_size: int = doc(gt=0)
    vocab_size: int = doc(gt=0)
    n_heads: int = doc(gt=0)
    n_kv_heads: int = doc(gt=0)
    head_dim: int = doc(gt=0, description="per-head K (and Q) dim")
    v_head_dim: int = doc(gt=0)
    intermediate_size: int = doc(ge=0)
    tied_embeddings: bool
    max_context: int = doc(gt=0)
    layers: list[Layer]
    moe: MoE | None = None
    mla: MLA | None = None
    indexer: Indexer | None = None
    ssm: SSM | None = None
    attention_bias: bool = False
    qkv_bias: bool = False
    attention_sinks: bool = False
    gated_attention_output: bool = False
    post_norms: bool = False
    qk_norm: bool = False
    mtp_layers: int = 0
    hc_mult: int = doc(default=0, description="DeepSeek V4 hyper-connection streams")
    o_groups: int = 0
    o_lora_rank: int = 0
    q_lora_rank: int = 0
    vision_params: int = 0
    native_dtype: str = "bfloat16"
    defaults_used: list[str] = doc(default_factory=list, description="keys taken from the family's transformers defaults")
    prequant: PreQuant | None = None
    yarn: Yarn | None = doc(default=None, description="YaRN that extends max_context (not yet applied in config)")

    @cached_property
    def cache_key(self) -> str:
        """Identity of this spec for memoized derived data (inventories); specs are never mutated.

        The record repr lists every field, nested records included, in declaration order."""
        return repr(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelSpec) and self.cache_key == other.cache_key

    def __hash__(self) -> int:
        return hash(self.cache_key)

    @cached_property
    def ffn_width(self) -> int:
        """Widest per-token FFN intermediate: dense FFN, or routed experts used + shared experts."""
        widths = [layer.ffn_size for layer in self.layers if layer.ffn == "dense"]
        if self.moe is not None:
            widths.append(self.moe.n_experts_used * self.moe.expert_ffn + self.moe.shared_ffn)
        return max(widths or [self.hidden_size])

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    def count(self, kind: AttentionKind) -> int:
        return sum(1 for layer in self.layers if layer.attention == kind)

    @property
    def recurrent_layers(self) -> int:
        """Layers holding a constant-size recurrent state (Falcon-H1 runs a Mamba mixer in every block)."""
        if self.ssm is None:
            return 0
        if self.architecture == "falcon_h1":
            return self.n_layers
        return sum(1 for layer in self.layers if layer.attention in ("mamba", "linear", "conv"))
