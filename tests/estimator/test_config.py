"""config.json parsing: families' layer patterns, nested configs, and failing closed."""
import pytest

from fitprobe.estimator.config import SpecError, spec_from_config

LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 100, "intermediate_size": 128, "max_position_embeddings": 2048}


def test_unknown_architecture_fails_closed():
    with pytest.raises(SpecError, match="unknown architecture 'mystery'"):
        spec_from_config({**LLAMA, "model_type": "mystery"}, name="x")


def test_missing_fields_are_named():
    cfg = {k: v for k, v in LLAMA.items() if k not in ("hidden_size", "vocab_size")}
    with pytest.raises(SpecError) as err:
        spec_from_config(cfg, name="x")
    assert "hidden_size" in str(err.value) and "vocab_size" in str(err.value)


def test_no_model_type():
    with pytest.raises(SpecError, match="no model_type"):
        spec_from_config({"architectures": ["Foo"]}, name="x")


@pytest.mark.parametrize("bad", [0, -4, "32", None, 3.5])
def test_impossible_numbers(bad):
    with pytest.raises(SpecError):
        spec_from_config({**LLAMA, "num_attention_heads": bad}, name="x")


def test_empty_config():
    with pytest.raises(SpecError, match="empty"):
        spec_from_config({}, name="x")


def test_layer_types_length_must_match():
    with pytest.raises(SpecError, match="layer_types has 1 entries for 2 layers"):
        spec_from_config({**LLAMA, "layer_types": ["full_attention"]}, name="x")


def test_sliding_layers_need_a_window():
    cfg = {**LLAMA, "model_type": "gemma2", "sliding_window": None}
    with pytest.raises(SpecError, match="window"):
        spec_from_config(cfg, name="x")


def test_mla_config_missing_rank_is_named():
    cfg = {**LLAMA, "model_type": "deepseek_v3", "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
           "v_head_dim": 128, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32}
    with pytest.raises(SpecError, match="kv_lora_rank"):
        spec_from_config(cfg, name="x")


def test_defaults_follow_transformers():
    spec = spec_from_config({k: v for k, v in LLAMA.items() if k != "num_key_value_heads"}, name="x")
    assert spec.n_kv_heads == spec.n_heads  # LlamaConfig: num_key_value_heads defaults to heads (MHA)
    assert spec.head_dim == 16


def test_nested_text_config_and_vision_tower(spec_of):
    spec = spec_of("qwen3.5-27b")
    assert spec.architecture == "qwen3_5_text"
    assert spec.vision_params > 0
    assert spec.count("full") * 4 == spec.n_layers  # every 4th layer is full attention


def test_mla_and_moe_layout(spec_of):
    spec = spec_of("deepseek-v3")
    assert spec.mla.kv_lora_rank == 512 and spec.mla.qk_rope_head_dim == 64
    assert [layer.ffn for layer in spec.layers[:4]] == ["dense", "dense", "dense", "moe"]
    assert spec.moe.n_shared_experts == 1 and spec.mtp_layers == 1


def test_nemotron_pattern(spec_of):
    spec = spec_of("nemotron-3-nano-30b-a3b")
    assert spec.count("mamba") > spec.count("full") > 0
    assert spec.ssm.kind == "mamba2"


def test_prequantized_checkpoint(spec_of):
    assert spec_of("gpt-oss-20b").prequant.method == "mxfp4"
    assert spec_of("deepseek-v4-flash").prequant.expert_bpw == 4.25


def test_glm45_air_layout_from_published_dimensions():
    """No verbatim GLM-4.5-Air config.json was found to bundle; the glm4_moe path is checked with the
    dimensions of zai-org's own training scripts (Megatron args of 'glm4.5-106B-A12B': 46 layers, 1 dense,
    hidden 4096, 96 heads, 8 query groups x 128, FFN 10944, 128 experts of 1408 + a 1408 shared expert,
    top-8, vocab 151552, QKV bias) against the published 106B total / 12B active."""
    from fitprobe.estimator.tensors import param_counts

    cfg = {"model_type": "glm4_moe", "num_hidden_layers": 46, "hidden_size": 4096, "num_attention_heads": 96,
           "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 10944, "moe_intermediate_size": 1408,
           "n_routed_experts": 128, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 1,
           "vocab_size": 151552, "attention_bias": True, "max_position_embeddings": 131072,
           "tie_word_embeddings": False, "num_nextn_predict_layers": 1}
    spec = spec_from_config(cfg, name="glm-4.5-air-dims")
    counts = param_counts(spec)
    assert counts.text == pytest.approx(106e9, rel=0.02)
    # like gpt-oss's card, the published active count leaves out the input-embedding lookup
    assert counts.active - 151552 * 4096 == pytest.approx(12e9, rel=0.08)
    assert [layer.ffn for layer in spec.layers[:2]] == ["dense", "moe"]


def _transformers_default(model_type: str) -> dict:
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parent / "fixtures" / "transformers_defaults.json").read_text())
    return data["configs"][model_type]


@pytest.mark.parametrize("model_type,total,active", [
    ("glm4_moe", 106e9, None),  # defaults carry GLM-4.5-Air's dimensions: 106B total (zai-org README)
    ("jamba", 52e9, 12e9),  # ai21labs/Jamba-v0.1 card: 52B total, 12B active
    ("ernie4_5_moe", 21e9, 3e9),  # baidu/ERNIE-4.5-21B-A3B-PT: 21B total, 3B active
])
def test_families_without_a_bundled_snapshot(model_type, total, active):
    """transformers' own config-class defaults for families whose Hub config.json could not be bundled."""
    from fitprobe.estimator.tensors import param_counts

    counts = param_counts(spec_from_config(_transformers_default(model_type), name=model_type))
    assert min(abs(counts.total - total), abs(counts.text - total)) / total < 0.04
    if active:
        assert counts.active == pytest.approx(active, rel=0.15)


def test_hybrid_families_parse_with_their_state():
    from fitprobe.estimator.kv import kv_cache
    from fitprobe.estimator.settings import RunSettings

    for model_type, kind in [("falcon_h1", "mamba2"), ("granitemoehybrid", "mamba2"), ("jamba", "mamba1")]:
        spec = spec_from_config(_transformers_default(model_type), name=model_type)
        assert spec.ssm.kind == kind
        kv = kv_cache(spec, RunSettings(context=4096))
        assert kv.recurrent > 0, model_type
    ernie = spec_from_config(_transformers_default("ernie4_5_moe"), name="ernie")
    assert [layer.ffn for layer in ernie.layers[:2]] == ["dense", "moe"]
    assert ernie.moe.n_shared_experts == 2
