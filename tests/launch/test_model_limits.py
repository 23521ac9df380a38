"""Plans respect what the model and the machine can physically do: the model's maximum context,
a tensor-parallel size the MLP splits by, and unified memory where offload frees nothing."""
import pytest

from fitprobe.estimator.fixes import find_fixes
from fitprobe.estimator.launch import llama_cpp, mlx, ollama, sglang, vllm
from fitprobe.estimator.launch.vllm import pick_tp, valid_tp

from planhelpers import flag, make_input


@pytest.mark.parametrize("planner,name", [(vllm, "--max-model-len"), (sglang, "--context-length"),
                                          (llama_cpp, "--ctx-size")])
def test_context_is_capped_at_the_model_maximum(planner, name):
    # Phi-3-mini-4k: max_position_embeddings 4096; vLLM/SGLang refuse a longer length at start-up
    p = planner.plan(make_input("phi-3-mini-4k-instruct", "RTX 4090", ctx=8192))
    assert p.context == 4096 and flag(p, name).value == "4096"
    assert "maximum context" in flag(p, name).reason


def test_ollama_and_mlx_context_capped_too():
    p = ollama.plan(make_input("phi-3-mini-4k-instruct", "RTX 4090", ctx=8192))
    assert p.context == 4096 and p.env["OLLAMA_CONTEXT_LENGTH"] == "4096"
    m = mlx.plan(make_input("phi-3-mini-4k-instruct", "MacBook Pro M4 Max 128GB", ctx=8192))
    assert m.context == 4096


def test_fix_for_a_context_beyond_the_model_is_the_model_maximum():
    inp = make_input("llama-3.1-8b-instruct", "RTX 4090", ctx=200_000)
    fixes = find_fixes(inp)
    assert fixes[0].axis == "context" and fixes[0].value == "131072"
    assert all(int(f.value) <= 131072 for f in fixes if f.axis == "context")


def test_tp_must_split_the_mlp_width():
    spec = make_input("qwen2-1.5b-instruct", "H100 SXM").spec  # 12 heads, 2 KV heads, intermediate 8960
    assert 8960 % 6 and not valid_tp(spec, 6)
    assert pick_tp(spec, 8) == 4


@pytest.mark.parametrize("planner", [llama_cpp, ollama])
def test_unified_memory_gets_no_cpu_offload(planner):
    # Kimi K2 Q4_K_M (~580 GiB) on a 128 GB Mac: CPU and GPU share one pool, moving experts frees nothing
    p = planner.plan(make_input("kimi-k2-instruct", "MacBook Pro M4 Max 128GB", ram_gib=None))
    assert not p.fits and p.cpu_moe_layers == 0
    assert flag(p, "--n-cpu-moe") is None
    assert any("unified memory" in n for n in p.notes)


def test_ollama_context_reason_names_its_real_default():
    # Ollama >= 0.15.5 tiers num_ctx by VRAM: 24 GiB -> 32768 (server/routes.go)
    p = ollama.plan(make_input("llama-3.1-8b-instruct", "RTX 4090", ctx=8192))
    assert "32K" in flag(p, "OLLAMA_CONTEXT_LENGTH").reason
    small = ollama.plan(make_input("llama-3.1-8b-instruct", "RTX 3060 12GB", ctx=4096))
    assert "default" in flag(small, "OLLAMA_CONTEXT_LENGTH").reason and "smaller" not in flag(small, "OLLAMA_CONTEXT_LENGTH").reason


def test_gguf_quant_on_a_16_bit_repo_serves_weights_that_repo_loads():
    # `vllm serve meta-llama/Llama-3.1-8B-Instruct --quantization awq` fails at start-up (no AWQ
    # quantization_config in that repo): when the repo's own weights fit, the plan serves them.
    for planner in (vllm, sglang):
        p = planner.plan(make_input("llama-3.1-8b-instruct", "RTX 4090"))  # Q4_K_M asked
        assert p.fits and p.quant == "BF16" and flag(p, "--quantization") is None
    p = vllm.plan(make_input("llama-3.1-8b-instruct", "RTX 3060 12GB"))
    assert p.fits and p.quant == "FP8" and flag(p, "--quantization").value == "fp8"
    # too big in BF16 and FP8 on one 4090: the 4-bit AWQ plan, with the note that it needs an AWQ repo
    p = vllm.plan(make_input("qwen3-30b-a3b", "RTX 4090"))
    assert p.quant == "AWQ" and any("pre-quantized AWQ checkpoint" in n for n in p.notes)
