"""`--verify` against the pinned llama-fit-params: any model without its weights, and a local GGUF as it is."""
from __future__ import annotations

import json

from click.testing import CliRunner

from fitprobe.cli import main
from fitprobe.estimator.quant import tensor_types
from fitprobe.sparse_gguf import write_sparse_gguf

from .conftest import spec_of


def plan_json(args: list[str]) -> dict:
    r = CliRunner().invoke(main, ["plan", *args, "--json"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


def test_catalog_model_is_verified_from_a_sparse_gguf(llama_bin):
    out = plan_json(["qwen3-8b", "--gpu", "cpu", "--ram-gib", "64", "--ctx", "8192", "--verify",
                     "--llama-fit-params", str(llama_bin / "llama-fit-params")])
    v = out["verify"]
    assert v["gguf"] == "sparse" and v["error"] is None, v
    host = {c["component"]: c for c in v["components"] if c["device"] == "Host"}
    assert set(host) == {"model", "context", "compute"}
    # weights and the KV cache agree to the MiB llama.cpp prints (floored on both sides)
    assert abs(host["model"]["difference_mib"]) <= 1, host["model"]
    assert abs(host["context"]["difference_mib"]) <= 1, host["context"]
    assert v["ok"] and v["fitted_args"].startswith("-c 8192"), v
    assert out["llama_cpp_build"] == 11434


def test_local_gguf_is_verified_as_it_is(llama_bin, tmp_path, table):
    spec = spec_of("llama-3.2-1b-instruct")
    path = tmp_path / "Llama-3.2-1B-Q8_0.gguf"
    write_sparse_gguf(spec, path, tensor_types(spec, table.find("Q8_0")))
    out = plan_json([str(path), "--gpu", "cpu", "--ram-gib", "64", "--ctx", "4096", "--verify",
                     "--llama-fit-params", str(llama_bin / "llama-fit-params")])
    v = out["verify"]
    assert v["gguf"] == str(path) and v["components"], v
    host = {c["component"]: c for c in v["components"] if c["device"] == "Host"}
    assert abs(host["model"]["difference_mib"]) <= 1, host["model"]


def test_unsupported_architecture_is_a_one_line_error(llama_bin):
    out = plan_json(["deepseek-v4-flash", "--gpu", "cpu", "--ram-gib", "2048", "--ctx", "4096", "--verify",
                     "--llama-fit-params", str(llama_bin / "llama-fit-params")])
    v = out["verify"]
    assert not v["ok"] and "deepseek_v4" in v["error"] and "\n" not in v["error"]
