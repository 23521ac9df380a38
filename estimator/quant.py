"""Weight bytes per quantization format, tensor by tensor.

GGUF mixes follow llama.cpp's `llama_tensor_get_type` (src/llama-quant.cpp): each tensor gets
the type its name, layer index and the model's shape earn it, with the block-size fallback
when a row does not divide the block. Published recipes (Unsloth's dynamic quants) are
`--tensor-type` overrides on top of that mix, per model family. Checkpoint formats (FP8, AWQ,
GPTQ, NF4, NVFP4) quantize the linear layers and keep embeddings, output head, norms and routers
in 16 bit; MLX's affine group quantization stores a 16-bit scale and bias per group.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal, NamedTuple

from fitprobe.estimator.fields import doc, record

from .spec import ModelSpec
from .tensors import Tensor, inventory


@record
class GgmlType:
    block: int
    bytes: int

    def row_bytes(self, n: int) -> int:
        return n // self.block * self.bytes


@record
class TensorRule:
    """One `llama-quantize --tensor-type` override of a published recipe: the first rule whose
    regex matches a quantizable tensor's GGUF name gives its type."""

    match: str
    type: str
    first_eighth_type: str | None = doc(default=None, description="type in layers i < n_layer/8 instead")


@record
class PublishedFile:
    """A published GGUF of this format for a bundled model: the tensor bytes llama.cpp printed loading it
    ('model size', GiB) and its tensor type counts, the check a recipe or mix is held to."""

    model: str = doc(description="bundled catalog name")
    gib: float = doc(gt=0)
    source: str
    types: dict[str, int] = doc(default_factory=dict)


@record
class MeasuredFile:
    """A published file of a format set beside this formula's size of the same model: how far the
    formula falls short of (or over) a real file, written by scripts/quant_spread.py."""

    format: str
    model: str = doc(description="bundled catalog name")
    family: str = doc(description="recipe_family() of the model")
    published_gib: float = doc(gt=0)
    estimate_gib: float = doc(gt=0, description="weight_bytes(...).total of the model in this format")
    source: str = doc(description="the published file's source (quant_formats.json)")

    @property
    def excess(self) -> float:
        """How much larger the real file is than the estimate (negative: the estimate is larger)."""
        return self.published_gib / self.estimate_gib - 1


@record
class QuantFormat:
    name: str
    kind: Literal["native", "gguf", "checkpoint", "mlx"]
    label: str
    source: str
    ftype: str | None = None
    bits: float | None = None
    linear_bpw: float | None = None
    scale_block: int | None = None
    keep_16bit: list[str] = doc(default_factory=list)
    aliases: list[str] = doc(default_factory=list)
    approximate: bool = False
    recipes: dict[str, list[TensorRule]] = doc(
        default_factory=dict, description="per-tensor overrides on top of ftype's mix, per recipe_family()")
    group_size: int | None = doc(default=None, gt=0, description="MLX: weights per scale+bias group")
    published: list[PublishedFile] = doc(default_factory=list)
    checked_families: list[str] = doc(
        default_factory=list, description="families sized by ftype's mix alone, checked against published files")
    tolerance: float | None = doc(
        default=None, gt=0, description="relative error the sizing keeps to on published files of sized families")


@record
class QuantTable:
    ggml_types: dict[str, GgmlType]
    formats: list[QuantFormat]
    schema: int = 1
    ggml_types_source: str = ""
    measured: list[MeasuredFile] = doc(
        default_factory=list, description="published files against the formula (catalogs/data/quant_spread.json)")

    def find(self, name: str) -> QuantFormat | None:
        key = name.strip().lower()
        for fmt in self.formats:
            if fmt.name.lower() == key or key in (a.lower() for a in fmt.aliases):
                return fmt
        return None


# llama.cpp src/llama-quant.cpp at 007dbbf3fd17eefe9b47fee45f48f7ba5e62b714, tensor_type_fallback:
# a row that does not divide the chosen type's block gets this type instead.
_FALLBACK = {
    "IQ1_S": "IQ4_NL", "IQ1_M": "IQ4_NL", "IQ2_XXS": "IQ4_NL", "IQ2_XS": "IQ4_NL", "IQ2_S": "IQ4_NL",
    "IQ3_XXS": "IQ4_NL", "IQ3_S": "IQ4_NL", "IQ4_XS": "IQ4_NL", "Q2_K": "Q4_0", "Q3_K": "Q4_0",
    "TQ1_0": "Q4_0", "TQ2_0": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0",
}
# llama_ftype_get_default_type (same file): what every quantizable tensor gets unless a rule says otherwise
_DEFAULT = {
    "Q8_0": "Q8_0", "Q6_K": "Q6_K", "Q5_K_M": "Q5_K", "Q5_K_S": "Q5_K", "Q4_K_M": "Q4_K", "Q4_K_S": "Q4_K",
    "Q5_1": "Q5_1", "Q5_0": "Q5_0", "Q4_1": "Q4_1", "Q4_0": "Q4_0", "IQ4_XS": "IQ4_XS", "IQ4_NL": "IQ4_NL",
    "Q3_K_L": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_S": "Q3_K", "IQ3_M": "IQ3_S", "IQ3_S": "IQ3_S", "IQ3_XS": "IQ3_S",
    "Q2_K": "Q2_K", "IQ3_XXS": "IQ3_XXS", "IQ2_M": "IQ2_S", "IQ2_S": "IQ2_XS", "IQ2_XS": "IQ2_XS",
    "IQ2_XXS": "IQ2_XXS", "IQ1_M": "IQ1_M", "IQ1_S": "IQ1_S", "TQ2_0": "TQ2_0", "TQ1_0": "TQ1_0",
    "MXFP4_MOE": "MXFP4", "F16": "F16", "BF16": "BF16",
}
# the 1-2-bit i-quant files share one branch of llama_tensor_get_type_impl
_IQ12 = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M"}
_IQ2SM = {"IQ2_S", "IQ2_M"}
# their output.weight (and IQ3_XXS's) becomes Q5_K; every other file's becomes Q6_K
_OUTPUT_Q5K = _IQ12 | {"IQ3_XXS"}
# attn_output of 8-expert models (Mixtral) becomes Q5_K in these files
_ATTN_OUT_8X_Q5K = {"Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S",
                    "IQ3_M", "IQ4_XS"}
# llama.cpp's converter writes GLM's nextn (MTP) layers into the GGUF and its loader skips them
# (src/models: "NextN/MTP tensors (preserved but unused)", created with TENSOR_SKIP, which
# llama_model_loader::create_tensor drops from size_data): in the file, not in memory. DeepSeek and
# Qwen3-Next/3.5 conversions leave their MTP layers out of the file altogether.
GGUF_KEEPS_NEXTN = frozenset({"glm4_moe", "glm_moe_dsa"})


def _more_bits(i: int, n: int) -> bool:
    """use_more_bits: first and last eighth of the layers and every third one between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


class _MixState:
    """The per-model facts llama-quant.cpp consults while walking tensors."""

    def __init__(self, spec: ModelSpec, has_output: bool, n_attn_v: int, imatrix: bool):
        self.n_layer = spec.n_layers
        self.n_expert = spec.moe.n_experts if spec.moe else 0
        self.gqa = spec.n_heads // max(1, spec.n_kv_heads) if spec.mla is None else 1
        if spec.architecture in ("nemotron_h", "lfm2") and spec.layers[0].n_kv_heads == 0:
            # the rules read hparams.n_gqa() of layer 0, 0 when that block is recurrent (n_head_kv 0 in the GGUF;
            # llama-hparams.cpp n_gqa, llama-quant.cpp `qs.model.hparams.n_gqa()`)
            self.gqa = 0
        self.has_output = has_output
        self.is_70b = spec.n_layers == 80 and spec.hidden_size == 8192 and spec.moe is None
        self.n_attn_v = n_attn_v
        self.i_attn_v = 0
        self.i_ffn_down = 0  # ffn_down* tensors seen so far, in llama.cpp's order (by layer, then name)
        self.imatrix = imatrix
        self.ffn_ordinal = _ffn_ordinal(spec)

    def ffn_layer(self, layer: int | None) -> int:
        """The layer index llama.cpp's FFN rules see for a tensor of block `layer`."""
        return self.ffn_ordinal.get(layer, layer) if layer is not None else 0

    @classmethod
    def of(cls, spec: ModelSpec, tensors: tuple[Tensor, ...], imatrix: bool) -> "_MixState":
        has_output = any(t.name == "output.weight" for t in tensors)
        return cls(spec, has_output, sum(1 for t in tensors if _is_v(t.name)), imatrix)


def _ffn_ordinal(spec: ModelSpec) -> dict[int, int]:
    """Block -> the layer index llama.cpp's FFN rules see. llama-quant.cpp layer_info (l. 456): without
    experts the FFN rules take the ffn_down/gate/up counter as the layer, so in hybrids whose blocks
    lack an FFN (Nemotron-H) block i is the i-th FFN."""
    if spec.moe is not None and spec.moe.n_experts > 1:
        return {i: i for i in range(spec.n_layers)}
    ffn_layers = [i for i, layer in enumerate(spec.layers) if layer.ffn != "none"]
    return {layer: k for k, layer in enumerate(ffn_layers)}


def _is_v(name: str) -> bool:
    return name.endswith(("attn_v.weight", "attn_qkv.weight", "attn_kv_b.weight"))


def gguf_tensor_type(ftype: str, t: Tensor, st: _MixState) -> str:
    """The ggml type llama.cpp's quantizer gives tensor t in a file of type ftype
    (llama_tensor_get_type_impl; the Falcon-only branches are left out)."""
    base = _DEFAULT[ftype]
    name, i, n = t.name, t.layer if t.layer is not None else 0, st.n_layer
    if ftype == "MXFP4_MOE":
        new = "MXFP4" if len(t.shape) == 3 and t.shape[2] > 1 else "Q8_0"
    elif name == "output.weight" or (not st.has_output and name == "token_embd.weight"):
        if t.shape[0] % 256:
            new = "Q8_0"
        elif ftype in _OUTPUT_Q5K:
            new = "Q5_K"
        else:
            new = base if base == "Q8_0" else "Q6_K"
    elif name == "token_embd.weight":
        new = {"IQ2_XXS": "Q2_K", "IQ2_XS": "Q2_K", "IQ1_S": "Q2_K", "IQ1_M": "Q2_K", "IQ2_S": "IQ3_S",
               "IQ2_M": "IQ3_S", "IQ3_XXS": "IQ3_S", "TQ1_0": "Q4_K", "TQ2_0": "Q4_K"}.get(ftype, base)
    elif ftype in _IQ12:
        new = base
        if _is_v(name):
            new = "Q4_K" if st.gqa >= 4 or st.n_expert >= 4 else "IQ3_S" if ftype in _IQ2SM else "Q2_K"
            st.i_attn_v += 1
        elif name.endswith("attn_k.weight") and st.n_expert == 8:
            new = "Q4_K"
        elif "ffn_down" in name:
            # this branch counts ffn_down tensors (dense, routed and shared alike), not layers:
            # llama-quant.cpp l. 553-557 `qs.i_ffn_down < qs.n_ffn_down/8` (checked on b11434, DeepSeek IQ2_XS)
            if st.i_ffn_down < n // 8:
                new = "IQ3_S" if ftype in _IQ2SM else "Q2_K"
            st.i_ffn_down += 1
        elif name.endswith("attn_output.weight"):
            if st.n_expert == 8:  # llama-quant.cpp l. 558-561 (Mixtral)
                new = "Q5_K"
            elif ftype in ("IQ1_S", "IQ1_M"):
                new = "IQ2_XXS"
            elif ftype in _IQ2SM:
                new = "IQ3_S"
    else:
        new = _kquant_type(ftype, base, t, st)
    return _fit_block(new, t.shape[0])


def _kquant_type(ftype: str, new: str, t: Tensor, st: _MixState) -> str:
    name, i, n = t.name, t.layer if t.layer is not None else 0, st.n_layer
    if _is_v(name):  # attn_v, fused attn_qkv and attn_kv_b share one rule (category_is_attn_v, l. 157)
        j, nv = st.i_attn_v, st.n_attn_v
        st.i_attn_v += 1
        if ftype == "Q2_K":
            new = "Q4_K" if st.gqa >= 4 else "Q3_K"
        elif ftype == "IQ3_XXS":
            new = "Q4_K" if st.gqa >= 4 else ("IQ3_XXS" if st.imatrix else "IQ3_S")
        elif ftype in ("IQ3_XS", "IQ3_S") and st.gqa >= 4:
            new = "Q4_K"
        elif ftype == "IQ3_M":
            new = "Q4_K"
        elif ftype == "Q3_K_M":
            new = "Q5_K" if j < 2 else "Q4_K"
        elif ftype == "Q3_K_L":
            new = "Q5_K"
        elif ftype in ("IQ4_NL", "IQ4_XS") and st.gqa >= 4:
            new = "Q5_K"
        elif ftype in ("Q4_K_M", "Q5_K_M") and _more_bits(j, nv):
            new = "Q6_K"
        elif ftype == "Q4_K_S" and j < 4:
            new = "Q5_K"
        if st.is_70b and new in ("Q3_K", "Q4_K"):
            new = "Q5_K"
        if st.n_expert == 8:
            new = "Q8_0"
    elif name.endswith("attn_k.weight"):
        if st.n_expert == 8:
            new = "Q8_0"
        else:
            new = {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ftype, new)
    elif name.endswith("attn_q.weight"):
        new = {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ftype, new)
    elif "ffn_down" in name:
        i = st.ffn_layer(t.layer)
        st.i_ffn_down += 1  # llama-quant.cpp l. 668; with experts this path reads the layer from the name
        if ftype == "Q2_K":
            new = "Q3_K"
        elif ftype == "IQ3_XXS" and not st.imatrix:
            new = "Q4_K" if i < n // 8 else "Q3_K"
        elif ftype == "Q3_K_M":
            new = "Q5_K" if i < n // 16 else "Q4_K"
        elif ftype == "IQ3_M" and (i < n // 8 or (st.n_expert == 8 and _more_bits(i, n))):
            new = "Q4_K"
        elif ftype == "Q3_K_L":
            new = "Q5_K"
        elif ftype in ("Q4_K_M", "Q5_K_M") and _more_bits(i, n):
            new = "Q6_K"
        elif ftype in ("IQ4_NL", "IQ4_XS") and i < n // 8 and not st.imatrix:
            new = "Q5_K"
        elif ftype == "Q4_K_S" and i < n // 8:
            new = "Q5_K"
        elif ftype in ("Q4_0", "Q5_0") and st.imatrix and i < n // 8:
            new = "Q4_1" if ftype == "Q4_0" else "Q5_1"
    elif name.endswith("attn_output.weight"):
        if st.n_expert == 8:
            new = "Q5_K" if ftype in _ATTN_OUT_8X_Q5K else new
        else:
            new = {"Q2_K": "Q3_K", "IQ3_XXS": "IQ3_S", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K",
                   "IQ3_M": "Q4_K"}.get(ftype, new)
    elif ("ffn_gate" in name or "ffn_up" in name) and "ffn_gate_inp" not in name:
        i = st.ffn_layer(t.layer)
        if ftype == "IQ3_XS" and n // 8 <= i < 7 * n // 8:
            new = "IQ3_XXS"
    return new


def _fit_block(new: str, row: int) -> str:
    """tensor_type_fallback: a row that does not divide the block gets the next type that fits."""
    blocks = {"Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q5_1": 32, "Q8_0": 32, "IQ4_NL": 32, "MXFP4": 32,
              "F16": 1, "BF16": 1, "F32": 1}
    while row % blocks.get(new, 256):
        new = _FALLBACK.get(new, "F16")
    return new


def _source_type(t: Tensor, spec: ModelSpec) -> str:
    """What the converter writes before quantizing: 1-D tensors, norms, routers and SSM A/D F32, the rest
    16-bit (Mamba-2's A, D and grouped norm are 2-D in llama.cpp: src/models/nemotron-h.cpp)."""
    if (len(t.shape) < 2 or "ffn_gate_inp" in t.name or "ssm_conv1d" in t.name or t.name.endswith(("ssm_a", "ssm_d"))
            or t.name.endswith("_norm.weight")):
        return "F32"
    return "BF16" if "bfloat16" in spec.native_dtype else "F16"


@record
class WeightBytes:
    """Bytes of the weights an engine loads, split the ways offload and speed need."""

    total: int
    token_embd: int  # stays on the CPU in llama.cpp (input lookup)
    output: int  # the output head (on the output layer's device)
    per_layer: list[int]  # bytes of each decoder block
    experts_per_layer: list[int]  # routed-expert bytes within each block
    mtp: int = 0
    vision: int = 0
    by_type: dict[str, int] = doc(default_factory=dict)
    file_only: int = doc(default=0, description="bytes in the GGUF file that llama.cpp skips at load (GLM nextn layers)")


def head_bytes(spec: ModelSpec, w: WeightBytes) -> int:
    """The output layer's bytes: `output` (in a GGUF the output norm, and the head when it is untied) plus, with
    tied embeddings, token_embd's matrix, which llama.cpp loads again as the head (TENSOR_DUPLICATED) and every
    decode step reads."""
    return w.output + (w.token_embd if spec.tied_embeddings else 0)


def tensor_types(spec: ModelSpec, fmt: QuantFormat, *, imatrix: bool | None = None) -> dict[str, str]:
    """GGUF type of every text tensor under a GGUF format (name -> ggml type)."""
    tensors = tuple(t for t in inventory(spec) if not t.vision and not t.mtp)
    if imatrix is None:
        imatrix = (fmt.ftype or "").startswith("IQ")
    st = _MixState.of(spec, tensors, imatrix)
    return {t.name: _file_type(t, spec, fmt, st) for t in tensors}


def recipe_family(spec: ModelSpec) -> str:
    """Which of a format's per-family recipes applies: latent-attention MoE (DeepSeek, Kimi K2), models
    with recurrent layers (Qwen3.5/3.6 gated delta-net, Nemotron-H Mamba: Unsloth keeps more of them in
    high precision, so their files are larger), other MoE, or dense."""
    if spec.ssm is not None:
        return "hybrid_moe" if spec.moe is not None else "hybrid"
    if spec.moe is not None:
        return "mla_moe" if spec.mla is not None else "moe"
    return "dense"


def is_approximate(fmt: QuantFormat, spec: ModelSpec) -> bool:
    """An approximate format sized for this model's family by neither a published recipe nor a mix
    that published files of the family confirm."""
    return fmt.approximate and not _recipe(fmt, spec) and recipe_family(spec) not in fmt.checked_families


def _recipe(fmt: QuantFormat, spec: ModelSpec) -> list[TensorRule] | None:
    return fmt.recipes.get(recipe_family(spec)) if fmt.recipes else None


def _recipe_type(rules: list[TensorRule], t: Tensor, n_layer: int) -> str | None:
    for rule in rules:
        if re.search(rule.match, t.name):
            first = rule.first_eighth_type and t.layer is not None and t.layer < n_layer // 8
            return _fit_block(rule.first_eighth_type if first else rule.type, t.shape[0])
    return None


def source_types(spec: ModelSpec) -> dict[str, str]:
    """Type of every text tensor in the 16-bit GGUF the converter writes from the checkpoint
    (the input of llama-quantize)."""
    return {t.name: _mxfp4_or(t, spec) or _source_type(t, spec)
            for t in inventory(spec) if not t.vision and not t.mtp}


def _mxfp4_or(t: Tensor, spec: ModelSpec) -> str | None:
    if spec.prequant is not None and spec.prequant.method == "mxfp4" and t.expert and t.quantizable:
        # gpt-oss: the converter writes MXFP4 experts and the published GGUFs of every type keep them
        # (llama-quantize on its own would requantize them: the b11434 dry run gives Q5_0/Q8_0 experts at Q4_K_M)
        return "MXFP4"
    return None


def _file_type(t: Tensor, spec: ModelSpec, fmt: QuantFormat, st: _MixState) -> str:
    """The type a tensor has in a GGUF file of this format."""
    if _mxfp4_or(t, spec):
        return "MXFP4"
    if t.quantizable:
        rules = _recipe(fmt, spec)
        # a manual override skips llama_tensor_get_type_impl (and its attn_v counter) altogether
        return (rules and _recipe_type(rules, t, spec.n_layers)) or gguf_tensor_type(fmt.ftype or "", t, st)
    return _source_type(t, spec)


class _Prepared(NamedTuple):
    """A model's tensors grouped for fast sizing: per block, the tensors whose type the mix rules
    choose by layer index (attn_v, ffn_down: 'dynamic') apart from the rest, and a signature so
    identical blocks are sized once per format."""

    text: tuple[Tensor, ...]
    static: list[tuple[Tensor, ...]]
    dynamic: list[tuple[Tensor, ...]]
    outside: tuple[Tensor, ...]  # token_embd, output, norms, MTP, vision
    has_output: bool
    n_attn_v: int
    static_ids: list[int]  # equal ids = identical block structure
    dynamic_ids: list[int]
    v_counts: list[int]
    down_counts: list[int]  # ffn_down* tensors per block
    # per block, what its sizes depend on besides the format and the attn_v/ffn_down counters: the
    # structure and the layer predicates the mix rules test (see weight_bytes)
    static_keys: list[tuple]
    dynamic_keys: list[tuple]
    v_predicates: list[tuple]  # what the attn_v rules test of the attn_v counter j (see _kquant_type)


def _signature(tensors: list[Tensor]) -> tuple:
    return tuple((t.name.split(".", 2)[2], t.shape, t.expert) for t in tensors)


def _ids(signatures: list[tuple]) -> list[int]:
    seen: dict[tuple, int] = {}
    return [seen.setdefault(sig, len(seen)) for sig in signatures]


def _is_dynamic(name: str) -> bool:
    return _is_v(name) or "ffn_down" in name


@lru_cache(maxsize=256)
def _prepare(spec: ModelSpec) -> _Prepared:
    tensors = inventory(spec)
    static: list[list[Tensor]] = [[] for _ in range(spec.n_layers)]
    dynamic: list[list[Tensor]] = [[] for _ in range(spec.n_layers)]
    outside = []
    for t in tensors:
        if t.layer is None or t.mtp or t.vision:
            outside.append(t)
        else:
            (dynamic if _is_dynamic(t.name) else static)[t.layer].append(t)
    signatures = [_signature(layer) for layer in static]
    text = tuple(t for t in tensors if not t.vision and not t.mtp)
    static_ids, dynamic_ids = _ids(signatures), _ids([_signature(layer) for layer in dynamic])
    n, ffn_ordinal = spec.n_layers, _ffn_ordinal(spec)
    ffn = [ffn_ordinal.get(i, i) for i in range(n)]
    # IQ3_XS files give ffn_gate/ffn_up IQ3_XXS in the middle three quarters of the layers; recipes may
    # give the first eighth other types; attn_v / ffn_down types see the layer only through these
    # predicates (see _kquant_type)
    static_keys = [(static_ids[i], i < n // 8, f < n // 8, n // 8 <= f < 7 * n // 8) for i, f in enumerate(ffn)]
    dynamic_keys = [(dynamic_ids[i], f < n // 16, f < n // 8, _more_bits(f, n)) for i, f in enumerate(ffn)]
    nv = sum(1 for t in text if _is_v(t.name))
    return _Prepared(text, [tuple(x) for x in static], [tuple(x) for x in dynamic], tuple(outside),
                     any(t.name == "output.weight" for t in text), nv, static_ids, dynamic_ids,
                     [sum(1 for t in layer if _is_v(t.name)) for layer in dynamic],
                     [sum(1 for t in layer if "ffn_down" in t.name) for layer in dynamic],
                     static_keys, dynamic_keys, [(j < 2, j < 4, _more_bits(j, nv)) for j in range(nv)])


def weight_bytes(spec: ModelSpec, fmt: QuantFormat, table: QuantTable, *, imatrix: bool | None = None) -> WeightBytes:
    """Bytes per tensor summed per block; vision tower and MTP layers reported apart.

    Gives exactly the sum over `tensor_types` (tested), but sizes identical blocks once."""
    prep = _prepare(spec)
    gguf = fmt.kind == "gguf"
    if imatrix is None:
        imatrix = (fmt.ftype or "").startswith("IQ")
    st = _MixState(spec, prep.has_output, prep.n_attn_v, imatrix)
    by_type: dict[str, int] = {}

    nextn_in_file = gguf and spec.architecture in GGUF_KEEPS_NEXTN

    def size(t: Tensor) -> tuple[str, int]:
        if not gguf or (t.mtp and not nextn_in_file):
            return _checkpoint_bytes(t, fmt, spec)
        ty = _file_type(t, spec, fmt, st)
        return ty, _gguf_bytes(t, table.ggml_types[ty])

    def add(ty: str, n: int, into: dict[str, int]) -> None:
        into[ty] = into.get(ty, 0) + n

    per_layer = [0] * spec.n_layers
    experts = [0] * spec.n_layers
    blocks: dict[object, tuple[int, int, dict[str, int]]] = {}
    uses: dict[object, int] = {}
    n, nv = spec.n_layers, st.n_attn_v

    def block(key: object, tensors: tuple[Tensor, ...]) -> tuple[int, int, dict[str, int]]:
        """(bytes, expert bytes, bytes per type) of a block, sized once per key."""
        sized = blocks.get(key)
        if sized is None:
            total_b = expert_b = 0
            types: dict[str, int] = {}
            for t in tensors:
                ty, b = size(t)
                total_b += b
                expert_b += b if t.expert else 0
                add(ty, b, types)
            sized = blocks[key] = (total_b, expert_b, types)
        uses[key] = uses.get(key, 0) + 1
        return sized

    def v_predicates(first: int, count: int) -> tuple:
        """What the attn_v rules test of the attn_v counter (see _kquant_type), for a block's attn_v tensors."""
        if first + count <= len(prep.v_predicates):
            return tuple(prep.v_predicates[first:first + count])
        return tuple((j < 2, j < 4, _more_bits(j, nv)) for j in range(first, first + count))

    # a checkpoint that leaves named blocks unquantized (modules_to_not_convert) sizes each block on its own
    own_block = not gguf and fmt.name == "FP8" and bool(spec.prequant and spec.prequant.modules_not_converted)
    for i in range(n):
        own = i if own_block else None
        static_b, static_e, _ = block((prep.static_keys[i], own), prep.static[i])
        first_v, count_v = st.i_attn_v, prep.v_counts[i]
        first_down, count_down = st.i_ffn_down, prep.down_counts[i]
        key = (prep.dynamic_keys[i], own, v_predicates(first_v, count_v),
               (first_down < n // 8,) if count_down == 1 else
               tuple(c < n // 8 for c in range(first_down, first_down + count_down)))
        known = key in blocks
        dyn_b, dyn_e, _ = block(key, prep.dynamic[i])
        if known:
            st.i_attn_v += count_v  # sizing the block would have advanced the attn_v counter
            st.i_ffn_down += count_down  # ... and the ffn_down one
        per_layer[i], experts[i] = static_b + dyn_b, static_e + dyn_e
    for key, count in uses.items():
        for ty, b in blocks[key][2].items():
            add(ty, b * count, by_type)
    embd = output = mtp = vision = 0
    for t in prep.outside:
        if t.vision:
            vision += t.n * 2
            continue
        ty, b = size(t)
        if t.mtp:
            mtp += b
            continue
        add(ty, b, by_type)
        if t.name == "token_embd.weight":
            embd = b
        else:
            output += b
    if spec.tied_embeddings and not gguf:
        output = 0  # one shared matrix in a checkpoint
    total = embd + output + sum(per_layer)
    file_only = mtp if nextn_in_file else 0
    return WeightBytes(total=total, token_embd=embd, output=output, per_layer=per_layer,
                       experts_per_layer=experts, mtp=mtp, vision=vision, by_type=by_type, file_only=file_only)


def _gguf_bytes(t: Tensor, ty: GgmlType) -> int:
    rows = t.n // t.shape[0]
    return rows * ty.row_bytes(t.shape[0])


MXFP4_BLOCK_BYTES = 17 / 32  # 32 E2M1 values + one E8M0 scale


def _mlx_bytes(t: Tensor, fmt: QuantFormat) -> tuple[str, int]:
    """mlx_lm.convert -q (mlx_lm/utils.py quantize_model, affine mode): every Linear and Embedding
    whose input width divides the group size is quantized to `bits` with one 16-bit scale and one
    16-bit bias per group (bits + 32/group_size bits a weight); MoE routers get 8 bits (the
    quant_predicate of qwen3_moe.py, gpt_oss.py and others); norms and biases stay 16-bit."""
    group = fmt.group_size or 64
    router = "ffn_gate_inp" in t.name
    if len(t.shape) < 2 or not (t.quantizable or router) or t.shape[0] % group:
        return "BF16", t.n * 2
    bits = 8 if router else int(fmt.bits or 4)
    return f"MLX{bits}", t.n * bits // 8 + t.n // group * 4


# GGUF tensor name -> the Hugging Face module it comes from (llama-style decoders), for matching a
# checkpoint's modules_to_not_convert
_HF_MODULES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
               "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
               "ffn_down": "mlp.down_proj"}


def _not_converted(name: str, skipped: list[str]) -> bool:
    """Whether a checkpoint's quantization_config leaves this tensor in 16 bit: an entry of
    modules_to_not_convert names the module or a dotted prefix of it (transformers'
    FbgemmFp8Config and vLLM's is_layer_skipped: Meta's Llama-3.1-405B FP8 lists `model.layers.0`,
    `model.layers.125`, every `model.layers.N.self_attn` and `lm_head`). Regex entries are not read."""
    parts = name.split(".")
    if name == "output.weight":
        module = "lm_head"
    elif len(parts) == 4 and parts[0] == "blk" and parts[2] in _HF_MODULES:
        module = f"model.layers.{parts[1]}.{_HF_MODULES[parts[2]]}"
    else:
        return False
    return any(module == s.rstrip("*").rstrip(".") or module.startswith(s.rstrip("*").rstrip(".") + ".")
               for s in skipped if not s.startswith("re:"))


def _checkpoint_bytes(t: Tensor, fmt: QuantFormat, spec: ModelSpec) -> tuple[str, int]:
    mxfp4_experts = t.expert and spec.prequant is not None and spec.prequant.method == "mxfp4"
    if fmt.kind == "native":
        # gpt-oss ships MXFP4 experts; engines and llama.cpp's 16-bit conversions keep them MXFP4
        return ("MXFP4", int(t.n * MXFP4_BLOCK_BYTES)) if mxfp4_experts else ("BF16", t.n * 2)
    if fmt.kind == "mlx":
        return _mlx_bytes(t, fmt)
    keep = not t.quantizable or t.name in ("token_embd.weight", "output.weight")
    if fmt.name == "FP8" and spec.prequant and spec.prequant.modules_not_converted:
        keep = keep or _not_converted(t.name, spec.prequant.modules_not_converted)
    if fmt.name == "MXFP4" or (spec.prequant and spec.prequant.method == "mxfp4" and fmt.kind == "checkpoint"):
        keep = keep or not t.expert
    if keep:
        return "BF16", t.n * 2
    bits = fmt.linear_bpw or fmt.bits or 16
    if t.expert and spec.prequant and spec.prequant.expert_bpw and fmt.name == "FP8":
        bits = spec.prequant.expert_bpw  # mixed checkpoint: FP4 experts beside FP8 attention
    size = t.n * bits / 8
    if fmt.scale_block:
        size += t.n / fmt.scale_block * 4
    return fmt.name, int(size)
