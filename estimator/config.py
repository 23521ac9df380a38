"""config.json (a plain dict) -> ModelSpec.

Each supported `model_type` names the keys it needs; a config missing any of them, or a
model_type nobody taught us, fails closed with `SpecError` naming what is missing.
Layer patterns (sliding / chunked / linear / Mamba / MoE placement) follow the families'
transformers configuration classes and llama.cpp's converters.
"""
from __future__ import annotations

import json
from typing import Any
from fitprobe.estimator.fields import replace

from .message import Num, msg
from .spec import MLA, SSM, Indexer, Layer, ModelSpec, MoE, PreQuant, Yarn


class SpecError(ValueError):
    """A config that cannot be sized: unknown architecture or missing/invalid fields."""


# Multimodal wrappers whose language model sits in a nested config.
_NESTED_TEXT_KEYS = ("text_config", "llm_config", "language_config", "thinker_config")

# Only families whose tensor layout this module and tensors.py were written for: a config of any
# other model_type fails closed rather than being sized as a generic decoder.
_DENSE = {
    "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3", "gemma3_text", "glm4", "glm",
    "cohere", "cohere2", "minicpm", "ernie4_5", "granite", "gemma4", "gemma4_text", "ministral", "mistral3_text",
    "ministral3",
}
_MOE = {
    "mixtral", "qwen2_moe", "qwen3_moe", "llama4", "llama4_text", "deepseek_v2", "deepseek_v3",
    "deepseek_v32", "deepseek_v4", "kimi_k2", "glm4_moe", "glm_moe_dsa", "gpt_oss", "minimax_m2", "ernie4_5_moe",
    "hunyuan_v1_moe", "hunyuan",
}
_HYBRID = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "jamba",
           "nemotron_h", "granitemoehybrid", "falcon_h1", "lfm2", "lfm2_moe"}
SUPPORTED = sorted(_DENSE | _MOE | _HYBRID)

# Published architectures whose sizing needs modelling fitprobe does not have yet: a config of one
# of them fails closed naming what is missing (and where an engine models it), never sized as a guess.
UNMODELLED = {
    **dict.fromkeys(("glm5_next", "glm5_next_text"), (
        "Kimi-delta-attention (KDA) recurrent state on linear_attention layers, MLA without RoPE "
        "(qk_rope_head_dim 0), manifold hyper-connections (mhc, hc_mult) and the DSA indexer's pooled keys "
        "(index_kpool) are not modelled (llama.cpp b11434 models them in src/models/glm5-next.cpp)")),
    **dict.fromkeys(("kimi_linear", "kimi_k3"), (
        "KDA linear-attention state (linear_attn_config), block attention residuals (attn_res_block_size), "
        "latent routed experts (routed_expert_hidden_size) and the MLA output gate are not modelled "
        "(llama.cpp b11434 models them in src/models/kimi-linear.cpp and kimi-k3.cpp)")),
    **dict.fromkeys(("step3p5", "step3p7"), (
        "per-layer-type attention geometry (attention_other_setting: more query heads on sliding layers), "
        "head-wise attention gates and MoE placement from moe_layers_enum are not modelled "
        "(llama.cpp b11434 models them in src/models/step35.cpp)")),
}

# transformers' default for tie_word_embeddings when a config leaves it out, per family.
_TIE_DEFAULT = {"gemma": True, "gemma2": True, "gemma3": True, "gemma3_text": True, "cohere": True,
                "cohere2": True, "gemma4": True, "gemma4_text": True, "lfm2": True, "minicpm": False}


# transformers config-class defaults for keys that published configs omit because they equal the
# default (Gemma 3 repos list only non-default text_config keys): Gemma3TextConfig.__init__.
_FAMILY_DEFAULTS = {
    "gemma3_text": {"vocab_size": 262_208, "max_position_embeddings": 131_072, "sliding_window_pattern": 6,
                    "head_dim": 256, "num_attention_heads": 8, "num_key_value_heads": 4, "sliding_window": 4096},
}


# ---------------------------------------------------------------- boundary validation
#
# Every key the parser reads, with the type and range a real model can have. A config whose value
# has another type, or a size no model has, fails here with the field named, before anything is
# sized from it. Limits sit far above every published model (Llama 3.1 405B: 126 layers, hidden
# 16384; Kimi K2: 384 experts; Gemma 3: 262K vocabulary) and far below what exhausts memory.
MAX_LAYERS = 4096
MAX_WIDTH = 1 << 22  # hidden / FFN / latent widths
MAX_HEADS = 1 << 16
MAX_VOCAB = 1 << 24
MAX_POSITIONS = 1 << 30
MAX_EXPERTS = 1 << 14
MAX_CONFIG_BYTES = 32 << 20  # published config.json files are kilobytes


class _Count:
    """An integer in [low, high]; shape "list" wants a list of them (layer indexes), "either" one
    or a non-empty list (per-layer values, of which the parser reads the first)."""

    def __init__(self, low: int, high: int, *, shape: str = "int"):
        self.low, self.high, self.shape = low, high, shape

    def _fits(self, value: Any) -> bool:
        return not isinstance(value, bool) and isinstance(value, int) and self.low <= value <= self.high

    def check(self, value: Any) -> str | None:
        if isinstance(value, list) and self.shape != "int":
            if (value or self.shape == "list") and len(value) <= 4 * MAX_LAYERS and all(map(self._fits, value)):
                return None
        elif self.shape != "list" and self._fits(value):
            return None
        kind = "a positive integer" if self.low == 1 else "a non-negative integer" if self.low == 0 else "an integer"
        one = f"{kind} of at most {self.high:,}"
        if self.shape == "list":
            return f"a list of integers in [{self.low}, {self.high:,}]"
        return one + (" (or a non-empty list of them)" if self.shape == "either" else "")


class _Type:
    """A JSON value of one of `types` (bool is never a number); `items` checks a list's elements."""

    def __init__(self, *types: type, items: type | None = None, what: str):
        self.types, self.items, self.what = types, items, what

    def check(self, value: Any) -> str | None:
        if isinstance(value, bool) and bool not in self.types:
            return self.what
        if not isinstance(value, self.types):
            return self.what
        if self.items is not None and any(isinstance(v, bool) or not isinstance(v, self.items) for v in value):
            return self.what
        if isinstance(value, float) and value != value:  # NaN
            return self.what
        return None


_LAYERS, _LAYERS0 = _Count(1, MAX_LAYERS), _Count(0, MAX_LAYERS)
_WIDTH, _WIDTH0, _WIDTHS0 = _Count(1, MAX_WIDTH), _Count(0, MAX_WIDTH), _Count(0, MAX_WIDTH, shape="either")
_HEADS = _Count(1, MAX_HEADS)
_EXPERTS0, _EXPERTS1 = _Count(0, MAX_EXPERTS), _Count(1, MAX_EXPERTS, shape="either")
_FLAG = _Type(bool, int, what="true or false")
_TEXT = _Type(str, what="a string")
_INDEXES = _Count(-1, MAX_LAYERS, shape="list")
_LAYER_RANGE = _Count(-1, MAX_LAYERS, shape="either")
_STRINGS = _Type(list, items=str, what="a list of strings")
_NUMBER = _Type(int, float, what="a number")

_FIELDS: dict[str, Any] = {
    **dict.fromkeys(("model_type",), _TEXT),
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "n_layers"), _LAYERS),
    **dict.fromkeys(("hidden_size", "n_embd", "d_model", "dim"), _WIDTH),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_key_value_heads", "num_kv_heads",
                     "n_head_kv", "multi_query_group_num", "num_global_key_value_heads", "index_n_heads"), _HEADS),
    **dict.fromkeys(("vocab_size", "padded_vocab_size"), _Count(1, MAX_VOCAB)),
    **dict.fromkeys(("index_head_dim", "kv_lora_rank", "v_head_dim", "o_lora_rank", "hc_mult", "o_groups",
                     "linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim",
                     "linear_value_head_dim", "linear_conv_kernel_dim", "mamba_d_state", "mamba_d_conv",
                     "mamba_expand", "mamba_dt_rank", "mamba_num_heads", "mamba_n_heads", "mamba_head_dim",
                     "mamba_d_head", "ssm_state_size", "n_groups", "mamba_n_groups", "conv_kernel", "conv_L_cache",
                     "block_multiple_of"), _WIDTH),
    # 0 means "not set" in published configs (GLM-5.3-Flash head_dim: 0): the parser derives these then
    **dict.fromkeys(("head_dim", "attention_head_dim", "head_size", "global_head_dim", "qk_rope_head_dim",
                     "q_lora_rank", "qk_nope_head_dim", "moe_latent_size", "intermediate_size_mlp",
                     "shared_expert_intermediate_size", "shared_intermediate_size",
                     "moe_shared_expert_intermediate_size"), _WIDTH0),
    **dict.fromkeys(("intermediate_size", "ffn_hidden_size", "n_inner", "moe_intermediate_size",
                     "expert_intermediate_size"), _WIDTHS0),
    **dict.fromkeys(("max_position_embeddings", "seq_length", "max_sequence_length", "n_positions",
                     "sliding_window", "attention_chunk_size"), _Count(1, MAX_POSITIONS)),
    **dict.fromkeys(("sliding_window_pattern", "_sliding_window_pattern", "full_attention_interval",
                     "attn_layer_period", "expert_layer_period", "no_rope_layer_interval", "moe_layer_freq",
                     "decoder_sparse_step", "interleave_moe_layer_step", "moe_layer_interval"), _LAYERS),
    **dict.fromkeys(("attn_layer_offset", "expert_layer_offset", "max_window_layers", "first_k_dense_replace",
                     "num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers"), _LAYERS0),
    **dict.fromkeys(("moe_layer_start_index", "moe_layer_end_index"), _LAYER_RANGE),
    **dict.fromkeys(("mlp_only_layers", "moe_layers", "full_attn_idxs", "no_rope_layers"), _INDEXES),
    **dict.fromkeys(("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts", "n_experts"),
                    _EXPERTS0),
    **dict.fromkeys(("num_experts_per_tok", "experts_per_token", "moe_k", "moe_topk", "num_experts_per_token",
                     "top_k_experts"), _EXPERTS1),
    **dict.fromkeys(("n_shared_experts", "num_shared_experts", "moe_num_shared_experts", "num_shared_expert"),
                    _Count(0, MAX_EXPERTS, shape="either")),
    "compress_ratios": _Count(0, MAX_POSITIONS, shape="list"),
    "num_key_value_heads_per_layer": _Count(0, MAX_HEADS, shape="list"),
    **dict.fromkeys(("layer_types", "layers_block_type", "mlp_layer_types"), _STRINGS),
    **dict.fromkeys(("hybrid_override_pattern", "expert_dtype", "torch_dtype", "dtype"), _TEXT),
    **dict.fromkeys(("tie_word_embeddings", "use_sliding_window", "attention_bias", "bias", "qkv_bias",
                     "use_qk_norm", "qk_layernorm", "attention_k_eq_v", "block_auto_adjust_ff_dim",
                     "enable_moe_block"), _FLAG),
    "block_ffn_dim_multiplier": _NUMBER,  # LFM2: 1.0 .. 1.5; bounded in validate_config
}
_VISION_FIELDS: dict[str, Any] = {
    **dict.fromkeys(("num_hidden_layers", "depth", "n_layers", "num_layers", "vt_num_hidden_layers"), _LAYERS0),
    **dict.fromkeys(("hidden_size", "embed_dim", "width", "d_model", "vt_hidden_size", "patch_size",
                     "num_channels"), _WIDTH),
    **dict.fromkeys(("intermediate_size", "mlp_dim", "vt_intermediate_size"), _WIDTH0),
}
_QUANT_FIELDS: dict[str, Any] = {
    **dict.fromkeys(("bits", "w_bit", "num_bits"), _Type(int, float, what="a number of bits")),
    **dict.fromkeys(("group_size", "q_group_size"), _Count(-1, MAX_WIDTH)),
    **dict.fromkeys(("quant_method", "quant_algo", "fmt", "format", "type"), _TEXT),
    **dict.fromkeys(("load_in_4bit", "load_in_8bit"), _FLAG),
    **dict.fromkeys(("modules_to_not_convert", "ignore", "ignored_layers"), _STRINGS),
    "config_groups": _Type(dict, what="an object"),
}


def _check_fields(cfg: dict, table: dict[str, Any], where: str, prefix: str = "") -> None:
    for key, rule in table.items():
        value = cfg.get(key)
        if value is None:
            continue
        problem = rule.check(value)
        if problem is not None:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise SpecError(msg("%(where)s field %(prefix)s%(key)s must be %(problem)s, got %(shown)s",
                                where=where, prefix=prefix, key=key, problem=problem, shown=shown))


def _check_quant(q: Any, where: str, prefix: str) -> None:
    if q is None:
        return
    if not isinstance(q, dict):
        raise SpecError(msg("%(where)s field %(prefix)squantization_config must be an object",
                            where=where, prefix=prefix))
    _check_fields(q, _QUANT_FIELDS, where, prefix + "quantization_config.")
    for key in ("bits", "w_bit"):
        if q.get(key) is not None and not 1 <= q[key] <= 64:
            raise SpecError(msg("%(where)s field %(prefix)squantization_config.%(key)s must be between 1 and 64, got "
                                "%(value)s", where=where, prefix=prefix, key=key, value=repr(q[key])))
    for name, group in (q.get("config_groups") or {}).items():
        weights = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(group, dict) or not isinstance(weights, (dict, type(None))):
            raise SpecError(msg("%(where)s field %(prefix)squantization_config.config_groups.%(name)s must be an "
                                "object", where=where, prefix=prefix, name=name))
        _check_fields(weights or {}, _QUANT_FIELDS, where, f"{prefix}quantization_config.config_groups.{name}.weights.")


def validate_config(config: Any, where: str = "config.json") -> None:
    """Raise SpecError naming the field when a value the parser reads has the wrong type or an
    impossible size; nested text/vision/quantization configs are checked under their own names."""
    if not isinstance(config, dict) or not config:
        raise SpecError(msg("%(where)s is empty or not a JSON object", where=where))
    _check_fields(config, _FIELDS, where)
    _check_quant(config.get("quantization_config"), where, "")
    for key in _NESTED_TEXT_KEYS:
        nested = config.get(key)
        if nested is not None and not isinstance(nested, dict):
            raise SpecError(msg("%(where)s field %(key)s must be an object", where=where, key=key))
        if nested:
            _check_fields(nested, _FIELDS, where, key + ".")
            _check_quant(nested.get("quantization_config"), where, key + ".")
    for key in ("vision_config", "vision_encoder", "visual"):
        vision = config.get(key)
        if vision is not None and not isinstance(vision, dict):
            raise SpecError(msg("%(where)s field %(key)s must be an object", where=where, key=key))
        if vision:
            _check_fields(vision, _VISION_FIELDS, where, key + ".")
    for holder in (config, *(config.get(k) for k in _NESTED_TEXT_KEYS if isinstance(config.get(k), dict))):
        multiplier = holder.get("block_ffn_dim_multiplier")
        if multiplier is not None and not 0 < multiplier <= 100:
            raise SpecError(msg("%(where)s field block_ffn_dim_multiplier must be in (0, 100], got %(multiplier)s",
                                where=where, multiplier=repr(multiplier)))


def parse_config_bytes(raw: bytes, where: str) -> dict:
    """config.json bytes -> dict, or SpecError naming the file: not UTF-8 (binary, UTF-16), not
    JSON, nested deeper than the parser goes, an integer of thousands of digits, not an object."""
    if len(raw) > MAX_CONFIG_BYTES:
        raise SpecError(msg("%(where)s is %(size)s MiB: not a config.json",
                            where=where, size=Num(len(raw) / (1 << 20), ".0f")))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SpecError(msg("%(where)s is not UTF-8 text (a binary file, or UTF-16)", where=where)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(msg("%(where)s is not valid JSON (line %(line)s: %(reason)s)",
                            where=where, line=exc.lineno, reason=exc.msg)) from None
    except RecursionError:
        raise SpecError(msg("%(where)s nests JSON deeper than any config does", where=where)) from None
    except ValueError as exc:  # an integer beyond Python's digit limit
        raise SpecError(msg("%(where)s holds a number no config has (%(number)s)",
                            where=where, number=str(exc).split(":")[0])) from None
    if not isinstance(data, dict):
        raise SpecError(msg("%(where)s does not hold a JSON object", where=where))
    return data


def _first(cfg: dict, *keys: str) -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


class _Reader:
    """Reads keys from a config, collecting every missing one before failing."""

    def __init__(self, cfg: dict, arch: str):
        self.cfg, self.arch, self.missing = cfg, arch, []

    def need(self, *keys: str) -> Any:
        value = _first(self.cfg, *keys)
        if value is None:
            self.missing.append(" or ".join(keys))
        return value

    def get(self, *keys: str, default: Any = None) -> Any:
        value = _first(self.cfg, *keys)
        return default if value is None else value

    def check(self) -> None:
        if self.missing:
            raise SpecError(msg("config.json for architecture '%(arch)s' is missing: %(missing)s",
                                arch=self.arch, missing=", ".join(self.missing)))


def _text_config(cfg: dict) -> tuple[dict, dict | None]:
    """The language-model part of a config, and the vision part if the model has one."""
    vision = _first(cfg, "vision_config", "vision_encoder", "visual")
    for key in _NESTED_TEXT_KEYS:
        nested = cfg.get(key)
        if isinstance(nested, dict) and nested:
            merged = {k: v for k, v in cfg.items() if k not in _NESTED_TEXT_KEYS}
            merged.update(nested)
            if "model_type" not in nested:
                merged["model_type"] = cfg.get("model_type")
            for key2 in ("tie_word_embeddings", "quantization_config", "torch_dtype", "dtype"):
                if key2 in cfg and key2 not in nested:
                    merged[key2] = cfg[key2]
            return merged, vision if isinstance(vision, dict) else None
    return cfg, vision if isinstance(vision, dict) else None


def vision_tower_params(vision: dict | None) -> int:
    """ViT parameters: per layer 4·d² attention + 2·d·ff MLP (+ norms/bias), plus patch embedding.

    Standard ViT block accounting (Dosovitskiy et al. 2020); a projector of d_vision × d_text is
    not counted separately because configs rarely state its shape.
    """
    if not vision:
        return 0
    depth = _first(vision, "num_hidden_layers", "depth", "n_layers", "num_layers", "vt_num_hidden_layers")
    width = _first(vision, "hidden_size", "embed_dim", "width", "d_model", "vt_hidden_size")
    if not depth or not width:
        return 0
    ff = _first(vision, "intermediate_size", "mlp_dim", "vt_intermediate_size") or 4 * width
    patch = vision.get("patch_size") or 14
    channels = vision.get("num_channels") or 3
    per_layer = 4 * width * width + 2 * width * ff + 9 * width + ff
    return int(depth * per_layer + channels * patch * patch * width)


def _layer_kinds_from_types(types: list[str]) -> list[str]:
    mapping = {
        "full_attention": "full", "attention": "full", "global": "full",
        "sliding_attention": "sliding", "sliding": "sliding", "local": "sliding",
        "chunked_attention": "chunked",
        "linear_attention": "linear",
        "mamba": "mamba", "mamba2": "mamba",
        "conv": "conv",
    }
    kinds = []
    for t in types:
        if t not in mapping:
            raise SpecError(msg("unknown layer type '%(t)s' in layer_types", t=t))
        kinds.append(mapping[t])
    return kinds


def _prequant(cfg: dict) -> PreQuant | None:
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        return None
    method = str(q.get("quant_method") or "unknown").lower()
    fmt_hint = q.get("quant_algo")
    bits = q.get("bits") or q.get("w_bit")
    fmt = q.get("fmt") or q.get("format") or fmt_hint
    group = q.get("group_size") or q.get("q_group_size")
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        for grp in groups.values():
            w = (grp or {}).get("weights") or {}
            bits = bits or w.get("num_bits")
            group = group or w.get("group_size")
            fmt = fmt or w.get("type")
    if method == "bitsandbytes":
        bits = 4 if q.get("load_in_4bit") else 8 if q.get("load_in_8bit") else bits
    if method == "unknown" and q.get("quant_algo"):
        method = "modelopt"  # ModelOpt NVFP4/FP8 checkpoints name only quant_algo
    skip = q.get("modules_to_not_convert") or q.get("ignore") or q.get("ignored_layers") or []
    expert_bpw = 4.25 if str(cfg.get("expert_dtype", "")).lower() in ("fp4", "mxfp4") else None
    return PreQuant(method=method, bits=float(bits) if bits else None, expert_bpw=expert_bpw,
                    group_size=int(group) if isinstance(group, int) and group > 0 else None,
                    fmt=str(fmt) if fmt else None, modules_not_converted=[str(s) for s in skip])


def spec_from_config(config: dict, *, name: str, hf_id: str | None = None, where: str = "config.json") -> ModelSpec:
    """Normalize a config.json dict into a ModelSpec, or raise SpecError naming what is missing
    or impossible (`where` names the file in the message)."""
    if not isinstance(config, dict) or not config:
        raise SpecError(msg("%(where)s is empty or not a JSON object", where=where))
    outer_arch = str(config.get("model_type") or "")
    cfg, vision = _text_config(config)
    arch = str(cfg.get("model_type") or outer_arch or "")
    if not arch:
        archs = config.get("architectures") or []
        raise SpecError(msg("config.json has no model_type (architectures: %(archs)s)", archs=archs or "none"))
    if arch not in SUPPORTED and outer_arch in SUPPORTED:
        arch = outer_arch
    if arch not in SUPPORTED and (arch in UNMODELLED or outer_arch in UNMODELLED):
        known = arch if arch in UNMODELLED else outer_arch
        raise SpecError(f"architecture '{known}' cannot be sized yet: {UNMODELLED[known]}")
    if arch not in SUPPORTED:
        raise SpecError(
            msg("unknown architecture '%(arch)s': fitprobe cannot size it without knowing its layer layout "
                "(supported: %(supported)s)", arch=arch, supported=", ".join(SUPPORTED))
        )
    validate_config(config, where)
    cfg = _expand_block_types(arch, cfg)
    defaults = {k: v for k, v in _FAMILY_DEFAULTS.get(arch, {}).items() if cfg.get(k) is None}
    if defaults and not cfg.get("layer_types"):
        cfg = {**cfg, **defaults}
    elif defaults:
        defaults.pop("sliding_window_pattern", None)
        cfg = {**cfg, **defaults}
    r = _Reader(cfg, arch)
    n_layers = r.need("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    hidden = r.need("hidden_size", "n_embd", "d_model", "dim")
    n_heads = r.need("num_attention_heads", "n_head", "n_heads")
    vocab = r.need("vocab_size", "padded_vocab_size")
    r.check()
    _positive(num_hidden_layers=n_layers, hidden_size=hidden, num_attention_heads=n_heads, vocab_size=vocab)
    n_kv = r.get("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num", default=n_heads)
    head_dim = r.get("head_dim", "attention_head_dim", "head_size", default=None) or hidden // n_heads
    ff = r.get("intermediate_size", "ffn_hidden_size", "n_inner", default=0)
    if cfg.get("block_auto_adjust_ff_dim") and isinstance(ff, int):
        # LFM2: the real FFN width is 2/3 of block_ff_dim, times the multiplier, rounded up to
        # block_multiple_of (transformers Lfm2MLP)
        ff = int(2 * ff / 3)
        ff = int((cfg.get("block_ffn_dim_multiplier") or 1.0) * ff)
        multiple = cfg.get("block_multiple_of") or 256
        ff = multiple * -(-ff // multiple)
    max_ctx = r.get("max_position_embeddings", "seq_length", "max_sequence_length", "n_positions", default=None)
    if max_ctx is None:
        r.missing.append("max_position_embeddings")
    tie = cfg.get("tie_word_embeddings", config.get("tie_word_embeddings"))
    if tie is None:
        tie = _TIE_DEFAULT.get(arch, False)
    _positive(num_key_value_heads=n_kv, head_dim=head_dim)
    if n_kv > n_heads:
        raise SpecError(msg("%(where)s: num_key_value_heads (%(n_kv)s) exceeds num_attention_heads (%(n_heads)s)",
                            where=where, n_kv=n_kv, n_heads=n_heads))
    if not isinstance(ff, int) or ff < 0:
        raise SpecError(msg("config.json field intermediate_size must be a non-negative integer, got %(ff)s",
                            ff=repr(ff)))
    if max_ctx is not None and (not isinstance(max_ctx, int) or max_ctx <= 0):
        raise SpecError(msg("config.json field max_position_embeddings must be a positive integer, got %(max_ctx)s",
                            max_ctx=repr(max_ctx)))
    fields: dict[str, Any] = dict(
        name=name, architecture=arch, hf_id=hf_id, n_layers=n_layers, hidden_size=hidden,
        vocab_size=vocab, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim, v_head_dim=head_dim,
        intermediate_size=ff or 0, tied_embeddings=bool(tie), max_context=max_ctx or 1,
        attention_bias=bool(r.get("attention_bias", "bias", default=False)),
        qkv_bias=arch in ("qwen2", "qwen2_moe") or bool(r.get("qkv_bias", default=False)),
        # Llama 4's use_qk_norm is a weightless L2 norm (transformers Llama4TextL2Norm; no tensor in llama4.cpp)
        qk_norm=arch.startswith(("qwen3", "gemma3", "gemma4", "lfm2")) or (
            not arch.startswith("llama4") and bool(r.get("use_qk_norm", "qk_layernorm", default=False))),
        post_norms=arch.startswith(("gemma2", "gemma3", "gemma4", "glm4")) and arch != "glm4_moe",
        native_dtype=str(config.get("torch_dtype") or config.get("dtype") or cfg.get("torch_dtype") or "bfloat16"),
        prequant=_prequant(config) or _prequant(cfg),
        yarn=_yarn(cfg, max_ctx),
        vision_params=vision_tower_params(vision),
        defaults_used=sorted(defaults),
        mtp_layers=int(r.get("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers", default=0) or 0),
    )
    kinds = _attention_pattern(arch, cfg, n_layers, r)
    window = _window(arch, cfg)
    ffn_kinds, moe = _ffn_pattern(arch, cfg, n_layers, ff, r)
    if any(kind == "dense" and not width for kind, width in ffn_kinds):
        r.missing.append("intermediate_size (dense FFN layers need a width)")
    if moe is not None and not moe.expert_ffn:
        r.missing.append("moe_intermediate_size (experts need a width)")
    if arch in ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa") or (
        cfg.get("kv_lora_rank") and cfg.get("qk_rope_head_dim") and arch != "deepseek_v4"
    ):
        mla = MLA(
            kv_lora_rank=r.need("kv_lora_rank") or 1, q_lora_rank=cfg.get("q_lora_rank"),
            qk_rope_head_dim=r.need("qk_rope_head_dim") or 1,
            qk_nope_head_dim=r.need("qk_nope_head_dim") or 1, v_head_dim=r.need("v_head_dim") or 1,
        )
        fields.update(mla=mla, n_kv_heads=n_heads, head_dim=mla.qk_nope_head_dim + mla.qk_rope_head_dim,
                      v_head_dim=mla.v_head_dim)
        if cfg.get("index_head_dim") and cfg.get("index_n_heads"):
            types = cfg.get("indexer_types") or []
            fields["indexer"] = Indexer(n_heads=cfg["index_n_heads"], head_dim=cfg["index_head_dim"],
                                        top_k=cfg.get("index_topk") or 0,
                                        shared_layers=[i for i, t in enumerate(types) if t == "shared"])
    if arch == "gpt_oss":
        fields.update(attention_sinks=True, attention_bias=True)
    if arch in ("glm4", "glm4_moe") and fields["attention_bias"]:
        # attention_bias puts biases on q/k/v only, o_proj has none (transformers Glm4MoeAttention;
        # llama.cpp glm4-moe.cpp creates no attn_output.bias)
        fields.update(attention_bias=False, qkv_bias=True)
    if arch == "deepseek_v4":
        fields.update(hc_mult=r.need("hc_mult") or 1, o_groups=r.need("o_groups") or 1,
                      o_lora_rank=r.need("o_lora_rank") or 1, n_kv_heads=1, attention_sinks=True,
                      q_lora_rank=r.need("q_lora_rank") or 1, v_head_dim=head_dim)
        fields["indexer"] = Indexer(n_heads=r.need("index_n_heads") or 1, head_dim=r.need("index_head_dim") or 1,
                                    top_k=cfg.get("index_topk") or 0)
    if arch in ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"):
        fields["gated_attention_output"] = True
    fields["ssm"] = _ssm(arch, cfg, hidden, r)
    r.check()
    kv_override = _per_layer_kv_heads(cfg, n_layers)
    ratios = _compress_ratios(arch, cfg, n_layers)
    global_heads, global_dim = cfg.get("num_global_key_value_heads"), cfg.get("global_head_dim")
    layers = []
    for i in range(n_layers):
        kind = kinds[i]
        if kind == "full" and (global_heads or global_dim):  # Gemma 4: global layers have their own KV shape
            kv_override = kv_override or [fields["n_kv_heads"]] * n_layers
            kv_override[i] = global_heads or fields["n_kv_heads"]
        layers.append(Layer(
            head_dim=global_dim if kind == "full" and global_dim else None,
            k_eq_v=kind == "full" and bool(cfg.get("attention_k_eq_v")),
            attention=kind, ffn=ffn_kinds[i][0], ffn_size=ffn_kinds[i][1],
            n_kv_heads=(kv_override[i] if kv_override else fields["n_kv_heads"]) if kind in ("full", "sliding", "chunked", "compressed") else 0,
            window=window if kind in ("sliding", "chunked", "compressed") else None,
            compress_ratio=ratios[i],
        ))
    if any(layer.attention in ("sliding", "chunked") for layer in layers) and not window:
        raise SpecError(msg("config.json for '%(arch)s' declares sliding/chunked layers but no window size "
                            "(sliding_window / attention_chunk_size)", arch=arch))
    return ModelSpec(layers=layers, moe=moe, **fields)


def _expand_block_types(arch: str, cfg: dict) -> dict:
    """Nemotron-H configs may list layers_block_type instead of num_hidden_layers + a pattern string."""
    types = cfg.get("layers_block_type")
    if arch != "nemotron_h" or not isinstance(types, list) or cfg.get("hybrid_override_pattern"):
        return cfg
    codes = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
    if any(t not in codes for t in types):
        raise SpecError(msg("unknown entry in layers_block_type: %(codes)s", codes=sorted(set(types) - set(codes))))
    out = dict(cfg)
    out["hybrid_override_pattern"] = "".join(codes[t] for t in types)
    out.setdefault("num_hidden_layers", len(types))
    return out


def _positive(**values: Any) -> None:
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SpecError(msg("config.json field %(key)s must be a positive integer, got %(value)s",
                                key=key, value=repr(value)))


def _per_layer_kv_heads(cfg: dict, n_layers: int) -> list[int] | None:
    per_layer = cfg.get("num_key_value_heads_per_layer")
    if isinstance(per_layer, list) and len(per_layer) == n_layers:
        return [int(v) for v in per_layer]
    return None


def _compress_ratios(arch: str, cfg: dict, n: int) -> list[int]:
    """DeepSeek V4 compress_ratios: one per layer (+ the MTP layer); 0 = sliding window only."""
    if arch != "deepseek_v4":
        return [0] * n
    ratios = cfg.get("compress_ratios")
    if not isinstance(ratios, list) or len(ratios) < n:
        raise SpecError(msg("config.json for 'deepseek_v4' is missing: compress_ratios (one per layer)"))
    return [int(x) for x in ratios[:n]]


def _window(arch: str, cfg: dict) -> int | None:
    if arch in ("llama4", "llama4_text"):
        return cfg.get("attention_chunk_size")
    return cfg.get("sliding_window")


def _attention_pattern(arch: str, cfg: dict, n: int, r: _Reader) -> list[str]:
    """Which layers attend fully, in a window, in chunks, or recurrently."""
    types = cfg.get("layer_types")
    if arch == "nemotron_h":
        pattern = r.need("hybrid_override_pattern") or ""
        if len(pattern) != n:
            raise SpecError(msg("hybrid_override_pattern has %(n_pattern)s entries for %(n)s layers",
                                n_pattern=len(pattern), n=n))
        return ["mamba" if c == "M" else "full" if c == "*" else "none" for c in pattern]
    if arch == "falcon_h1":
        return ["full"] * n  # every block runs attention and a Mamba-2 mixer in parallel
    if arch == "deepseek_v4":
        ratios = _compress_ratios(arch, cfg, n)
        return ["sliding" if x == 0 else "compressed" for x in ratios]
    if isinstance(types, list) and types:
        if len(types) != n:
            raise SpecError(msg("layer_types has %(n_types)s entries for %(n)s layers", n_types=len(types), n=n))
        return _layer_kinds_from_types(types)
    if arch in ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"):
        interval = r.need("full_attention_interval") or 4
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(n)]
    if arch == "jamba":
        period, offset = r.need("attn_layer_period"), r.need("attn_layer_offset")
        if period is None or offset is None:
            return ["full"] * n
        return ["full" if i % period == offset else "mamba" for i in range(n)]
    if arch in ("gemma2",):
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]
    if arch in ("gemma3", "gemma3_text", "cohere2", "gemma4", "gemma4_text"):
        step = cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern")
        if not step:
            raise SpecError(msg("config.json for '%(arch)s' is missing: layer_types or sliding_window_pattern",
                                arch=arch))
        return ["full" if (i + 1) % step == 0 else "sliding" for i in range(n)]
    if arch in ("llama4", "llama4_text"):
        no_rope = cfg.get("no_rope_layers")
        if isinstance(no_rope, list) and len(no_rope) == n:
            # no_rope_layers[i] == 0 marks a NoPE layer, which attends globally (transformers Llama4TextConfig)
            return ["full" if v == 0 else "chunked" for v in no_rope]
        step = cfg.get("no_rope_layer_interval") or 4
        return ["full" if (i + 1) % step == 0 else "chunked" for i in range(n)]
    if arch == "mistral" and cfg.get("sliding_window"):
        return ["sliding"] * n  # Mistral 7B v0.1: every layer uses the 4096 window
    if arch in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe") and cfg.get("use_sliding_window") and cfg.get("sliding_window"):
        cutoff = cfg.get("max_window_layers") or n
        return ["sliding" if i >= cutoff else "full" for i in range(n)]
    if arch == "granitemoehybrid":
        raise SpecError(msg("config.json for 'granitemoehybrid' is missing: layer_types"))
    if arch in ("lfm2", "lfm2_moe"):
        full = r.need("full_attn_idxs")
        return ["full" if i in (full or []) else "conv" for i in range(n)]
    return ["full"] * n


def _ffn_pattern(arch: str, cfg: dict, n: int, ff: int, r: _Reader):
    """Per-layer (kind, width) of the FFN, and the MoE description if there is one."""
    if arch in ("gemma4", "gemma4_text") and cfg.get("enable_moe_block"):
        return _gemma4_moe(cfg, n, ff, r)
    if arch not in _MOE and arch not in ("qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text", "jamba",
                                         "nemotron_h", "granitemoehybrid", "lfm2_moe"):
        return [("dense", ff)] * n, None
    n_exp = r.get("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts", "n_experts")
    if not n_exp:
        if arch in ("nemotron_h", "jamba", "granitemoehybrid"):
            return _hybrid_dense_ffn(arch, cfg, n, ff), None
        r.need("num_experts or num_local_experts or n_routed_experts")
        return [("dense", ff)] * n, None
    used = r.need("num_experts_per_tok", "experts_per_token", "moe_k", "moe_topk", "num_experts_per_token")
    if isinstance(used, list):
        used = used[0]
    expert_ff = r.get("moe_intermediate_size", "expert_intermediate_size")
    if isinstance(expert_ff, list):
        expert_ff = expert_ff[0]
    if arch in ("mixtral", "gpt_oss", "jamba", "minimax_m2", "granitemoehybrid") or not expert_ff:
        expert_ff = ff
    shared = r.get("n_shared_experts", "num_shared_experts", "moe_num_shared_experts", "num_shared_expert", default=0)
    if isinstance(shared, list):
        shared = shared[0]
    shared_ff = r.get("shared_expert_intermediate_size", "shared_intermediate_size",
                      "moe_shared_expert_intermediate_size", default=None)
    if arch in ("llama4", "llama4_text"):
        shared, shared_ff = 1, expert_ff
    if shared and not shared_ff:
        shared_ff = expert_ff * shared
    if shared_ff and not shared:
        shared = 1
    dense_ff = ff
    if arch in ("llama4", "llama4_text"):
        dense_ff = r.get("intermediate_size_mlp", default=ff)
    if used and used > n_exp:
        raise SpecError(msg("config.json routes %(used)s experts per token but has only %(n_exp)s",
                            used=used, n_exp=n_exp))
    moe = MoE(n_experts=n_exp, n_experts_used=used or 1, expert_ffn=expert_ff or 0,
              n_shared_experts=int(shared or 0), shared_ffn=int(shared_ff or 0),
              expert_bias=arch == "gpt_oss", latent_size=int(cfg.get("moe_latent_size") or 0))
    is_moe = _moe_layers(arch, cfg, n, r)
    if arch == "nemotron_h":
        pattern = cfg.get("hybrid_override_pattern") or ""
        return [("moe", 0) if c == "E" else ("dense", ff) if c == "-" else ("none", 0) for c in pattern], moe
    return [("moe", 0) if is_moe[i] else ("dense", dense_ff) for i in range(n)], moe


def _gemma4_moe(cfg: dict, n: int, ff: int, r: _Reader):
    """Gemma 4 MoE (26B-A4B): every layer keeps its dense FFN of intermediate_size and adds routed
    experts beside it (transformers Gemma4TextDecoderLayer with enable_moe_block; llama.cpp
    src/models/gemma4.cpp: 'for expert layers, we use normal FFN as shared expert'). The layer width
    stays the dense FFN's; the MoE record carries the experts."""
    n_exp = r.need("num_experts")
    used = r.need("top_k_experts", "num_experts_per_tok")
    expert_ff = r.need("moe_intermediate_size")
    if None in (n_exp, used, expert_ff):
        return [("dense", ff)] * n, None
    if used > n_exp:
        raise SpecError(f"config.json routes {used} experts per token but has only {n_exp}")
    moe = MoE(n_experts=n_exp, n_experts_used=used, expert_ffn=expert_ff)
    return [("moe", ff)] * n, moe


def _hybrid_dense_ffn(arch: str, cfg: dict, n: int, ff: int):
    if arch == "nemotron_h":
        pattern = cfg.get("hybrid_override_pattern") or ""
        return [("dense", ff) if c == "-" else ("none", 0) for c in pattern]
    return [("dense", ff)] * n


def _moe_layers(arch: str, cfg: dict, n: int, r: _Reader) -> list[bool]:
    """Which layers are MoE: first_k_dense_replace, decoder_sparse_step, interleave steps, mlp_only_layers."""
    first_dense = cfg.get("first_k_dense_replace") or 0
    freq = cfg.get("moe_layer_freq") or cfg.get("decoder_sparse_step") or cfg.get("interleave_moe_layer_step") or 1
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    if arch.startswith("ernie4_5"):  # MoE from moe_layer_start_index to moe_layer_end_index, every interval
        start, end = cfg.get("moe_layer_start_index") or 0, cfg.get("moe_layer_end_index")
        start = start[0] if isinstance(start, list) else start
        end = (end[-1] if isinstance(end, list) else end) if end is not None else n - 1
        step = cfg.get("moe_layer_interval") or 1
        return [start <= i <= end and (i - start) % step == 0 for i in range(n)]
    if arch == "jamba":
        period = cfg.get("expert_layer_period") or 1
        offset = cfg.get("expert_layer_offset") or 0
        return [i % period == offset for i in range(n)]
    if arch in ("llama4", "llama4_text"):
        moe_layers = cfg.get("moe_layers")
        if isinstance(moe_layers, list):
            return [i in moe_layers for i in range(n)]
        step = cfg.get("interleave_moe_layer_step") or 1
        return [(i + 1) % step == 0 for i in range(n)]
    if isinstance(cfg.get("mlp_layer_types"), list):
        types = cfg["mlp_layer_types"]
        if len(types) != n:
            raise SpecError(msg("config.json field mlp_layer_types has %(n_types)s entries for %(n)s layers",
                                n_types=len(types), n=n))
        return [t == "sparse" for t in types]
    out = []
    for i in range(n):
        moe = i >= first_dense and (i % freq == 0 if arch.startswith("deepseek") else (i + 1) % freq == 0)
        out.append(moe and i not in mlp_only)
    return out


def _ssm(arch: str, cfg: dict, hidden: int, r: _Reader) -> SSM | None:
    """Recurrent-state dimensions, named as llama.cpp's hparams use them."""
    if arch in ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"):
        nv, nk = r.need("linear_num_value_heads"), r.need("linear_num_key_heads")
        dk, dv = r.need("linear_key_head_dim"), r.need("linear_value_head_dim")
        conv = r.need("linear_conv_kernel_dim")
        if None in (nv, nk, dk, dv, conv):
            return None
        return SSM(kind="gdn", d_inner=nv * dv, d_state=dk, d_conv=conv, n_group=nk,
                   n_k_heads=nk, k_head_dim=dk, n_v_heads=nv, v_head_dim=dv)
    if arch == "jamba":
        d_state, d_conv, expand = r.need("mamba_d_state"), r.need("mamba_d_conv"), r.need("mamba_expand")
        if None in (d_state, d_conv, expand):
            return None
        dt_rank = cfg.get("mamba_dt_rank") or -(-hidden // 16)
        return SSM(kind="mamba1", d_inner=expand * hidden, d_state=d_state, d_conv=d_conv, dt_rank=dt_rank)
    if arch in ("nemotron_h", "granitemoehybrid", "falcon_h1"):
        heads = r.need("mamba_num_heads", "mamba_n_heads")
        head_dim = r.need("mamba_head_dim", "mamba_d_head")
        d_state = r.need("ssm_state_size", "mamba_d_state")
        groups = r.get("n_groups", "mamba_n_groups", default=1)
        conv = r.need("conv_kernel", "mamba_d_conv")
        if None in (heads, head_dim, d_state, conv):
            return None
        return SSM(kind="mamba2", d_inner=heads * head_dim, d_state=d_state, d_conv=conv,
                   n_group=groups, n_heads=heads)
    if arch in ("lfm2", "lfm2_moe"):
        cache = r.need("conv_L_cache")
        return SSM(kind="shortconv", d_inner=hidden, d_state=0, d_conv=cache or 3) if cache else None
    return None


def _yarn(cfg: dict, max_ctx, source: str = "config.json rope_scaling") -> Yarn | None:
    """YaRN whose window (factor x original_max_position_embeddings) goes past max_position_embeddings:
    the engines serve it when told to (Qwen3: 32768 x 4 = 131072 against 40960). A config whose
    max_position_embeddings already is the extended window (DeepSeek, gpt-oss) has nothing to add."""
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if not isinstance(rs, dict) or (rs.get("rope_type") or rs.get("type")) != "yarn":
        return None
    factor, original = rs.get("factor"), rs.get("original_max_position_embeddings")
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or not 1 < factor <= 1024:
        return None
    if not isinstance(original, int) or isinstance(original, bool) or original <= 0:
        return None
    extended = int(factor * original)
    if not isinstance(max_ctx, int) or extended <= max_ctx:
        return None
    return Yarn(factor=float(factor), original_context=original, max_context=extended, source=source)


def documented_yarn(spec: ModelSpec, rope_scaling: dict, source: str) -> ModelSpec:
    """The spec with a YaRN its model card documents (config.json leaves rope_scaling off)."""
    yarn = _yarn({"rope_scaling": rope_scaling}, spec.max_context, source)
    return replace(spec, yarn=yarn) if yarn else spec
