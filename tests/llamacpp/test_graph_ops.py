"""The weight matrices a decode step applies, as t_fixed counts them, against the pinned llama.cpp's decode graph
(scripts/graph_ops.py reads it from llama-server's GGML_SCHED_DEBUG=2 listing)."""
from __future__ import annotations

import pytest

from fitprobe.estimator.speed import step_kernels
from scripthelpers import load_script

from .conftest import spec_of


def _graph_ops():
    return load_script("graph_ops")


def test_the_listing_parser_reads_only_the_first_one_token_graph():
    log = "\n".join([
        "D graph_reserve: reserving a graph for ubatch with n_tokens =  512, n_seqs =  1, n_outputs =    1",
        "D node #  7 (   MUL_MAT):               Qcur-0 (  16K) [  CPU         ] use=1,c=1:",
        "D graph_reserve: reserving a graph for ubatch with n_tokens =    1, n_seqs =  1, n_outputs =    1",
        "## SPLIT #0: CPU # 0 inputs",
        "D node #  5 (  RMS_NORM):               norm-0 (  11K) [  CPU         ] use=1,c=1:",
        "D node #  7 (   MUL_MAT):               Qcur-0 (  16K) [  CPU         ] use=1,c=1:",
        "D node # 53 (MUL_MAT_ID):       ffn_moe_gate-0 (  22K) [  CPU         ] use=1,c=1:",
        "D graph_reserve: reserving a graph for ubatch with n_tokens =    1, n_seqs =  1, n_outputs =    1",
        "D node #  7 (   MUL_MAT):               Qcur-0 (  16K) [  CPU         ] use=1,c=1:",
    ])
    assert dict(_graph_ops().decode_graph_ops(log)) == {"RMS_NORM": 1, "MUL_MAT": 1, "MUL_MAT_ID": 1}
    assert not _graph_ops().decode_graph_ops("no graph here")


@pytest.mark.parametrize("name", ["llama-3.2-1b-instruct", "qwen3-0.6b"])
def test_a_step_applies_the_matrices_llama_cpp_multiplies_by_the_tied_head_included(llama_bin, tmp_path, name):
    """step_kernels counts what the graph multiplies by and normalises with; a tied embedding is a lookup and the
    output head, which llama.cpp's graph multiplies by once."""
    spec = spec_of(name)
    assert spec.tied_embeddings
    ops = _graph_ops().measure(llama_bin / "llama-server", spec, tmp_path, timeout_s=300)
    assert ops["FLASH_ATTN"] == spec.n_layers, ops
    # every norm vector is one RMS_NORM here (no weightless norms in these networks)
    assert step_kernels(spec) == ops["MUL_MAT"] + ops["MUL_MAT_ID"] + ops["RMS_NORM"], ops
