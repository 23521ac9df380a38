"""`fitprobe plan` end to end through the real entry point: output, JSON contract, exit codes."""
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from fitprobe.cli import main


def run(*args):
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_fits_exit_0_and_human_table():
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090")
    assert code == 0
    assert "Verdict: FITS" in out and "$ llama-server" in out and "Quantization matrix" not in out
    lines = out.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 100  # readable by default
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--full")
    assert "Quantization matrix" in out and "Context scaling" in out and "128K" in out


def test_does_not_fit_exit_1():
    code, out = run("plan", "deepseek-v3", "--gpu", "RTX 3060 12GB")
    assert code == 1
    assert "DOES NOT FIT" in out
    assert "system RAM unknown: offloading to the CPU was not planned" in out  # RAM is never assumed


def test_json_contract_fields():
    code, out = run("plan", "qwen3-30b-a3b", "--gpu", "H100 SXM", "--json", "--ctx", "32768", "--batch", "2")
    assert code == 0
    data = json.loads(out)
    for path in ["model.id", "model.architecture", "model.params_total", "model.params_active", "model.n_layers",
                 "settings.quant", "settings.context", "settings.kv_cache_dtype", "settings.batch", "settings.engine",
                 "hardware.name", "hardware.count", "hardware.memory_bytes", "hardware.usable_bytes",
                 "memory.weights_bytes", "memory.kv_cache_bytes", "memory.buffers_bytes", "memory.total_bytes",
                 "verdict.status", "verdict.margin_bytes", "verdict.utilization", "schema_version"]:
        node = data
        for key in path.split("."):
            node = node[key]
        assert node is not None, path
    m = data["memory"]
    assert m["total_bytes"] == m["weights_bytes"] + m["kv_cache_bytes"] + m["buffers_bytes"]
    assert data["settings"]["batch"] == 2 and data["settings"]["context"] == 32768
    assert len(data["matrix"]) >= 20
    rows = {r["context"]: r for r in data["scaling"]}
    assert set(rows) == {4096, 8192, 16384, 32768, 40960, 65536, 131072}  # the six + the model's 40960
    assert rows[65536]["beyond_model_max"] and not rows[40960]["beyond_model_max"]


@pytest.mark.parametrize("args,code,text", [
    (["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4909"], 2, "did you mean: RTX 4090"),
    (["plan", "lama-3.1-8b-instruct", "--gpu", "RTX 4090"], 3, "did you mean"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--ctx", "0"], 2, "--ctx"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--ctx", "-5"], 2, "--ctx"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--quant", "Q9_Z"], 2, "unknown quantization"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--kv-cache", "fp8"], 2, "llama.cpp does not support"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--engine", "vllm", "--kv-cache", "q4_0"], 2, "vllm"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "M4 Max 64GB", "--engine", "vllm"], 2, "Apple"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "Tesla P40", "--engine", "vllm"], 2, "compute capability 7.0"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "V100 SXM2 32GB", "--engine", "sglang"], 2, "compute capability 7.5"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--gpus", "0"], 2, "--gpus"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--min-margin", "lots"], 2, "size"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--ctx", "1000000000000"], 2, "not a possible context"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--batch", "10000000"], 2, "not plausible"),
    (["plan", "llama-3.1-8b-instruct", "--gpu", "cpu", "--engine", "vllm"], 2, "needs a GPU"),
])
def test_bad_input_is_one_line(args, code, text):
    got, out = run(*args)
    assert got == code, out
    assert text in out
    assert "Traceback" not in out
    assert len(out.strip().splitlines()) == 1


def test_config_json_path_and_directory(tmp_path):
    from fitprobe.catalogs.models import find_model

    cfg = tmp_path / "mymodel" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(find_model("qwen3-8b").config))
    for target in (str(cfg), str(cfg.parent)):
        code, out = run("plan", target, "--gpu", "RTX 4090", "--json")
        assert code == 0
        assert json.loads(out)["model"]["architecture"] == "qwen3"


@pytest.mark.parametrize("content,text", [
    ("{not json", "not valid JSON"),
    ('{"model_type": "llama", "hidden_size": 4096}', "missing"),
    ('{"model_type": "brand_new_arch", "hidden_size": 8}', "unknown architecture"),
    ("[1, 2]", "JSON object"),
])
def test_malformed_config(tmp_path, content, text):
    path = tmp_path / "config.json"
    path.write_text(content)
    code, out = run("plan", str(path), "--gpu", "RTX 4090")
    assert code == 3 and text in out and "Traceback" not in out


def test_multi_gpu_split_and_cpu_only():
    code, out = run("plan", "llama-3.1-70b-instruct", "--gpu", "RTX 4090", "--gpus", "4", "--json")
    data = json.loads(out)
    assert code == 0 and len(data["memory"]["per_device"]) == 4
    assert sum(d["layers"] for d in data["memory"]["per_device"]) == 80
    code, out = run("plan", "qwen3-0.6b", "--gpu", "cpu", "--ram-gib", "16", "--json")
    data = json.loads(out)
    assert code == 0 and data["hardware"]["count"] == 0 and data["memory"]["host_weights_bytes"] > 0


def test_apple_uses_working_set_not_all_ram():
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "Mac Studio M3 Ultra 512GB", "--json")
    data = json.loads(out)
    assert data["hardware"]["usable_bytes"] < 0.8 * data["hardware"]["memory_bytes"]


def test_partial_offload_spills_to_ram():
    code, out = run("plan", "llama-3.1-70b-instruct", "--gpu", "RTX 4090", "--ngl", "40", "--json")
    data = json.loads(out)
    assert data["memory"]["gpu_layers"] == 39 and data["memory"]["host_weights_bytes"] > 10 * 2**30


def test_python_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "fitprobe", "plan", "qwen3-0.6b", "--gpu", "T4", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["verdict"]["status"] == "fits"


def test_contract_doc_is_current():
    """docs/json-contract.md is generated from PlanOutput; regenerate with scripts/contract_doc.py."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(root / "scripts" / "contract_doc.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_list_catalogs():
    code, out = run("list", "models")
    assert code == 0 and "llama-3.1-8b-instruct" in out
    code, out = run("list", "gpus", "--json")
    assert code == 0 and any(g["name"] == "RTX 4090" for g in json.loads(out))
    code, out = run("list", "quants")
    assert code == 0 and "Q4_K_M" in out


def test_short_gpu_names_and_custom_devices():
    code, out = run("plan", "qwen3-8b", "--gpu", "4090", "--json")
    assert code == 0 and json.loads(out)["hardware"]["name"] == "RTX 4090"
    code, out = run("plan", "qwen3-8b", "--gpu", "a100")  # ambiguous: 40/80 GB, PCIe/SXM
    assert code == 2 and "A100 40GB PCIe" in out and "A100 80GB SXM4" in out and out.count("\n") == 1
    code, out = run("plan", "qwen3-8b", "--gpu", "RTX 4090 Titan")
    assert code == 2 and "did you mean" in out
    code, out = run("plan", "qwen3-8b", "--gpu", "MyCard X1", "--memory-gib", "20", "--json")
    data = json.loads(out)
    assert code == 0 and data["hardware"]["memory_bytes"] == 20 * 2**30
    code, out = run("plan", "deepseek-v3", "--gpu", "Jetson AGX Orin", "--memory-gib", "32", "--json")
    assert json.loads(out)["hardware"]["memory_bytes"] == 32 * 2**30  # --memory-gib overrides the catalog
    code, out = run("plan", "deepseek-v3", "--gpu", "Kunlunxin P800", "--gpus", "8", "--json")
    assert code in (0, 1) and json.loads(out)["hardware"]["count"] == 8
    assert json.loads(out)["hardware"]["devices"][0]["memory_bytes"] == 96 * 2**30  # xpu_smi: 98304 MiB


def test_an_approximate_format_says_why_its_band_is_wide():
    """UD-IQ1_S on DeepSeek is sized by the IQ1_S mix, 28 % under the published 186 GB file: the band says so."""
    code, out = run("plan", "deepseek-r1", "--gpu", "H200", "--gpus", "2", "--quant", "UD-IQ1_S", "--json")
    verdict = json.loads(out)["verdict"]
    assert verdict["weights_spread"] > 0.3 and "UD-IQ1_S is sized approximately" in verdict["band_note"]
    assert verdict["uncertainty_bytes"] > 30 * (1 << 30)
    code, out = run("plan", "deepseek-r1", "--gpu", "H200", "--gpus", "2", "--quant", "UD-IQ1_S")
    assert "the weights' error band adds 39%" in " ".join(out.split())
    code, out = run("plan", "deepseek-r1", "--gpu", "H200", "--gpus", "2", "--quant", "UD-Q2_K_XL", "--json")
    verdict = json.loads(out)["verdict"]
    assert verdict["weights_spread"] == 0 and verdict["band_note"] == ""  # sized by its DeepSeek recipe


def test_speed_says_how_far_it_lands_on_runs_the_fit_never_saw():
    """Each speed carries its backend's leave-one-source-out error (scripts/speed_accuracy.py --write): the text
    says it under the speed line and the JSON carries it, so a pipeline can size its own margin."""
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090")
    assert code == 0 and "held out of the fit, published llama.cpp/cuda runs: decode ±" in " ".join(out.split())
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--json")
    speed = json.loads(out)["speed"]
    for kind in ("decode_error", "prefill_error"):
        e = speed[kind]
        assert 0 < e["median"] <= e["p90"] and e["points"] >= 30 and e["sources"] >= 5


@pytest.mark.parametrize("model,gpu", [("llama-3.1-8b-instruct", "RTX 4090"), ("qwen3-4b", "RTX 5090"),
                                       ("qwen3-30b-a3b", "H100 SXM"), ("llama-3.1-70b-instruct", "A100 SXM4 80GB")])
def test_headline_and_speed_line_print_one_figure(model, gpu):
    """The verdict's tok/s and the speed line describe one deployment: printed from one value (the deployment's
    JSON figure is rounded to 2 decimals; formatting that again once showed 130.8 above a 130.9)."""
    import re

    code, out = run("plan", model, "--gpu", gpu)
    head = re.search(r"(?:Verdict|Recommended): \w[\w ]* — ~([\d,.]+) tok/s", out)
    line = re.search(r"speed: decode ~([\d,.]+) tok/s", out)
    assert head and line and head.group(1) == line.group(1)
