"""The struct-based GGUF header reader (catalogs/gguf_file.py) against llama.cpp's own Python reader
(gguf-py's GGUFReader, test-only), and fuzzed (hypothesis) with truncated and corrupted headers: every
bad file is a one-line GgufFileError, and `fitprobe plan bad.gguf` exits 3 with one line, never a
traceback."""
from __future__ import annotations

import json
import struct
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fitprobe.catalogs import gguf_file
from fitprobe.catalogs.gguf_file import GgufFileError, gguf_types, read_gguf
from fitprobe.catalogs.resolve import ResolveError, resolve
from fitprobe.cli import main

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.function_scoped_fixture])


def _write(path: Path, kv: list[tuple[str, object, object, object]], tensors: dict) -> Path:
    """kv: (key, value, GGUFValueType, array element type or None); tensors: name -> (array, raw type)."""
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value, vtype, sub in kv:
        w.add_key_value(key, value, vtype, sub_type=sub)
    for name, (array, raw) in tensors.items():
        w.add_tensor(name, array, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _reference(path: Path) -> tuple[dict, dict]:
    """(metadata as read_gguf keeps it, tensors) by gguf-py's reader."""
    r = gguf.GGUFReader(path)
    meta = {}
    for key, field in r.fields.items():
        if key.startswith("llama."):
            long = field.types and field.types[0] == gguf.GGUFValueType.ARRAY and len(field.data) > 64
            meta[key[len("llama."):]] = None if long else field.contents()
    tensors = {t.name: ([int(d) for d in t.shape], gguf.GGMLQuantizationType(t.tensor_type).name, int(t.n_bytes))
               for t in r.tensors}
    return meta, tensors


V = gguf.GGUFValueType
SCALARS = {
    V.UINT8: st.integers(0, 255), V.INT8: st.integers(-128, 127), V.UINT16: st.integers(0, 2**16 - 1),
    V.INT16: st.integers(-(2**15), 2**15 - 1), V.UINT32: st.integers(0, 2**32 - 1),
    V.INT32: st.integers(-(2**31), 2**31 - 1), V.UINT64: st.integers(0, 2**64 - 1),
    V.INT64: st.integers(-(2**63), 2**63 - 1), V.FLOAT32: st.floats(-1e6, 1e6, width=32),
    V.FLOAT64: st.floats(allow_nan=False), V.BOOL: st.booleans(), V.STRING: st.text(max_size=12),
}
kv_entries = st.one_of(
    st.sampled_from(sorted(SCALARS)).flatmap(lambda t: SCALARS[t].map(lambda v: (v, t, None))),
    st.sampled_from(sorted(SCALARS)).flatmap(
        lambda t: st.lists(SCALARS[t], min_size=1, max_size=80).map(lambda v: (v, V.ARRAY, t))),
)
Q = gguf.GGMLQuantizationType
tensor_types = st.sampled_from([(Q.F32, np.float32), (Q.F16, np.float16), (Q.Q8_0, None), (Q.Q4_K, None),
                                (Q.IQ2_XXS, None), (Q.MXFP4, None), (Q.BF16, None)])


def _tensor(ty, dtype, rows: int, blocks: int):
    block, size = gguf.GGML_QUANT_SIZES[ty]
    if dtype is not None:
        return np.zeros((rows, blocks * block), dtype=dtype), None
    return np.zeros((rows, blocks * size), dtype=np.uint8), ty


@FUZZ
@given(st.dictionaries(st.text("abcdefgh_.", min_size=1, max_size=10), kv_entries, max_size=6),
       st.lists(st.tuples(tensor_types, st.integers(1, 3), st.integers(1, 3)), min_size=1, max_size=4))
def test_the_reader_agrees_with_gguf_py(tmp_path, kv, tensors):
    path = tmp_path / "m.gguf"
    entries = [(f"llama.{k}", *v) for k, v in kv.items()]
    arrays = {f"blk.0.t{i}.weight": _tensor(ty, dt, rows, blocks) for i, ((ty, dt), rows, blocks) in enumerate(tensors)}
    _write(path, entries, arrays)
    info = read_gguf(path)
    meta, ref_tensors = _reference(path)
    assert info.metadata == meta
    assert {t.name: (t.shape, t.ggml_type, t.n_bytes) for t in info.tensors} == ref_tensors


def test_the_type_tables_match_gguf_py():
    """catalogs/data/gguf_types.json is the enum gguf-py (llama.cpp's) carries, id for id."""
    types, file_types = gguf_types()
    assert {i: (t.name, t.block, t.bytes) for i, t in types.items()} == {
        int(t): (t.name, *gguf.GGML_QUANT_SIZES[t]) for t in gguf.GGMLQuantizationType}
    assert file_types == {int(t): t.name.removeprefix("MOSTLY_") for t in gguf.LlamaFileType}


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> bytes:
    """A small real model header: token list, merges, scores, per-layer array, tensors of three types."""
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_block_count(2)
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv([2, 2])
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q8_0))
    w.add_token_list([f"t{i}" for i in range(100)])
    w.add_token_merges([f"t{i} t{i + 1}" for i in range(90)])
    w.add_token_scores([0.5] * 100)
    w.add_tensor("token_embd.weight", np.zeros((100, 64), dtype=np.float16))
    q, q8 = _tensor(Q.Q8_0, None, 64, 2)
    w.add_tensor("blk.0.attn_q.weight", q, raw_dtype=q8)
    w.add_tensor("blk.0.attn_norm.weight", np.zeros(64, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def _header_end(data: bytes) -> int:
    """Where the tensor data starts (the header is what the fuzzing corrupts)."""
    return len(data) - (100 * 64 * 2 + 64 * 2 // 32 * 34 * 32 + 64 * 4)


def _read_or_refuse(path: Path) -> None:
    try:
        info = read_gguf(path)
    except GgufFileError as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    assert all(t.n_bytes >= 0 for t in info.tensors)
    try:  # what resolve does with an accepted header: sized, or refused with a model error
        resolve(str(path))
    except ResolveError as exc:
        assert "\n" not in str(exc)


@FUZZ
@given(st.data())
def test_truncated_and_corrupted_headers_are_refused_in_one_line(tmp_path, valid, data):
    end = _header_end(valid)
    blob = bytearray(valid)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, end - 1))
        how = data.draw(st.sampled_from(["byte", "u64", "u32", "cut"]))
        if how == "cut":
            blob = blob[:at]
            break
        width = {"byte": 1, "u32": 4, "u64": 8}[how]
        value = data.draw(st.sampled_from([0, 1, 2**width * 8 - 1, 0x7F, 1 << (width * 8 - 1), 64, 65]) |
                          st.integers(0, 2 ** (width * 8) - 1))
        blob[at:at + width] = value.to_bytes(width, "little")[:max(0, len(blob) - at)]
    path = tmp_path / "fuzz.gguf"
    path.write_bytes(bytes(blob))
    _read_or_refuse(path)


def test_every_truncation_is_refused(tmp_path, valid):
    path = tmp_path / "cut.gguf"
    for at in list(range(0, _header_end(valid), 7)) + [len(valid) - 1]:
        path.write_bytes(valid[:at])
        with pytest.raises(GgufFileError) as e:
            read_gguf(path)
        assert "\n" not in str(e.value)


def test_hostile_counts_and_lengths(tmp_path):
    """Counts and lengths that would make a naive reader allocate or loop for ever."""
    head = b"GGUF" + struct.pack("<I", 3)
    key = struct.pack("<Q", 4) + b"keys"
    cases = {
        "billions of keys": head + struct.pack("<QQ", 0, 2**62) + b"\0" * 64,
        "a key longer than the file": head + struct.pack("<QQ", 0, 1) + struct.pack("<Q", 2**40) + b"\0" * 64,
        "an array longer than the file": head + struct.pack("<QQ", 0, 1) + key + struct.pack("<IIQ", 9, 4, 2**60),
        "a string array longer than the file": head + struct.pack("<QQ", 0, 1) + key + struct.pack("<IIQ", 9, 8, 2**40),
        "arrays nested without end": head + struct.pack("<QQ", 0, 1) + key + struct.pack("<I", 9)
        + struct.pack("<IQ", 9, 1) * 5000,
        "an unknown value type": head + struct.pack("<QQ", 0, 1) + key + struct.pack("<I", 99) + b"\0" * 16,
        "version 1": b"GGUF" + struct.pack("<I", 1) + b"\0" * 32,
        "no magic": b"GGML" + b"\0" * 60,
        "empty": b"",
    }
    for what, blob in cases.items():
        path = tmp_path / "hostile.gguf"
        path.write_bytes(blob)
        with pytest.raises(GgufFileError) as e:
            read_gguf(path)
        assert "\n" not in str(e.value), what


def test_a_truncated_download_is_refused(tmp_path, valid):
    path = tmp_path / "part.gguf"
    path.write_bytes(valid[:-100])  # the header is whole, the last tensor is not
    with pytest.raises(GgufFileError, match="ends past the end of the file"):
        read_gguf(path)


def test_the_walk_has_a_deadline(tmp_path, valid, monkeypatch):
    path = tmp_path / "slow.gguf"
    path.write_bytes(valid)
    monkeypatch.setattr(gguf_file, "READ_DEADLINE_S", -1.0)  # already past: the first check refuses
    with pytest.raises(GgufFileError, match="took more than"):
        read_gguf(path)


def test_big_endian_files_are_read(tmp_path):
    path = tmp_path / "be.gguf"
    w = gguf.GGUFWriter(str(path), "llama", endianess=gguf.GGUFEndian.BIG)
    w.add_block_count(2)
    w.add_token_list([f"t{i}" for i in range(100)])
    w.add_tensor("token_embd.weight", np.zeros((100, 64), dtype=np.float16).byteswap())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    info = read_gguf(path)
    assert info.metadata["block_count"] == 2 and info.vocab_size == 100
    assert [(t.shape, t.n_bytes) for t in info.tensors] == [([64, 100], 100 * 64 * 2)]


@pytest.mark.parametrize("damage", ["cut header", "bad magic", "huge count", "cut tensors"])
def test_plan_on_a_bad_gguf_is_exit_3_in_one_line(tmp_path, valid, damage):
    blob = {"cut header": valid[:200], "bad magic": b"XXXX" + valid[4:],
            "huge count": valid[:8] + struct.pack("<Q", 2**50) + valid[16:], "cut tensors": valid[:-64]}[damage]
    path = tmp_path / "bad.gguf"
    path.write_bytes(blob)
    result = CliRunner().invoke(main, ["plan", str(path), "--gpu", "RTX 4090", "--json"])
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1
    assert json.loads(result.stdout)["error"]["code"] == 3


def test_the_gguf_path_imports_neither_numpy_nor_gguf(tmp_path, valid):
    import subprocess
    import sys

    path = tmp_path / "tiny.gguf"
    path.write_bytes(valid)
    code = ("import sys; from fitprobe.catalogs.resolve import resolve; resolve(sys.argv[1]); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'gguf')))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr
