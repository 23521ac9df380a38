"""Start-up guard: each plain path imports only what its answer needs. Every case runs in a fresh
interpreter (after one run has validated the catalogs) and reports the modules it ended up with."""
import json
import os
import subprocess
import sys

import pytest

from fitprobe.catalogs.models import find_model

RUN = """
import json, sys
from fitprobe import cli
sys.argv = ["fitprobe", *json.loads(sys.argv[1])]
try:
    cli.entry()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""

MODEL = "llama-3.1-8b-instruct"
HEAVY = {"pydantic", "pydantic_core", "huggingface_hub", "httpx", "httpx2", "gguf", "numpy", "psutil", "pynvml",
         "babel", "jinja2"}  # babel: only es/de/zh text (fitprobe.i18n); jinja2: only the HTML report
# Modules of answers a plan does not give: the report's sections, probing, the Hub, GGUF files, other commands.
NOT_FOR_PLAN = {"fitprobe.estimator.cost", "fitprobe.estimator.finetune", "fitprobe.estimator.diagnosis",
                "fitprobe.estimator.recommend", "fitprobe.verify", "fitprobe.html_report", "fitprobe.cmd_report",
                "fitprobe.cmd_probe", "fitprobe.cmd_list", "fitprobe.cmd_schema", "fitprobe.cmd_fit",
                "fitprobe.cmd_simulate", "fitprobe.probe", "fitprobe.catalogs.hub", "fitprobe.catalogs.gguf_file", "fitprobe.catalogs.cloud"}
HUMAN_ONLY = {"fitprobe.render", "fitprobe.estimator.launch.text"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    env = {**os.environ, "FITPROBE_CACHE_DIR": str(tmp_path_factory.mktemp("memo")), "LC_ALL": "C.UTF-8"}

    def imported(*args: str) -> set[str]:
        proc = subprocess.run([sys.executable, "-c", RUN, json.dumps(args)], capture_output=True, text=True,
                              timeout=120, env=env)
        assert proc.stdout, proc.stderr
        return set(json.loads(proc.stderr.strip().splitlines()[-1]))

    imported("plan", MODEL, "--gpu", "RTX 4090")  # the first run on a machine validates the catalog files it reads
    return imported


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory, run):
    """A tiny llama GGUF (written with the gguf package: tests may import it, `plan` may not), read once
    (the first read on a machine validates catalogs/data/gguf_types.json)."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    path = tmp_path_factory.mktemp("gguf") / "tiny-F16.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    for method, value in (("add_block_count", 1), ("add_context_length", 4096), ("add_embedding_length", 64),
                          ("add_feed_forward_length", 128), ("add_head_count", 4), ("add_head_count_kv", 2),
                          ("add_file_type", int(gguf.LlamaFileType.MOSTLY_F16)), ("add_vocab_size", 32)):
        getattr(w, method)(value)
    w.add_tensor("token_embd.weight", np.zeros((32, 64), dtype=np.float16))
    for name, shape in (("attn_q", (64, 64)), ("attn_k", (32, 64)), ("attn_v", (32, 64)), ("attn_output", (64, 64)),
                        ("ffn_gate", (128, 64)), ("ffn_up", (128, 64)), ("ffn_down", (64, 128))):
        w.add_tensor(f"blk.0.{name}.weight", np.zeros(shape, dtype=np.float16))
    for name in ("blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "output_norm.weight"):
        w.add_tensor(name, np.zeros(64, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    run("plan", str(path), "--gpu", "RTX 4090")
    return path


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    (d / "config.json").write_text(json.dumps(find_model(MODEL).config))
    return d


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("source,json_args", [
    ("catalog", []), ("catalog", ["--json"]), ("catalog", ["--brief"]), ("catalog", ["--fields", "verdict,speed"]),
    ("config dir", ["--json"]), ("config.json", []), (".gguf", ["--json"]),
])
def test_plan_imports_neither_pydantic_nor_the_hub_nor_other_answers(run, config_dir, gguf_file, source, json_args):
    model = {"catalog": MODEL, "config dir": str(config_dir), "config.json": str(config_dir / "config.json"),
             ".gguf": str(gguf_file)}[source]
    modules = run("plan", model, "--gpu", "RTX 4090", *json_args)
    assert "fitprobe.estimator.plan" in modules  # it did size the plan
    assert not _top(modules) & HEAVY, sorted(_top(modules) & HEAVY)
    unwanted = NOT_FOR_PLAN - ({"fitprobe.catalogs.gguf_file"} if source == ".gguf" else set())
    unwanted |= HUMAN_ONLY if json_args else {"fitprobe.contract", "fitprobe.record_json"}
    assert not {m for m in modules if m in unwanted or m.startswith("fitprobe.probe.")}


def test_check_probes_without_pydantic_or_the_hub(run):
    modules = run("check", MODEL, "--json")
    assert "fitprobe.probe.registry" in modules and "fitprobe.estimator.plan" in modules
    assert not _top(modules) & {"pydantic", "pydantic_core", "huggingface_hub", "httpx"}
    assert not modules & NOT_FOR_PLAN - {"fitprobe.probe"}


def test_the_guard_sees_a_heavy_import(run):
    """The same harness on a command that needs pydantic (the JSON Schema) does report it."""
    assert "pydantic" in run("schema")


def test_a_plan_on_a_gpu_named_by_its_key_builds_that_gpu_s_record_alone():
    """gpus.json holds ~200 devices: a GPU named by its catalog key builds one record, not the catalog."""
    code = ("import sys; from fitprobe import cli; from fitprobe.catalogs import gpus\n"
            f"sys.argv = ['fitprobe', 'plan', {MODEL!r}, '--gpu', 'RTX 4090', '--json']\n"
            "try:\n    cli.entry()\nexcept SystemExit:\n    pass\n"
            "print(gpus.load_gpus.cache_info().currsize, gpus._entries_of.cache_info().currsize, file=sys.stderr)")
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert json.loads(proc.stdout)["hardware"]["devices"][0]["name"] == "RTX 4090", proc.stderr
    assert proc.stderr.split()[-2:] == ["0", "1"]
