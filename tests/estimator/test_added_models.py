"""Models added from the seed pages size consistently with their configs: weights from the tensor
inventory, KV cache per layer kind; assembled entries equal the verbatim configs they were built from;
known-but-unmodelled architectures fail closed naming what is missing."""
import pytest

from fitprobe.catalogs.models import find_model, load_unmodelled
from fitprobe.catalogs.quants import quant_table
from fitprobe.estimator.config import SpecError, spec_from_config
from fitprobe.estimator.kv import kv_cache
from fitprobe.estimator.quant import weight_bytes
from fitprobe.estimator.settings import RunSettings
from fitprobe.estimator.tensors import inventory, param_counts

F16 = 2


def _experts(spec) -> int:
    return sum(t.n for t in inventory(spec) if t.expert and not t.mtp)  # MTP layers are counted apart


@pytest.mark.parametrize("added,source", [
    ("mixtral-8x7b-instruct-v0.1", "mixtral-8x7b-v0.1"),  # a fine-tune: same shapes as the base
    ("llama-3.2-3b-instruct", "llama-3.2-3b"),
    ("minimax-m2.5", "minimax-m2.5-nvfp4"),  # assembled from NVIDIA's re-quantization's verbatim config
    ("gemma-4-31b-it", "gemma-4-31b-it-nvfp4"),
    ("deepseek-r1-distill-qwen-32b", "qwen2.5-32b-instruct"),  # distills keep their base's shapes
    ("deepseek-r1-distill-llama-8b", "llama-3.1-8b-instruct"),
    ("qwen3-coder-30b-a3b-instruct", "qwen3-30b-a3b"),
    ("qwen3-30b-a3b-instruct-2507", "qwen3-30b-a3b"),  # the 2507 updates keep the network, widen the window
    ("qwen3-4b-instruct-2507", "qwen3-4b"),
    ("gemma-4-26b-a4b-it", "gemma-4-26b-a4b"),
    ("nemotron-3-super-120b-a12b", "nemotron-3-super-120b-a12b-fp8"),
    ("kimi-dev-72b", "qwen2.5-72b-instruct"),
    ("deepseek-r1-distill-llama-70b", "llama-3.3-70b-instruct"),
    ("deepseek-r1-distill-qwen-14b", "qwen2.5-14b"),
    ("deepseek-v3-0324", "deepseek-v3"),  # dated checkpoints of one network
    ("deepseek-r1-0528", "deepseek-r1"),
    ("qwen3-235b-a22b-instruct-2507", "qwen3-235b-a22b"),
    ("llama-3.1-405b-instruct", "llama-3.1-405b"),
])
def test_entries_size_as_the_config_they_share_shapes_with(spec_of, added, source):
    a, b = spec_of(added), spec_of(source)
    assert param_counts(a) == param_counts(b)
    fmt = quant_table().find("Q4_K_M")
    assert weight_bytes(a, fmt, quant_table()).total == weight_bytes(b, fmt, quant_table()).total
    st = RunSettings(context=8192)
    assert kv_cache(a, st).total == kv_cache(b, st).total


def test_gemma4_moe_runs_experts_beside_the_dense_ffn(spec_of):
    spec = spec_of("gemma-4-26b-a4b")
    cfg = find_model("gemma-4-26b-a4b").config["text_config"]
    assert _experts(spec) == cfg["num_hidden_layers"] * cfg["num_experts"] * 3 * cfg["hidden_size"] * cfg["moe_intermediate_size"]
    dense = [t for t in inventory(spec) if t.name == "blk.0.ffn_down.weight"]
    assert dense and dense[0].shape == (cfg["intermediate_size"], cfg["hidden_size"])
    p = param_counts(spec)
    assert p.active == pytest.approx(3.8e9, rel=0.02) and p.text == pytest.approx(25.2e9, rel=0.02)


def test_gemma4_26b_kv_per_layer_kind(spec_of):
    spec = spec_of("gemma-4-26b-a4b")
    cfg = find_model("gemma-4-26b-a4b").config["text_config"]
    kv = kv_cache(spec, RunSettings(context=8192))
    n_full = cfg["layer_types"].count("full_attention")
    n_slide = cfg["layer_types"].count("sliding_attention")
    # global layers: num_global_key_value_heads x global_head_dim; sliding: a 1024 window + one ubatch,
    # padded to 256 cells (llama.cpp llama_kv_cache_iswa)
    assert kv.full == n_full * 8192 * cfg["num_global_key_value_heads"] * 2 * cfg["global_head_dim"] * F16
    assert kv.windowed == n_slide * 1536 * cfg["num_key_value_heads"] * 2 * cfg["head_dim"] * F16


def test_qwen38_sizes_from_its_gated_deltanet_config(spec_of):
    spec = spec_of("qwen3.8-2.4t-a95b")
    cfg = find_model("qwen3.8-2.4t-a95b").config
    n_full = cfg["layer_types"].count("full_attention")
    kv = kv_cache(spec, RunSettings(context=8192))
    assert n_full == 23 and kv.full == n_full * 8192 * cfg["num_key_value_heads"] * 2 * cfg["head_dim"] * F16
    assert kv.recurrent > 0 and len([x for x in kv.per_layer if x]) == cfg["num_hidden_layers"]
    assert _experts(spec) == cfg["num_hidden_layers"] * cfg["num_experts"] * 3 * cfg["hidden_size"] * cfg["moe_intermediate_size"]


@pytest.mark.parametrize("known", load_unmodelled(), ids=lambda m: m.name)
def test_unmodelled_architectures_fail_closed_naming_what_is_missing(known):
    with pytest.raises(SpecError) as err:
        spec_from_config(known.config, name=known.name)
    assert "cannot be sized yet" in str(err.value) and "llama.cpp" in str(err.value)
    assert find_model(known.name) is None and find_model(known.hf_id) is None


def test_mixtral_8x22b_instruct_is_the_base_with_the_v3_vocabulary(spec_of):
    base, instruct = param_counts(spec_of("mixtral-8x22b-v0.1")), param_counts(spec_of("mixtral-8x22b-instruct-v0.1"))
    widened = (32768 - 32000) * 6144 * 2  # embedding and untied output rows
    assert instruct.total - base.total == widened
    assert instruct.total == find_model("mixtral-8x22b-instruct-v0.1").published_params  # the safetensors total
