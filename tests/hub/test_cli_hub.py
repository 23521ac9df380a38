"""`fitprobe plan/check <HF id>` through the real huggingface_hub client against the loopback Hub."""
import json

from click.testing import CliRunner

from fitprobe.cli import main

from .conftest import SHA_A, SHA_B, fixture_bytes
from .hubserver import FakeRepo, Listed

QWEN = "Qwen/Qwen3-0.6B"
QWEN_GGUF = "unsloth/Qwen3-0.6B-GGUF"
Q4_SIZE = 396_705_472  # a test value for the listing


def run(*args, env=None):
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.output


def add_qwen(hub, **kw):
    return hub.add(FakeRepo(QWEN, SHA_A, files={"config.json": fixture_bytes("qwen3-0.6b.config.json")},
                            safetensors={"parameters": {"BF16": 751_632_384}, "total": 751_632_384}, **kw))


def add_qwen_gguf(hub):
    files = {"Qwen3-0.6B-Q4_K_M.gguf": Listed(Q4_SIZE, "1" * 64), "Qwen3-0.6B-Q8_0.gguf": Listed(639_446_688, "2" * 64)}
    return hub.add(FakeRepo(QWEN_GGUF, SHA_B, files=files, tags=["gguf", f"base_model:quantized:{QWEN}"]))


def test_plan_hf_id_uses_config_and_exact_checkpoint_size(hub):
    add_qwen(hub)
    code, out = run("plan", QWEN, "--gpu", "RTX 4090", "--json", "--quant", "BF16")
    data = json.loads(out)
    assert code == 0
    assert data["model"]["source"] == "Hugging Face Hub" and data["model"]["hf_id"] == QWEN
    assert data["memory"]["weights_source"] == "exact from checkpoint"
    assert data["memory"]["model_file_bytes"] == 751_632_384 * 2
    bf16 = next(r for r in data["matrix"] if r["quant"] == "BF16")
    assert bf16["weights_source"] == "exact from checkpoint"


def test_llama_server_hf_form_on_a_gguf_repo_uses_real_file_size(hub):
    add_qwen(hub)
    add_qwen_gguf(hub)
    code, out = run("plan", f"{QWEN_GGUF}:Q4_K_M", "--gpu", "RTX 4090", "--json")
    data = json.loads(out)
    assert code == 0, out
    assert data["settings"]["quant"] == "Q4_K_M"
    assert data["memory"]["model_file_bytes"] == Q4_SIZE
    assert data["memory"]["weights_source"].startswith("real file size")
    q8 = next(r for r in data["matrix"] if r["quant"] == "Q8_0")
    assert q8["weights_source"].startswith("real file size")
    assert any("base model" in n for n in data["notes"])


def test_gguf_quant_of_a_base_repo_is_found_in_its_gguf_repo(hub):
    add_qwen(hub)
    add_qwen_gguf(hub)
    code, out = run("plan", f"{QWEN}:Q4_K_M", "--gpu", "RTX 4090", "--json")
    data = json.loads(out)
    assert code == 0, out
    assert data["memory"]["model_file_bytes"] == Q4_SIZE
    assert any(QWEN_GGUF in n for n in data["notes"])


def test_missing_quant_in_gguf_repo(hub):
    add_qwen(hub)
    add_qwen_gguf(hub)
    code, out = run("plan", f"{QWEN_GGUF}:IQ2_XXS", "--gpu", "RTX 4090")
    assert code == 3 and "has no IQ2_XXS" in out and "Q4_K_M" in out


def test_gated_repo_is_exit_3_one_line(hub):
    add_qwen(hub, gated=True)
    code, out = run("plan", QWEN, "--gpu", "RTX 4090")
    assert code == 3 and "licen" in out.lower() and "HF_TOKEN" in out
    assert len(out.strip().splitlines()) == 1
    result = CliRunner().invoke(main, ["plan", QWEN, "--gpu", "RTX 4090", "--token", "hf_secret_value_123", "--json"])
    assert result.exit_code == 3 and "hf_secret_value_123" not in result.output
    error = json.loads(result.stdout)["error"]  # --json: the error is a JSON object on stdout
    assert error["code"] == 3 and error["kind"] == "model_not_found" and "licen" in error["message"].lower()
    assert len(result.stderr.strip().splitlines()) == 1 and "licen" in result.stderr.lower()


def test_unknown_repo_is_exit_3(hub):
    code, out = run("plan", "nobody/does-not-exist", "--gpu", "RTX 4090")
    assert code == 3 and "Traceback" not in out


def test_offline_falls_back_to_bundled_catalog_and_says_so(hub):
    code, out = run("plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "RTX 4090", "--json",
                    env={"HF_HUB_OFFLINE": "1"})
    data = json.loads(out)
    assert code == 0
    assert data["model"]["id"] == "llama-3.1-8b-instruct"
    assert "bundled" in data["model"]["source"]


def test_hub_unreachable_unknown_model_is_a_clear_error(hub):
    hub.stop()
    code, out = run("plan", "someorg/not-bundled-model", "--gpu", "RTX 4090")
    assert code == 75 and "not in the bundled catalog: retry later" in out  # unreachable is not "no such model"


def test_check_with_hf_id(hub):
    add_qwen(hub)
    code, out = run("check", QWEN, "--json")
    data = json.loads(out)
    assert code == 0 and data["hardware"]["source"] == "probe" and data["model"]["hf_id"] == QWEN


def test_prequantized_repo_is_sized_as_it_is(hub):
    config = json.loads(fixture_bytes("qwen3-0.6b.config.json"))
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128],
                                     "activation_scheme": "dynamic"}
    hub.add(FakeRepo("Qwen/Qwen3-0.6B-FP8", SHA_A, files={"config.json": json.dumps(config).encode()},
                     safetensors={"parameters": {"F8_E4M3": 440_000_000, "BF16": 311_000_000, "F32": 1_000_000},
                                  "total": 752_000_000}))
    code, out = run("plan", "Qwen/Qwen3-0.6B-FP8", "--gpu", "RTX 4090", "--json")
    data = json.loads(out)
    assert code == 0, out
    assert data["settings"]["quant"] == "FP8" and data["settings"]["engine"] == "vllm"
    assert data["memory"]["weights_source"] == "exact from checkpoint"
    assert data["memory"]["model_file_bytes"] == 440_000_000 + 2 * 311_000_000 + 4 * 1_000_000
