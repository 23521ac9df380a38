"""The hostile-input corpus (corpus/cases.json): every case ends with its exit code and ONE line on stderr
naming the problem, never a traceback; with --json (every other case) the same error is a JSON object on
stdout. Hub and probe failures have their own suites (tests/hub/test_hub_failures.py,
tests/probe/test_probe_failures.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fitprobe.catalogs.models import find_model
from fitprobe.cli import main

CASES = json.loads((Path(__file__).parent / "corpus" / "cases.json").read_text())["cases"]


def _config_bytes(case: dict) -> bytes:
    spec = case["config"]
    cfg = dict(find_model(spec["base"]).config)
    for key in spec["drop"]:
        cfg.pop(key, None)
    cfg.update(spec["set"])
    return json.dumps(cfg).encode()


def _raw_bytes(make: dict) -> bytes:
    if "bytes_hex" in make:
        return bytes.fromhex(make["bytes_hex"])
    if "utf16" in make:
        return make["utf16"].encode("utf-16")
    if "nest" in make:
        return ("[" * make["nest"] + "]" * make["nest"]).encode()
    return make["text"].encode()


_TYPES = {"uint32": "UINT32", "int32": "INT32", "float32": "FLOAT32", "string": "STRING"}


def _gguf(path: Path, spec: dict) -> None:
    """A small llama GGUF, then the case's keys written with the case's types."""
    gguf = pytest.importorskip("gguf")
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_token_list([f"t{i}" for i in range(16)])
    for key, (kind, value) in spec["set"].items():
        if kind == "bool_array":
            w.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.BOOL)
        else:
            w.add_key_value(key, value, getattr(gguf.GGUFValueType, _TYPES[kind]))
    w.add_tensor("token_embd.weight", np.zeros((16, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if spec.get("truncate"):
        path.write_bytes(path.read_bytes()[:spec["truncate"]])


def _args(case: dict, tmp_path: Path) -> list[str]:
    if "args" in case:
        return list(case["args"])
    if "config" in case or "raw" in case:
        folder = tmp_path / case["id"]
        folder.mkdir()
        (folder / "config.json").write_bytes(_config_bytes(case) if "config" in case else _raw_bytes(case["raw"]))
        return ["plan", str(folder), "--gpu", "RTX 4090"]
    path = tmp_path / f"{case['id']}.gguf"
    if "raw_gguf_hex" in case:
        path.write_bytes(bytes.fromhex(case["raw_gguf_hex"]))
    else:
        _gguf(path, case["gguf"])
    return ["plan", str(path), "--gpu", "RTX 4090"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case, tmp_path):
    args = _args(case, tmp_path)
    as_json = CASES.index(case) % 2 == 0
    if as_json:
        args.append("--json")
    r = CliRunner().invoke(main, args)
    assert r.exit_code == case["code"], r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert case["message"] in lines[0], lines[0]
    assert "Traceback" not in r.output and len(lines[0]) < 2000
    if as_json:
        error = json.loads(r.stdout)["error"]
        assert error["code"] == case["code"] and error["message"] == lines[0].removeprefix("error: ")
        assert error["kind"] in {"usage", "model_not_found", "model_unreadable"}


def test_corpus_is_big_enough_to_mean_something():
    assert len(CASES) >= 150 and len({c["id"] for c in CASES}) == len(CASES)


def test_a_full_disk_is_a_clear_output_error():
    """`fitprobe plan ... > /dev/full`: exit 74 and one line on stderr, not an internal error."""
    import os
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "fitprobe", "plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090"],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 74 and proc.stderr == "error: cannot write the output: No space left on device\n"
