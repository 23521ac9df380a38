"""Read a local .gguf header: architecture metadata and every tensor's type, shape and bytes.

Uses the `gguf` package (llama.cpp's own reader; imported lazily). The file is memory-mapped,
tensor data is never read. Split files (`-00001-of-00003.gguf`) are read part by part: the
metadata comes from the first part, the tensors from all of them.
`gguf_to_config` turns the metadata into a Hugging Face style config dict for the spec parser.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fitprobe.estimator.fields import doc, record


class GgufFileError(ValueError):
    """The path is not a readable GGUF file; one-line message."""


@record
class GgufTensor:
    name: str
    shape: list[int]
    ggml_type: str
    n_elements: int
    n_bytes: int


@record
class GgufInfo:
    """Header of a GGUF model (all split parts together)."""

    path: str
    files: list[str]
    architecture: str
    name: str | None = None
    file_type: str | None = None
    metadata: dict[str, Any] = doc(default_factory=dict, description="`<arch>.` prefix stripped")
    vocab_size: int | None = None
    tensors: list[GgufTensor] = doc(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)

    @property
    def total_params(self) -> int:
        return sum(t.n_elements for t in self.tensors)

    def bytes_by_type(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.ggml_type] = out.get(t.ggml_type, 0) + t.n_bytes
        return out


_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<total>\d{5})\.gguf$", re.IGNORECASE)
_MAX_ARRAY = 64  # longer arrays are token lists etc.: sizing never needs them


def _parts(path: Path) -> list[Path]:
    m = _SPLIT.match(path.name)
    if not m:
        return [path]
    total = int(m.group("total"))
    parts = [path.with_name(f"{m.group('stem')}-{i:05d}-of-{total:05d}.gguf") for i in range(1, total + 1)]
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        raise GgufFileError(f"{path.name} is part of a split GGUF but {', '.join(missing)} is missing")
    return parts


def _open(path: Path):
    import gguf

    try:
        return gguf.GGUFReader(path)
    except Exception as e:  # noqa: BLE001 - a third-party parser on untrusted bytes: any failure means "not GGUF"
        raise GgufFileError(f"{path} is not a readable GGUF file ({type(e).__name__}: {str(e)[:120]})") from None


def _value(field) -> Any:
    """A field's value; long arrays are left out (None)."""
    import gguf

    if field.types and field.types[0] == gguf.GGUFValueType.ARRAY and len(field.data) > _MAX_ARRAY:
        return None
    return field.contents()


def read_gguf(path: str | Path) -> GgufInfo:
    """GgufInfo for a local .gguf (first split part or any single file)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise GgufFileError(f"no such GGUF file: {p}")
    try:
        return _read(p)
    except GgufFileError:
        raise
    except Exception as e:  # noqa: BLE001 - values of unexpected types deep in a hostile header
        raise GgufFileError(f"{p} has a malformed GGUF header ({type(e).__name__}: {str(e)[:120]})") from None


def _read(p: Path) -> GgufInfo:
    import gguf

    parts = _parts(p)
    first = _open(parts[0])
    fields = first.fields
    arch_field = fields.get("general.architecture")
    if arch_field is None:
        raise GgufFileError(f"{p.name} has no general.architecture: not a model GGUF")
    arch = arch_field.contents()
    if not isinstance(arch, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", arch):
        raise GgufFileError(f"{p}: GGUF key general.architecture must be a short name string, got {str(arch)[:40]!r}")
    meta: dict[str, Any] = {}
    for key, field in fields.items():
        if key.startswith(arch + "."):
            meta[key[len(arch) + 1:]] = _value(field)
    ft = fields.get("general.file_type")
    file_type = None
    if ft is not None:
        try:
            file_type = gguf.LlamaFileType(ft.contents()).name.removeprefix("MOSTLY_")
        except ValueError:
            file_type = str(ft.contents())
    tokens = fields.get("tokenizer.ggml.tokens")
    vocab = meta.get("vocab_size") or (len(tokens.data) if tokens is not None else None)
    name = fields.get("general.name")

    tensors: list[GgufTensor] = []
    for i, part in enumerate(parts):
        reader = first if i == 0 else _open(part)
        for t in reader.tensors:
            tensors.append(
                GgufTensor(
                    name=t.name,
                    shape=[int(d) for d in t.shape],
                    ggml_type=gguf.GGMLQuantizationType(t.tensor_type).name,
                    n_elements=int(t.n_elements),
                    n_bytes=int(t.n_bytes),
                )
            )
    name = name.contents() if name is not None else None
    return GgufInfo(
        path=str(p), files=[str(x) for x in parts], architecture=arch,
        name=name if isinstance(name, str) else None, file_type=file_type,
        metadata=meta, vocab_size=vocab, tensors=tensors,
    )


# GGUF architecture names whose Hugging Face model_type is spelled differently.
_MODEL_TYPE = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "gpt-oss": "gpt_oss", "gemma3": "gemma3_text"}


def _scalar(v: Any) -> Any:
    """Per-layer arrays (some GGUFs store head counts per layer) -> their maximum."""
    if isinstance(v, list):
        nums = [x for x in v if isinstance(x, (int, float))]
        return max(nums) if nums else None
    return v


# The `<arch>.` keys gguf_to_config reads as sizes: unsigned integers, or per-layer arrays of them.
_INT_KEYS = (
    "block_count", "embedding_length", "attention.head_count", "attention.head_count_kv", "attention.key_length",
    "attention.value_length", "feed_forward_length", "expert_feed_forward_length", "vocab_size", "context_length",
    "attention.sliding_window", "attention.sliding_window_pattern", "expert_count", "expert_used_count",
    "expert_shared_count", "leading_dense_block_count", "attention.kv_lora_rank", "attention.q_lora_rank",
    "rope.dimension_count", "attention.key_length_mla", "attention.value_length_mla", "expert_gating_func",
    "ssm.conv_kernel", "ssm.state_size", "ssm.inner_size", "ssm.time_step_rank", "ssm.group_count",
)


def check_metadata(info: GgufInfo) -> None:
    """GgufFileError naming the key when a size key holds a string, a float, a bool or a negative
    number, or a block count no model has (2^32-1 would be sized as four billion layers)."""
    from fitprobe.estimator.config import MAX_LAYERS

    def ok(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    for key in _INT_KEYS:
        value = info.metadata.get(key)
        if value is None:
            continue
        if not (ok(value) or (isinstance(value, list) and value and all(ok(x) for x in value))):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise GgufFileError(f"{info.path}: GGUF key {info.architecture}.{key} must be a non-negative integer "
                                f"(or a per-layer array of them), got {shown}")
    blocks = info.metadata.get("block_count")
    if isinstance(blocks, int) and not 0 < blocks <= MAX_LAYERS:
        raise GgufFileError(f"{info.path}: GGUF key {info.architecture}.block_count is {blocks:,}: "
                            f"not a model's layer count (1 to {MAX_LAYERS:,})")


def gguf_to_config(info: GgufInfo) -> dict[str, Any]:
    """Hugging Face style config dict from GGUF metadata, enough to size weights and KV.

    MLA (DeepSeek-style): newer GGUFs store head_count_kv=1 and key_length=kv_lora_rank+rope
    (the compressed latent), with the per-head sizes in key_length_mla/value_length_mla; the
    returned config follows the HF convention (num_key_value_heads = attention heads,
    kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim) so MLA is recognised.
    """
    check_metadata(info)
    m = info.metadata
    arch = info.architecture
    cfg: dict[str, Any] = {"model_type": _MODEL_TYPE.get(arch, arch), "gguf_architecture": arch}

    def put(key: str, value: Any) -> None:
        value = _scalar(value)
        if value is not None:
            cfg[key] = value

    put("num_hidden_layers", m.get("block_count"))
    put("hidden_size", m.get("embedding_length"))
    put("num_attention_heads", m.get("attention.head_count"))
    put("num_key_value_heads", m.get("attention.head_count_kv"))
    for k, name in (("attention.head_count", "num_attention_heads"), ("attention.head_count_kv", "num_key_value_heads"),
                    ("feed_forward_length", "intermediate_size")):
        if isinstance(m.get(k), list):  # per-layer values (e.g. layers without attention or FFN)
            cfg[name + "_per_layer"] = m[k]
    put("head_dim", m.get("attention.key_length"))
    if m.get("attention.value_length") not in (None, m.get("attention.key_length")):
        put("v_head_dim", m.get("attention.value_length"))
    if "head_dim" not in cfg and cfg.get("hidden_size") and cfg.get("num_attention_heads"):
        cfg["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]
    put("intermediate_size", m.get("feed_forward_length"))
    put("moe_intermediate_size", m.get("expert_feed_forward_length"))
    put("vocab_size", info.vocab_size)
    put("max_position_embeddings", m.get("context_length"))
    put("rope_theta", m.get("rope.freq_base"))
    put("sliding_window", m.get("attention.sliding_window"))
    if m.get("attention.sliding_window_pattern") is not None:
        cfg["sliding_window_pattern"] = m["attention.sliding_window_pattern"]
    if m.get("expert_count"):
        put("num_local_experts", m.get("expert_count"))
        put("num_experts", m.get("expert_count"))
        put("num_experts_per_tok", m.get("expert_used_count"))
        put("n_shared_experts", m.get("expert_shared_count"))
        put("first_k_dense_replace", m.get("leading_dense_block_count"))

    if m.get("attention.kv_lora_rank"):
        rope = m.get("rope.dimension_count")
        cfg["kv_lora_rank"] = m["attention.kv_lora_rank"]
        put("q_lora_rank", m.get("attention.q_lora_rank"))
        put("qk_rope_head_dim", rope)
        k_head = m.get("attention.key_length_mla") or m.get("attention.key_length")
        v_head = m.get("attention.value_length_mla") or m.get("attention.value_length")
        if m.get("attention.key_length_mla") is not None:
            cfg["key_length_mla"] = m["attention.key_length_mla"]
            cfg["value_length_mla"] = m.get("attention.value_length_mla")
        if k_head and rope:
            cfg["qk_nope_head_dim"] = k_head - rope
        put("v_head_dim", v_head)
        cfg["head_dim"] = k_head
        cfg["num_key_value_heads"] = cfg.get("num_attention_heads")  # HF convention for MLA configs
        cfg["gguf_head_count_kv"] = _scalar(m.get("attention.head_count_kv"))
        if arch == "deepseek2":
            # llama.cpp writes a sigmoid gating function only for DeepSeek-V3-style routers.
            cfg["model_type"] = "deepseek_v3" if m.get("expert_gating_func") == 2 else "deepseek_v2"

    for src, dst in (("ssm.conv_kernel", "ssm_conv_kernel"), ("ssm.state_size", "ssm_state_size"),
                     ("ssm.inner_size", "ssm_inner_size"), ("ssm.time_step_rank", "ssm_time_step_rank"),
                     ("ssm.group_count", "ssm_group_count")):
        put(dst, m.get(src))
    if any(t.name == "token_embd.weight" for t in info.tensors):
        cfg["tie_word_embeddings"] = not any(t.name == "output.weight" for t in info.tensors)
    if info.file_type:
        cfg["gguf_file_type"] = info.file_type
    return cfg
