"""Start-up guard for the Hub-id path: a lookup goes through the client's shared session
(catalogs/hub_http.py), end to end against the loopback Hub, without the client's hf_api and
file_download modules (their import alone costs more than a whole catalog answer) or the stacks only
they need."""
import json
import os
import subprocess
import sys

from .conftest import SHA_A, fixture_bytes
from .hubserver import FakeRepo

RUN = """
import json, sys
from fitprobe import cli
sys.argv = ["fitprobe", *json.loads(sys.argv[1])]
try:
    cli.entry()
except SystemExit as exc:
    print(json.dumps({"code": exc.code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""
NOT_FOR_A_LOOKUP = {"huggingface_hub.hf_api", "huggingface_hub.file_download", "huggingface_hub.utils._auth",
                    "tqdm", "yaml", "filelock", "pydantic", "numpy", "gguf", "jinja2", "babel"}


def test_a_hub_id_is_sized_through_the_light_client(hub):
    hub.add(FakeRepo("Qwen/Qwen3-0.6B", SHA_A, files={"config.json": fixture_bytes("qwen3-0.6b.config.json")},
                     safetensors={"parameters": {"BF16": 751_632_384}, "total": 751_632_384}))
    argv = ["plan", "Qwen/Qwen3-0.6B", "--gpu", "RTX 4090", "--quant", "BF16", "--json", "-v"]
    for _ in range(2):  # the first run on a machine validates the catalog files (pydantic): check the second
        proc = subprocess.run([sys.executable, "-c", RUN, json.dumps(argv)], capture_output=True, text=True,
                              timeout=120, env={**os.environ})
    *lines, last = proc.stderr.strip().splitlines()
    result = json.loads(last)
    assert result["code"] == 0, proc.stderr
    assert lines == [next(x for x in lines if x.startswith("hub: 2 request(s) in"))]  # model info + config.json
    assert json.loads(proc.stdout)["memory"]["weights_source"] == "exact from checkpoint"
    modules = set(result["modules"])
    assert "huggingface_hub" in modules and "fitprobe.catalogs.hub_http" in modules
    loaded = {m for m in modules if m in NOT_FOR_A_LOOKUP or m.split(".")[0] in NOT_FOR_A_LOOKUP}
    assert not loaded, sorted(loaded)
