"""Hub results are records (no pydantic on the Hub path): what fetch_model builds from the loopback
Hub must match its declared field types, which `fitprobe.record_json` checks."""
import json
import os
import subprocess
import sys

from fitprobe.catalogs.hub import fetch_model, find_gguf_repos, parse_model_ref
from fitprobe.record_json import record_data

from .conftest import SHA_A, fixture_bytes, listing_repo, safetensors_bytes
from .hubserver import FakeRepo


def test_fetched_models_and_candidates_match_their_declared_types(hub):
    hub.add(FakeRepo("Qwen/Qwen3-0.6B", SHA_A, files={"config.json": fixture_bytes("qwen3-0.6b.config.json"),
                                                      "model.safetensors": safetensors_bytes({"w": ("BF16", [4, 4])})},
                     safetensors={"parameters": {"BF16": 751632384}, "total": 751632384}))
    hub.add(listing_repo("unsloth/DeepSeek-R1-GGUF"))
    hub.add(FakeRepo("bartowski/Qwen_Qwen3-0.6B-GGUF", SHA_A, tags=["gguf", "base_model:quantized:Qwen/Qwen3-0.6B"]))
    for model in (fetch_model("Qwen/Qwen3-0.6B"), fetch_model("unsloth/DeepSeek-R1-GGUF")):
        assert record_data(model)["repo_id"] == model.repo_id
    assert model.gguf_files and all(record_data(f) for f in model.gguf_files)
    ref = parse_model_ref("unsloth/DeepSeek-R1-GGUF:q4_k_m")
    assert record_data(ref) == {"repo_id": "unsloth/DeepSeek-R1-GGUF", "revision": None, "quant": "Q4_K_M"}
    candidates = find_gguf_repos("Qwen/Qwen3-0.6B", limit=5)
    assert [record_data(c)["match"] for c in candidates] == ["base_model"]


def test_a_hub_id_imports_the_hub_client_but_not_pydantic(hub, tmp_path):
    hub.add(FakeRepo("Qwen/Qwen3-0.6B", SHA_A, files={"config.json": fixture_bytes("qwen3-0.6b.config.json")}))
    code = ("import sys\nfrom fitprobe import cli\n"
            "sys.argv = ['fitprobe', 'plan', 'Qwen/Qwen3-0.6B', '--gpu', 'RTX 4090', '--json']\n"
            "try:\n    cli.entry()\nexcept SystemExit:\n    pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules}), file=sys.stderr)")
    env = {**os.environ, "FITPROBE_CACHE_DIR": str(tmp_path / "memo")}
    subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, env=env)  # validates the catalogs
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert json.loads(proc.stdout)["model"]["source"] == "Hugging Face Hub", proc.stderr
    modules = proc.stderr.strip().splitlines()[-1]
    assert "'huggingface_hub'" in modules and "'pydantic'" not in modules
