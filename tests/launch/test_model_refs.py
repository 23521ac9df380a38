"""Commands name files the catalog knows exist: -hf only for a repo holding the quant, Ollama tags
per quantization, MLX conversions, AWQ checkpoints; local inputs keep their path."""
import json

from fitprobe.catalogs.resolve import resolve
from fitprobe.estimator.launch import llama_cpp, mlx, ollama, vllm

from planhelpers import flag, make_input


def test_gpt_oss_defaults_to_mxfp4_and_its_repo_holds_only_that():
    inp = make_input("gpt-oss-120b", "H100 SXM")
    assert inp.fmt.name == "MXFP4"
    assert flag(llama_cpp.plan(inp), "-hf").value == "ggml-org/gpt-oss-120b-GGUF:MXFP4"
    other = llama_cpp.plan(make_input("gpt-oss-120b", "H100 SXM", quant="Q4_K_M"))
    assert flag(other, "-hf") is None and "holds MXFP4" in " ".join(other.notes)


def test_ollama_tag_per_quantization():
    assert ollama.plan(make_input("llama-3.1-8b-instruct", "RTX 4090", quant="Q8_0")).command.endswith(
        "ollama run llama3.1:8b-instruct-q8_0")
    q6 = ollama.plan(make_input("llama-3.1-8b-instruct", "RTX 4090", quant="Q6_K"))
    assert "llama3.1:8b" not in q6.command.split("ollama run ")[1]


def test_unconfirmed_gguf_repo_downloads_then_points_m_at_the_file():
    # the catalog knows Qwen/Qwen3-30B-A3B-GGUF is this model's GGUF repo, not which quants it holds
    p = llama_cpp.plan(make_input("qwen3-30b-a3b", "H100 SXM", quant="Q5_K_M"))
    assert flag(p, "-hf") is None
    assert flag(p, "-m").value == "$(find ./Qwen3-30B-A3B-GGUF -name '*[-.]Q5_K_M[-.]*' | sort | head -n 1)"
    assert 'hf download Qwen/Qwen3-30B-A3B-GGUF --include "*[-.]Q5_K_M[-.]*"' in " ".join(p.notes)


def test_no_awq_flag_without_an_awq_checkpoint():
    p = vllm.plan(make_input("llama-3.1-70b-instruct", "H100 SXM", 2, quant="AWQ", engine="vllm"))
    assert flag(p, "--quantization") is None or flag(p, "--quantization").value != "awq"
    assert "none is known" in " ".join(p.notes)


def test_mlx_uses_a_known_conversion_or_converts_at_mlx_width():
    p = mlx.plan(make_input("llama-4-scout-17b-16e-instruct", "Mac Studio M3 Ultra 512GB", quant="MLX-4bit"))
    assert flag(p, "--model").value == "mlx-community/Llama-4-Scout-17B-16E-Instruct-4bit"
    q = mlx.plan(make_input("qwen3-8b", "Mac Studio M3 Ultra 512GB", quant="Q8_0", engine="mlx"))
    assert q.quant == "MLX-8bit" and "--q-group-size 64" in q.setup[0]


def test_local_config_keeps_its_path(tmp_path):
    from fitprobe.catalogs.models import find_model
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(find_model("qwen3-8b").config))
    inp = make_input(str(d), "H100 SXM", quant="BF16", engine="vllm")
    assert str(d) in vllm.plan(inp).command


def test_seed_display_names_and_ollama_tags_resolve():
    assert resolve("GLM-5 (744B)").spec.name == "glm-5"
    assert resolve("Kimi K2 Instruct (1T-A32B)").spec.name == "kimi-k2-instruct"
    assert resolve("GLM-4.5 (355B-A32B)").spec.name == "glm-4.5"
    tagged = resolve("llama3.1:8b-instruct-q8_0")
    assert tagged.spec.name == "llama-3.1-8b-instruct" and tagged.requested_quant == "Q8_0"


def test_awq_and_gptq_point_at_the_publishers_checkpoints():
    p = vllm.plan(make_input("qwen3-32b", "H100 SXM", quant="AWQ", engine="vllm"))
    assert p.command.startswith("vllm serve Qwen/Qwen3-32B-AWQ ") and flag(p, "--quantization").value == "awq"
    g = vllm.plan(make_input("hunyuan-a13b-instruct", "H100 SXM", 2, quant="GPTQ", engine="vllm"))
    assert "tencent/Hunyuan-A13B-Instruct-GPTQ-Int4" in g.command


def test_fp8_uses_the_publishers_fp8_repo_when_known():
    p = vllm.plan(make_input("glm-4.5-air", "H100 SXM", 4, quant="FP8", engine="vllm"))
    assert "vllm serve zai-org/GLM-4.5-Air-FP8 " in p.command


def test_gemma_qat_gguf_repo_serves_q4_0_only():
    assert flag(llama_cpp.plan(make_input("gemma-3-4b-it", "RTX 4090", quant="Q4_0")), "-hf").value == \
        "google/gemma-3-4b-it-qat-q4_0-gguf:Q4_0"
    assert flag(llama_cpp.plan(make_input("gemma-3-4b-it", "RTX 4090", quant="Q8_0")), "-hf") is None
