"""File types beyond the K-quant mixes: llama.cpp's other ftypes, Unsloth dynamic recipes, MLX groups."""
from collections import Counter

import pytest

from fitprobe.catalogs.quants import find_quant, quant_table
from fitprobe.estimator.quant import is_approximate, recipe_family, tensor_types, weight_bytes
from fitprobe.estimator.tensors import inventory

GIB = 1 << 30


def size_gib(spec, quant):
    return weight_bytes(spec, find_quant(quant), quant_table()).total / GIB


# llama.cpp tools/quantize/quantize.cpp QUANT_OPTIONS: file sizes quantizing Llama-3-8B (in GiB)
@pytest.mark.parametrize("quant,published", [
    ("Q4_1", 4.78), ("Q5_0", 5.21), ("Q5_1", 5.65), ("Q3_K_L", 4.03), ("Q3_K_M", 3.74), ("Q4_K_M", 4.58),
    ("Q8_0", 7.96),
])
def test_llama3_8b_file_sizes_match_llama_quantize(spec_of, quant, published):
    assert size_gib(spec_of("llama-3-8b-instruct"), quant) == pytest.approx(published, rel=0.01)


@pytest.mark.parametrize("quant,bpw", [("IQ3_M", 3.66), ("IQ3_XS", 3.3), ("IQ2_M", 2.7), ("IQ2_S", 2.5)])
def test_iquant_mixes_sit_near_their_nominal_width(spec_of, quant, bpw):
    spec = spec_of("llama-3.1-8b-instruct")
    w = weight_bytes(spec, find_quant(quant), quant_table())
    body = w.total - w.token_embd - w.output  # quantize.cpp's bpw figures are for the repeating layers
    params = 8_030_261_248 - 2 * 128256 * 4096
    assert body * 8 / params == pytest.approx(bpw, abs=0.35)


def test_iq3_xs_middle_layers_get_iq3_xxs_ffn(spec_of):
    types = tensor_types(spec_of("llama-3.1-8b-instruct"), find_quant("IQ3_XS"))
    assert types["blk.0.ffn_up.weight"] == "IQ3_S" and types["blk.16.ffn_up.weight"] == "IQ3_XXS"
    assert find_quant("Q3_K_XS").name == "IQ3_XS"


def test_deepseek_ud_q2_k_xl_matches_the_published_file(spec_of):
    spec = spec_of("deepseek-v3")
    ud, plain = size_gib(spec, "UD-Q2_K_XL"), size_gib(spec, "Q2_K")
    assert ud == pytest.approx(233.180, rel=0.01)  # ik_llama.cpp PR 394 log of the UD-Q2_K_XL file
    assert ud - plain > 4  # Q2_K's mix is ~6 GiB short: the unsafe direction
    counts = Counter(tensor_types(spec, find_quant("UD-Q2_K_XL")).values())
    assert counts["Q2_K"] == 122 and counts["Q3_K"] == 54 and counts["Q8_0"] == 122  # as in the file's header
    assert not is_approximate(find_quant("UD-Q2_K_XL"), spec)


@pytest.mark.parametrize("quant,published_gb", [("UD-Q3_K_XL", 321), ("UD-Q4_K_XL", 405)])
def test_deepseek_ud_sizes_within_two_percent_of_the_model_card(spec_of, quant, published_gb):
    assert size_gib(spec_of("deepseek-v3"), quant) * GIB / 1e9 == pytest.approx(published_gb, rel=0.02)


def test_scout_ud_q4_k_xl_is_smaller_than_q4_k_m_and_near_the_file(spec_of):
    spec = spec_of("llama-4-scout-17b-16e-instruct")
    assert size_gib(spec, "UD-Q4_K_XL") == pytest.approx(57.74, rel=0.005)  # gguf-vram-estimator on the file
    assert size_gib(spec, "Q4_K_M") - size_gib(spec, "UD-Q4_K_XL") > 2


@pytest.mark.parametrize("quant,published,rel", [
    ("UD-Q2_K_XL", 39.654, 0.001),  # the recipe ikawrakow reproduced (ik_llama.cpp PR 321): exact
    ("UD-IQ2_XXS", 35.904, 0.015), ("UD-IQ1_S", 31.510, 0.01),  # inferred expert types
])
def test_scout_ud_files_sized_from_the_published_recipe(spec_of, quant, published, rel):
    assert size_gib(spec_of("llama-4-scout-17b-16e-instruct"), quant) == pytest.approx(published, rel=rel)


def test_ud_formats_without_a_recipe_for_the_family_stay_approximate(spec_of):
    assert is_approximate(find_quant("UD-Q2_K_XL"), spec_of("llama-3.1-8b-instruct"))
    assert is_approximate(find_quant("UD-IQ1_S"), spec_of("deepseek-v3"))
    # recurrent-layer hybrids are their own family: the Scout-derived MoE recipe does not apply to them
    assert recipe_family(spec_of("qwen3.6-35b-a3b")) == "hybrid_moe"
    assert is_approximate(find_quant("UD-Q2_K_XL"), spec_of("qwen3.6-35b-a3b"))
    assert is_approximate(find_quant("UD-Q5_K_XL"), spec_of("qwen3.6-35b-a3b"))  # 7 % short of the file


@pytest.mark.parametrize("bits", [3, 4, 6, 8])
def test_mlx_group_quant_is_bits_plus_half_a_bit(spec_of, bits):
    spec = spec_of("llama-3.1-8b-instruct")  # untied, every matrix width divides 64
    w = weight_bytes(spec, find_quant(f"MLX-{bits}bit"), quant_table())
    quantized = w.by_type[f"MLX{bits}"]
    n = 8030261248 - 65 * 4096  # all but the norms
    assert quantized * 8 / n == pytest.approx(bits + 0.5, rel=1e-3)


PUBLISHED = [(fmt, pub) for fmt in quant_table().formats for pub in fmt.published]


@pytest.mark.parametrize("fmt,pub", PUBLISHED, ids=[f"{f.name}-{p.model}" for f, p in PUBLISHED])
def test_published_files_hold_each_ud_format_to_its_tolerance(spec_of, fmt, pub):
    """Where a recipe or a checked mix sizes the family, the published file is within the format's tolerance;
    where the family stays approximate, it is not (else the data should call the family checked)."""
    spec = spec_of(pub.model)
    error = size_gib(spec, fmt.name) / pub.gib - 1
    if is_approximate(fmt, spec):
        assert abs(error) > fmt.tolerance, f"{fmt.name} on {pub.model} is {error:+.2%}: mark the family checked"
    else:
        assert abs(error) <= fmt.tolerance, f"{fmt.name} on {pub.model}: {error:+.2%}"


@pytest.mark.parametrize("fmt,pub", [(f, p) for f, p in PUBLISHED if p.types], ids=lambda x: getattr(x, "name", getattr(x, "model", "")))
def test_published_type_counts_cover_the_same_tensors(spec_of, fmt, pub):
    """The load log's type counts add up to fitprobe's tensor inventory of that model: the file is the model."""
    assert sum(pub.types.values()) == len(tensor_types(spec_of(pub.model), fmt))


def test_every_sized_family_is_backed_by_a_published_file(spec_of):
    for fmt in quant_table().formats:
        if not fmt.approximate:
            continue
        families = {recipe_family(spec_of(p.model)) for p in fmt.published}
        claimed = set(fmt.recipes) | set(fmt.checked_families)
        assert claimed <= families, f"{fmt.name}: {sorted(claimed - families)} sized without a published file"
        assert fmt.tolerance or not (claimed or fmt.published), f"{fmt.name} states no tolerance"


def test_ud_q5_k_xl_is_the_q5_k_m_mix_on_dense_and_moe_only(spec_of):
    for model in ("qwen3-32b", "qwen3-30b-a3b"):
        spec = spec_of(model)
        assert size_gib(spec, "UD-Q5_K_XL") == size_gib(spec, "Q5_K_M")
        assert not is_approximate(find_quant("UD-Q5_K_XL"), spec)
    assert is_approximate(find_quant("UD-Q5_K_XL"), spec_of("deepseek-v3"))
    assert not is_approximate(find_quant("UD-Q4_K_XL"), spec_of("qwen3-32b"))  # Q4_K_M mix: 1.3 % short of the file


@pytest.mark.parametrize("model", [
    # mlx_lm.convert -q (4 bits, group 64) logs '[INFO] Quantized model with 4.501 bits per weight.', i.e.
    # mlx_lm.utils.compute_bits_per_weight: every array's bytes (weights, 16-bit scales and biases, norms) * 8
    # over the unquantized parameter count. Qwen2.5-14B-Instruct's log (a public mlx-lm walkthrough, code corpus
    # id 37001104730) also prints 14770.034M parameters; Qwen3-0.6B (tied embeddings): a public talk's
    # measurement notes (code corpus id 68425879638).
    "qwen2.5-14b", "qwen3-0.6b",
])
def test_mlx_4bit_matches_mlx_lm_bits_per_weight(spec_of, model):
    spec = spec_of(model)
    params = sum(t.n for t in inventory(spec) if not t.vision and not t.mtp)
    w = weight_bytes(spec, find_quant("MLX-4bit"), quant_table())
    assert round(w.total * 8 / params, 3) == 4.501
    if model == "qwen2.5-14b":
        assert params == 14_770_033_664  # "(0.524M/14770.034M)" in the same log
