"""Read a local .gguf header: architecture metadata and every tensor's type, shape and bytes.

A small struct-based reader of the GGUF container (ggml-org/ggml docs/gguf.md: magic, version 2 or 3,
typed key/value pairs, tensor infos; either byte order, as gguf-py's GGUFReader detects it): no numpy,
no `gguf` package at run time. The file is memory-mapped and only its header is walked; every count
and length is checked against the bytes left before it is used, the tensors must lie inside the
file (a truncated download is refused), and the walk has a deadline, so a corrupt or hostile header
is a one-line GgufFileError, never a hang or a traceback. Split files (`-00001-of-00003.gguf`) are
read part by part: the metadata comes from the first part, the tensors from all of them.
`gguf_to_config` turns the metadata into a Hugging Face style config dict for the spec parser.
"""

from __future__ import annotations

import mmap
import re
import struct
import time
from functools import lru_cache
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


@record
class GgmlTypeId:
    id: int = doc(ge=0)
    name: str
    block: int = doc(gt=0, description="elements per block")
    bytes: int = doc(gt=0, description="bytes per block")


@record
class FileTypeId:
    id: int = doc(ge=0)
    name: str


@record
class GgufTypes:
    """The numbered enums a GGUF header stores (catalogs/data/gguf_types.json)."""

    schema: int
    ggml_types_source: str
    ggml_types: list[GgmlTypeId]
    file_types_source: str
    file_types: list[FileTypeId]


@lru_cache(maxsize=1)
def gguf_types() -> tuple[dict[int, GgmlTypeId], dict[int, str]]:
    """(ggml type id -> its type, llama file type id -> its name)."""
    from fitprobe.catalogs import data_path
    from fitprobe.catalogs.validated import load_json_file

    table = load_json_file(GgufTypes, data_path("gguf_types.json"))
    return {t.id: t for t in table.ggml_types}, {t.id: t.name for t in table.file_types}


_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<total>\d{5})\.gguf$", re.IGNORECASE)
_MAX_ARRAY = 64  # longer arrays are token lists etc.: sizing never needs their values, only their length
READ_DEADLINE_S = 10.0  # a header walk that takes longer is hostile (billions of tiny strings)
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_KEY = 1 << 16  # a tensor name longer than this is not a name
_MAX_NESTING = 8  # arrays of arrays: real files nest none (a deep chain would exhaust the stack)

# GGUF value types (gguf.md `gguf_metadata_value_type`): fixed-size scalars as struct codes.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


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


class _Bad(Exception):
    """A header defect found while walking it; worded into a GgufFileError by `_header`."""


class _Header:
    """One file's key/value pairs and tensor infos, walked from the mapped bytes."""

    def __init__(self, buf, deadline: float):
        self.buf, self.size, self.deadline = buf, len(buf), deadline
        if self.size < 24 or bytes(buf[:4]) != b"GGUF":
            raise _Bad("no GGUF magic" if self.size >= 4 else "too short")
        version = struct.unpack_from("<I", buf, 4)[0]
        self.order = "<"
        if version & 0xFFFF == 0 and version:  # written on a big-endian machine (gguf-py's test)
            self.order, version = ">", struct.unpack_from(">I", buf, 4)[0]
        if version not in (2, 3):
            raise _Bad(f"GGUF version {version} (this reader knows 2 and 3)")
        n_tensors, n_kv = struct.unpack_from(self.order + "QQ", buf, 8)
        self.pos = 24
        # the smallest key/value pair is 13 bytes, the smallest tensor info 24: counts past that are lies
        if n_kv > (self.size - self.pos) // 13 or n_tensors > (self.size - self.pos) // 24:
            raise _Bad(f"it declares {n_kv:,} keys and {n_tensors:,} tensors, more than the file can hold")
        self.fields: dict[str, Any] = {}
        self.lengths: dict[str, int] = {}  # arrays: their element count (values of long ones are left out)
        for _ in range(n_kv):
            key = self._string()
            kind = self._unpack("I")
            if kind == _ARRAY:
                self.fields[key], self.lengths[key] = self._array()
            else:
                self.fields[key] = self._value(kind)
        self.tensors = [self._tensor_info() for _ in range(n_tensors)]
        alignment = self.fields.get("general.alignment", 32)
        if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 \
                or alignment & (alignment - 1):
            raise _Bad(f"general.alignment {alignment!r} is not a power of two")
        self.data_start = -(-self.pos // alignment) * alignment

    def _unpack(self, code: str):
        try:
            (value,) = struct.unpack_from(self.order + code, self.buf, self.pos)
        except struct.error:
            raise _Bad(f"it ends inside its header (at byte {self.pos:,})") from None
        self.pos += struct.calcsize(code)
        return value

    def _string(self, limit: int | None = None) -> str:
        n = self._unpack("Q")
        if n > self.size - self.pos or (limit is not None and n > limit):
            raise _Bad(f"a string of {n:,} bytes at byte {self.pos - 8:,} runs past the end of the file")
        start, self.pos = self.pos, self.pos + n
        return bytes(self.buf[start:self.pos]).decode("utf-8", errors="replace")

    def _value(self, kind: int):
        if kind == _STRING:
            return self._string()
        code = _SCALARS.get(kind)
        if code is None:
            raise _Bad(f"unknown value type {kind} at byte {self.pos - 4:,}")
        return self._unpack(code)

    def _array(self, depth: int = 0) -> tuple[list | None, int]:
        """(the values, or None past _MAX_ARRAY elements; the element count)."""
        if depth > _MAX_NESTING:
            raise _Bad(f"arrays nested more than {_MAX_NESTING} deep at byte {self.pos:,}")
        kind, n = self._unpack("I"), self._unpack("Q")
        code = _SCALARS.get(kind)
        if code is not None:  # fixed-size elements: read or skipped in one step
            width = struct.calcsize(code)
            if n > (self.size - self.pos) // width:
                raise _Bad(f"an array of {n:,} elements at byte {self.pos - 12:,} runs past the end of the file")
            if n > _MAX_ARRAY:
                self.pos += n * width
                return None, n
            values = list(struct.unpack_from(f"{self.order}{n}{code}", self.buf, self.pos))
            self.pos += n * width
            return values, n
        if kind not in (_STRING, _ARRAY):
            raise _Bad(f"unknown array element type {kind} at byte {self.pos - 12:,}")
        if n > (self.size - self.pos) // 8:  # every string or array element takes at least 8 bytes
            raise _Bad(f"an array of {n:,} elements at byte {self.pos - 12:,} runs past the end of the file")
        if n > _MAX_ARRAY and kind == _STRING:
            self._skip_strings(n)
            return None, n
        values = []
        for _ in range(n):
            self._check_deadline()
            values.append(self._string() if kind == _STRING else self._array(depth + 1)[0])
        return (values if n <= _MAX_ARRAY else None), n

    def _skip_strings(self, n: int) -> None:
        """Step over n strings (a token list: only the count matters), in one tight loop."""
        length_at, buf, size, pos = struct.Struct(self.order + "Q").unpack_from, self.buf, self.size, self.pos
        try:
            for chunk in range(0, n, 1 << 16):
                self._check_deadline()
                for _ in range(min(1 << 16, n - chunk)):
                    pos += 8 + length_at(buf, pos)[0]
        except struct.error:  # a length pointed past the end: the next one could not be read
            raise _Bad(f"it ends inside its header (at byte {min(pos, size):,})") from None
        if pos > size:
            raise _Bad("a string runs past the end of the file")
        self.pos = pos

    def _check_deadline(self) -> None:
        if time.monotonic() > self.deadline:
            raise _Bad(f"its header took more than {READ_DEADLINE_S:g} s to walk")

    def _tensor_info(self) -> tuple[str, list[int], int, int]:
        name = self._string(limit=_MAX_KEY)
        n_dims = self._unpack("I")
        if n_dims > _MAX_DIMS:
            raise _Bad(f"tensor {name[:60]} has {n_dims} dimensions (ggml has at most {_MAX_DIMS})")
        shape = [self._unpack("Q") for _ in range(n_dims)]
        return name, shape, self._unpack("I"), self._unpack("Q")


def _header(path: Path, deadline: float) -> _Header:
    """The walked header of one file; GgufFileError (one line) for any defect."""
    try:
        with path.open("rb") as fh:
            if fh.seek(0, 2) == 0:
                raise GgufFileError(f"{path} is empty: not a readable GGUF file")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _Header(buf, deadline)
    except _Bad as exc:
        raise GgufFileError(f"{path} is not a readable GGUF file ({exc})") from None
    except (OSError, ValueError, OverflowError) as exc:
        if isinstance(exc, GgufFileError):
            raise
        raise GgufFileError(f"{path} is not a readable GGUF file ({type(exc).__name__}: {str(exc)[:120]})") from None


def _tensors(path: Path, header: _Header) -> list[GgufTensor]:
    """Every tensor of one file, sized by its ggml type; each must lie inside the file."""
    types = gguf_types()[0]
    out = []
    room = header.size - header.data_start
    for name, shape, type_id, offset in header.tensors:
        ty = types.get(type_id)
        if ty is None:
            raise GgufFileError(f"{path}: tensor {name[:60]} has unknown ggml type {type_id}")
        n = 1
        for d in shape:
            n *= d
        if n % ty.block:
            raise GgufFileError(f"{path}: tensor {name[:60]} has {n:,} elements, not whole {ty.name} blocks")
        n_bytes = n // ty.block * ty.bytes
        if offset + n_bytes > room:
            raise GgufFileError(f"{path}: tensor {name[:60]} ends past the end of the file (truncated download?)")
        out.append(GgufTensor(name=name, shape=shape, ggml_type=ty.name, n_elements=n, n_bytes=n_bytes))
    return out


def read_gguf(path: str | Path) -> GgufInfo:
    """GgufInfo for a local .gguf (first split part or any single file)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise GgufFileError(f"no such GGUF file: {p}")
    deadline = time.monotonic() + READ_DEADLINE_S
    parts = _parts(p)
    first = _header(parts[0], deadline)
    fields = first.fields
    arch = fields.get("general.architecture")
    if arch is None:
        raise GgufFileError(f"{p.name} has no general.architecture: not a model GGUF")
    if not isinstance(arch, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", arch):
        raise GgufFileError(f"{p}: GGUF key general.architecture must be a short name string, got {str(arch)[:40]!r}")
    meta = {key[len(arch) + 1:]: value for key, value in fields.items() if key.startswith(arch + ".")}
    ft = fields.get("general.file_type")
    file_type = None
    if ft is not None:
        known = gguf_types()[1].get(ft) if isinstance(ft, int) and not isinstance(ft, bool) else None
        file_type = known or str(ft)
    vocab = meta.get("vocab_size") or first.lengths.get("tokenizer.ggml.tokens")
    tensors = _tensors(parts[0], first)
    for part in parts[1:]:
        tensors += _tensors(part, _header(part, deadline))
    name = fields.get("general.name")
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
