"""The sparse-GGUF writer on its own (no llama.cpp needed): header round trip, sparseness, fail-closed."""
from __future__ import annotations

import os

import pytest
from gguf import GGUFReader

from fitprobe.estimator.fields import replace
from fitprobe.estimator.quant import source_types, tensor_types
from fitprobe.sparse_gguf import UnsupportedArchitecture, llama_arch, write_sparse_gguf

from .conftest import spec_of


def test_header_declares_every_tensor_and_the_data_is_a_hole(tmp_path, table):
    spec = spec_of("llama-3.1-8b-instruct")
    fmt = table.find("Q4_K_M")
    types = tensor_types(spec, fmt)
    path = tmp_path / "m.gguf"
    size = write_sparse_gguf(spec, path, types)
    assert os.path.getsize(path) == size > 4 << 30  # the whole Q4_K_M file, declared
    assert os.stat(path).st_blocks * 512 < 1 << 20  # ... occupying under a MiB
    r = GGUFReader(path)
    assert r.fields["general.architecture"].contents() == "llama"
    assert r.fields["llama.block_count"].contents() == 32
    assert r.fields["llama.attention.head_count_kv"].contents() == 8
    read = {t.name: (t.tensor_type.name, tuple(int(x) for x in t.shape)) for t in r.tensors}
    assert read.keys() == types.keys()
    assert read["blk.0.attn_k.weight"] == ("Q4_K", (4096, 1024))
    assert read["output.weight"][0] == types["output.weight"] == "Q6_K"


def test_sliding_window_pattern_and_mla_keys(tmp_path):
    gemma = spec_of("gemma-3-27b-it")
    write_sparse_gguf(gemma, tmp_path / "g.gguf", source_types(gemma))
    f = GGUFReader(tmp_path / "g.gguf").fields
    pattern = f["gemma3.attention.sliding_window_pattern"].contents()
    assert pattern == [layer.attention != "full" for layer in gemma.layers] and pattern.count(False) == 10
    ds = spec_of("deepseek-v3")
    write_sparse_gguf(ds, tmp_path / "d.gguf", source_types(ds))
    f = GGUFReader(tmp_path / "d.gguf").fields
    assert f["deepseek2.attention.key_length"].contents() == 576 and f["deepseek2.attention.value_length"].contents() == 512
    assert f["deepseek2.leading_dense_block_count"].contents() == 3


def test_unknown_architecture_fails_closed(tmp_path):
    spec = replace(spec_of("llama-3.1-8b-instruct"), architecture="made_up")
    with pytest.raises(UnsupportedArchitecture, match="made_up"):
        write_sparse_gguf(spec, tmp_path / "x.gguf", source_types(spec_of("llama-3.1-8b-instruct")))


def test_every_bundled_family_is_mapped_or_named():
    """The differential suite iterates every distinct network among the bundled models of a mapped family
    (conftest.supported_models), so a new catalog model of a mapped family enters it by itself; a bundled family without a mapping is named here
    with what is missing (sparse_gguf.NOT_MAPPED), never skipped in silence."""
    from fitprobe.catalogs.models import load_models
    from fitprobe.sparse_gguf import LLAMA_ARCH, NOT_MAPPED

    unmapped = {}
    for entry in load_models():
        arch = (entry.config.get("text_config") or entry.config).get("model_type")
        if arch not in LLAMA_ARCH and entry.config.get("model_type") not in LLAMA_ARCH:
            unmapped.setdefault(arch, []).append(entry.name)
    assert set(unmapped) <= set(NOT_MAPPED), f"bundled families without a llama.cpp mapping: {unmapped}"
    for arch, why in NOT_MAPPED.items():
        with pytest.raises(UnsupportedArchitecture, match=why[:30]):
            llama_arch(replace(spec_of("qwen3-0.6b"), architecture=arch))


def test_the_suite_leaves_out_only_identical_networks(tmp_path):
    """A model left out of the differential suite writes byte for byte the GGUF header of the one that runs."""
    from .conftest import same_network_as

    for left_out, runs in same_network_as().items():
        a, b = spec_of(left_out), spec_of(runs)
        pa, pb = tmp_path / "a.gguf", tmp_path / "b.gguf"
        write_sparse_gguf(replace(a, name="x", hf_id=None), pa, source_types(a))
        write_sparse_gguf(replace(b, name="x", hf_id=None), pb, source_types(b))
        assert pa.stat().st_size == pb.stat().st_size and _written(pa) == _written(pb), (left_out, runs)


def _written(path) -> bytes:
    """The bytes before the file's sparse hole: the header and tensor table the writer put down."""
    with open(path, "rb") as f:
        end = os.lseek(f.fileno(), 0, os.SEEK_HOLE)
        return f.read(end)


def test_types_must_cover_the_inventory(tmp_path):
    spec = spec_of("qwen3-0.6b")
    types = source_types(spec)
    types.pop("output_norm.weight")
    with pytest.raises(ValueError, match="output_norm.weight"):
        write_sparse_gguf(spec, tmp_path / "x.gguf", types)


def test_build_script_pins_the_build_the_rules_name():
    """scripts/build_llama_cpp.sh builds the llama.cpp that LLAMA_CPP_BUILD (and the JSON contract) names."""
    import re
    from pathlib import Path

    from fitprobe.estimator.llama_rules import LLAMA_CPP_BUILD

    script = (Path(__file__).parents[2] / "scripts" / "build_llama_cpp.sh").read_text()
    assert re.search(r'BUILD="\$\{LLAMA_CPP_BUILD:-(\d+)\}"', script).group(1) == str(LLAMA_CPP_BUILD)
