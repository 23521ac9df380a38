"""`fitprobe plan model.gguf`: exact weights from the header, KV from its metadata, no config.json."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from fitprobe.cli import main

from .test_gguf_file import DENSE_KV, q8_0, write

gguf = pytest.importorskip("gguf")


def test_plan_local_gguf_sizes_from_tensors(tmp_path):
    tensors = {"token_embd.weight": np.zeros((100, 64), dtype=np.float16),
               "output_norm.weight": np.zeros(64, dtype=np.float32)}
    for i in range(2):
        tensors |= {f"blk.{i}.attn_q.weight": q8_0(64, 64), f"blk.{i}.attn_k.weight": q8_0(32, 64),
                    f"blk.{i}.attn_v.weight": q8_0(32, 64), f"blk.{i}.attn_output.weight": q8_0(64, 64),
                    f"blk.{i}.ffn_gate.weight": q8_0(128, 64), f"blk.{i}.ffn_up.weight": q8_0(128, 64),
                    f"blk.{i}.ffn_down.weight": q8_0(64, 128), f"blk.{i}.attn_norm.weight": np.zeros(64, np.float32),
                    f"blk.{i}.ffn_norm.weight": np.zeros(64, np.float32)}
    path = write(tmp_path / "tiny-Q8_0.gguf", "llama", DENSE_KV, tensors)
    result = CliRunner().invoke(main, ["plan", str(path), "--gpu", "RTX 4090", "--json", "--ctx", "4096"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    expected = sum(a[0].nbytes if isinstance(a, tuple) else a.nbytes for a in tensors.values())
    assert data["memory"]["model_file_bytes"] == expected
    assert data["memory"]["weights_source"] == "exact from GGUF header"
    assert data["settings"]["quant"] == "Q8_0"
    # 2 layers x 2 KV heads x 16 dims x (K+V) x 2 bytes x 4096 cells
    assert data["memory"]["kv_cache_bytes"] == 2 * 2 * 16 * 2 * 2 * 4096


def test_missing_gguf_is_exit_3(tmp_path):
    result = CliRunner().invoke(main, ["plan", str(tmp_path / "nope.gguf"), "--gpu", "RTX 4090"])
    assert result.exit_code == 3 and "does not exist" in result.output


def test_garbage_gguf_is_exit_3(tmp_path):
    path = tmp_path / "junk.gguf"
    path.write_bytes(b"not a gguf file at all")
    result = CliRunner().invoke(main, ["plan", str(path), "--gpu", "RTX 4090"])
    assert result.exit_code == 3 and "Traceback" not in result.output


def test_local_gguf_keeps_its_path_in_every_command(tmp_path):
    tensors = {"token_embd.weight": np.zeros((100, 64), dtype=np.float16),
               "output_norm.weight": np.zeros(64, dtype=np.float32)}
    for i in range(2):
        tensors |= {f"blk.{i}.attn_q.weight": q8_0(64, 64), f"blk.{i}.attn_k.weight": q8_0(32, 64),
                    f"blk.{i}.attn_v.weight": q8_0(32, 64), f"blk.{i}.attn_output.weight": q8_0(64, 64),
                    f"blk.{i}.ffn_gate.weight": q8_0(128, 64), f"blk.{i}.ffn_up.weight": q8_0(128, 64),
                    f"blk.{i}.ffn_down.weight": q8_0(64, 128), f"blk.{i}.attn_norm.weight": np.zeros(64, np.float32),
                    f"blk.{i}.ffn_norm.weight": np.zeros(64, np.float32)}
    path = write(tmp_path / "tiny-Q8_0.gguf", "llama", DENSE_KV, tensors)
    result = CliRunner().invoke(main, ["plan", str(path), "--gpu", "RTX 4090", "--json", "--ctx", "4096"])
    assert result.exit_code == 0, result.output
    launch = json.loads(result.output)["launch"]
    assert str(path) in launch["llama.cpp"]["command"]
    assert any(str(path) in line for line in launch["ollama"]["setup"])  # Modelfile FROM the file
