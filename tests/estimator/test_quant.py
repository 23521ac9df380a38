"""GGUF sizes from the per-tensor mix rules against llama.cpp's own published table.

tools/quantize/README.md (llama.cpp) lists bits per weight of Llama-3.1-8B files; FORMULAS.md §1.4.
Those files were made without an importance matrix, so IQ4_XS is checked on that path too.
"""
import pytest

from fitprobe.estimator.quant import tensor_types, weight_bytes

README_BPW = {"Q2_K": 3.1593, "Q4_K_S": 4.6672, "Q4_K_M": 4.8944, "Q5_K_S": 5.5704, "Q5_K_M": 5.7036,
              "Q6_K": 6.5633, "Q8_0": 8.5008, "BF16": 16.0005}
LLAMA3_8B_PARAMS = 8_030_261_248


@pytest.mark.parametrize("quant,bpw", sorted(README_BPW.items()))
def test_llama3_8b_matches_llama_cpp_readme(spec_of, table, quant, bpw):
    spec = spec_of("llama-3.1-8b-instruct")
    w = weight_bytes(spec, table.find(quant), table)
    assert w.total * 8 / LLAMA3_8B_PARAMS == pytest.approx(bpw, abs=0.0006)


def test_iq4_xs_without_imatrix_matches_readme(spec_of, table):
    spec = spec_of("llama-3.1-8b-instruct")
    w = weight_bytes(spec, table.find("IQ4_XS"), table, imatrix=False)
    assert w.total * 8 / LLAMA3_8B_PARAMS == pytest.approx(4.4597, abs=0.0006)


def test_q4_k_m_mix_assigns_types_per_tensor(spec_of, table):
    types = tensor_types(spec_of("llama-3.1-8b-instruct"), table.find("Q4_K_M"))
    assert types["output.weight"] == "Q6_K"
    assert types["token_embd.weight"] == "Q4_K"
    assert types["blk.0.attn_v.weight"] == "Q6_K"  # use_more_bits: first eighth
    assert types["blk.5.attn_v.weight"] == "Q4_K"
    assert types["blk.6.ffn_down.weight"] == "Q6_K"  # (6 - 4) % 3 == 2
    assert types["blk.10.ffn_gate.weight"] == "Q4_K"
    assert types["blk.3.attn_norm.weight"] == "F32"
    assert sum(1 for k, v in types.items() if k.endswith("ffn_down.weight") and v == "Q6_K") == 16


def test_block_fallback_for_rows_that_do_not_divide_256(spec_of, table):
    # gpt-oss: hidden 2880 is not a multiple of 256, so Q4_K falls back to Q5_0 (tensor_type_fallback)
    types = tensor_types(spec_of("gpt-oss-20b"), table.find("Q4_K_M"))
    assert types["blk.0.attn_q.weight"] == "Q5_0"
    assert types["output.weight"] == "Q8_0"


def test_mxfp4_moe_puts_experts_in_mxfp4_rest_in_q8(spec_of, table):
    types = tensor_types(spec_of("gpt-oss-120b"), table.find("MXFP4"))
    assert types["blk.0.ffn_down_exps.weight"] == "MXFP4"
    assert types["blk.0.attn_q.weight"] == "Q8_0"
    assert types["blk.0.ffn_gate_inp.weight"] == "F32"


def test_mixtral_eight_experts_bump_attention(spec_of, table):
    types = tensor_types(spec_of("mixtral-8x7b-v0.1"), table.find("Q4_K_M"))
    assert types["blk.0.attn_v.weight"] == "Q8_0"
    assert types["blk.0.attn_k.weight"] == "Q8_0"
    assert types["blk.0.attn_output.weight"] == "Q5_K"


def test_checkpoint_formats_keep_embeddings_in_16_bit(spec_of, table):
    spec = spec_of("llama-3.1-8b-instruct")
    awq = weight_bytes(spec, table.find("AWQ"), table)
    embed = 128256 * 4096 * 2
    assert awq.token_embd == embed and awq.output == embed + 4096 * 2  # head + output_norm
    linear = LLAMA3_8B_PARAMS - 2 * 128256 * 4096 - 65 * 4096
    assert awq.total == pytest.approx(2 * embed + linear * 4.15625 / 8 + 65 * 4096 * 2, rel=1e-4)


def test_gpt_oss_native_keeps_mxfp4_experts(spec_of, table):
    w = weight_bytes(spec_of("gpt-oss-120b"), table.find("BF16"), table)
    assert 60e9 < w.total < 70e9  # 4.25-bit experts, not 2 bytes per parameter (~234 GB)


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q3_K_M", "Q4_K_S", "IQ2_XXS", "Q2_K", "MXFP4", "IQ4_XS"])
def test_fast_block_sizing_equals_tensor_by_tensor(table, quant):
    """weight_bytes sizes identical blocks once; it must equal the plain per-tensor sum."""
    from fitprobe.catalogs.models import load_models
    from fitprobe.estimator.config import spec_from_config
    from fitprobe.estimator.tensors import inventory

    fmt = table.find(quant)
    for entry in load_models():
        spec = spec_from_config(entry.config, name=entry.name)
        types = tensor_types(spec, fmt)
        expected = 0
        for t in inventory(spec):
            if t.vision or t.mtp:
                continue
            ty = table.ggml_types[types[t.name]]
            expected += t.n // t.shape[0] * ty.row_bytes(t.shape[0])
        assert weight_bytes(spec, fmt, table).total == expected, entry.name
