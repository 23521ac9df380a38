"""Local GGUF headers, on tiny files written here with gguf.GGUFWriter (real metadata keys)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from fitprobe.catalogs.gguf_file import GgufFileError, gguf_to_config, read_gguf  # noqa: E402


def write(path: Path, arch: str, kv: dict, tensors: dict, split: tuple[int, int] | None = None) -> Path:
    """kv: GGUFWriter method name -> value; tensors: name -> np array or (uint8 bytes, ggml type)."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_type(gguf.GGUFType.MODEL)
    for method, value in kv.items():
        getattr(w, method)(value)
    if split:
        w.add_uint16(gguf.Keys.Split.LLM_KV_SPLIT_NO, split[0])
        w.add_uint16(gguf.Keys.Split.LLM_KV_SPLIT_COUNT, split[1])
    for name, t in tensors.items():
        if isinstance(t, tuple):
            w.add_tensor(name, t[0], raw_dtype=t[1])
        else:
            w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


DENSE_KV = {
    "add_name": "tiny-llama", "add_block_count": 2, "add_context_length": 4096, "add_embedding_length": 64,
    "add_feed_forward_length": 128, "add_head_count": 4, "add_head_count_kv": 2, "add_rope_freq_base": 500000.0,
    "add_file_type": int(gguf.LlamaFileType.MOSTLY_Q8_0), "add_token_list": [f"t{i}" for i in range(100)],
}


def q8_0(rows: int, cols: int):
    """A Q8_0 tensor of rows x cols elements: 32-element blocks of 34 bytes."""
    return (np.zeros((rows, cols // 32 * 34), dtype=np.uint8), gguf.GGMLQuantizationType.Q8_0)


def test_dense_model_metadata_tensors_and_config(tmp_path):
    p = write(tmp_path / "tiny-Q8_0.gguf", "llama", DENSE_KV, {
        "token_embd.weight": np.zeros((100, 64), dtype=np.float16),
        "blk.0.attn_q.weight": q8_0(64, 64),
        "blk.0.attn_norm.weight": np.zeros(64, dtype=np.float32),
    })
    info = read_gguf(p)
    assert info.architecture == "llama" and info.name == "tiny-llama" and info.file_type == "Q8_0"
    assert info.metadata["block_count"] == 2 and info.metadata["attention.head_count_kv"] == 2
    assert info.vocab_size == 100  # from the token list: no llama.vocab_size key
    t = {x.name: x for x in info.tensors}
    assert t["token_embd.weight"].ggml_type == "F16" and t["token_embd.weight"].n_bytes == 100 * 64 * 2
    assert t["token_embd.weight"].shape == [64, 100]  # GGUF order: fastest dimension first
    assert t["blk.0.attn_q.weight"].ggml_type == "Q8_0" and t["blk.0.attn_q.weight"].n_bytes == 64 * 64 // 32 * 34
    assert info.total_bytes == 100 * 64 * 2 + 64 * 64 // 32 * 34 + 64 * 4
    assert info.total_params == 100 * 64 + 64 * 64 + 64
    assert info.bytes_by_type()["F32"] == 256

    cfg = gguf_to_config(info)
    assert cfg == {
        "model_type": "llama", "gguf_architecture": "llama", "num_hidden_layers": 2, "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
        "vocab_size": 100, "max_position_embeddings": 4096, "rope_theta": 500000.0,
        "tie_word_embeddings": True, "gguf_file_type": "Q8_0",
    }


def test_mla_gguf_keeps_kv_lora_rank_and_is_not_read_as_mqa(tmp_path):
    # DeepSeek-V3 shapes as llama.cpp writes them since the MLA rework: head_count_kv=1,
    # key_length = kv_lora_rank + rope dims (576), value_length = kv_lora_rank (512),
    # per-head sizes in key_length_mla / value_length_mla.
    kv = {
        "add_block_count": 61, "add_context_length": 163840, "add_embedding_length": 7168,
        "add_feed_forward_length": 18432, "add_head_count": 128, "add_head_count_kv": 1,
        "add_key_length": 576, "add_value_length": 512, "add_key_length_mla": 192, "add_value_length_mla": 128,
        "add_kv_lora_rank": 512, "add_q_lora_rank": 1536, "add_rope_dimension_count": 64,
        "add_expert_count": 256, "add_expert_used_count": 8, "add_expert_shared_count": 1,
        "add_expert_feed_forward_length": 2048, "add_leading_dense_block_count": 3,
        "add_expert_gating_func": gguf.ExpertGatingFuncType.SIGMOID, "add_vocab_size": 129280,
    }
    p = write(tmp_path / "ds.gguf", "deepseek2", kv, {"output_norm.weight": np.zeros(8, dtype=np.float32)})
    cfg = gguf_to_config(read_gguf(p))
    assert cfg["model_type"] == "deepseek_v3" and cfg["kv_lora_rank"] == 512 and cfg["q_lora_rank"] == 1536
    assert cfg["qk_rope_head_dim"] == 64 and cfg["qk_nope_head_dim"] == 128 and cfg["v_head_dim"] == 128
    assert cfg["num_key_value_heads"] == 128 and cfg["gguf_head_count_kv"] == 1
    assert cfg["key_length_mla"] == 192 and cfg["value_length_mla"] == 128
    assert cfg["num_local_experts"] == 256 and cfg["num_experts_per_tok"] == 8
    assert cfg["moe_intermediate_size"] == 2048 and cfg["first_k_dense_replace"] == 3 and cfg["n_shared_experts"] == 1
    assert cfg["vocab_size"] == 129280


def test_sliding_window_ssm_and_per_layer_heads(tmp_path):
    kv = {"add_block_count": 3, "add_embedding_length": 64, "add_head_count": 4,
          "add_head_count_kv": [2, 0, 2], "add_sliding_window": 1024, "add_ssm_conv_kernel": 4,
          "add_ssm_state_size": 128, "add_ssm_inner_size": 128, "add_ssm_group_count": 1, "add_ssm_time_step_rank": 4}
    p = write(tmp_path / "hybrid.gguf", "granitehybrid", kv, {"output.weight": np.zeros((4, 64), dtype=np.float16)})
    cfg = gguf_to_config(read_gguf(p))
    assert cfg["num_key_value_heads"] == 2 and cfg["num_key_value_heads_per_layer"] == [2, 0, 2]
    assert cfg["sliding_window"] == 1024 and cfg["ssm_state_size"] == 128 and cfg["ssm_conv_kernel"] == 4
    assert "tie_word_embeddings" not in cfg  # no token_embd tensor: cannot tell


def test_split_gguf_reads_tensors_from_every_part(tmp_path):
    a = write(tmp_path / "m-Q8_0-00001-of-00002.gguf", "llama", DENSE_KV,
              {"token_embd.weight": np.zeros((100, 64), dtype=np.float16)}, split=(0, 2))
    write(tmp_path / "m-Q8_0-00002-of-00002.gguf", "llama", {},
          {"output.weight": np.zeros((100, 64), dtype=np.float16)}, split=(1, 2))
    info = read_gguf(a)
    assert len(info.files) == 2 and {t.name for t in info.tensors} == {"token_embd.weight", "output.weight"}
    assert gguf_to_config(info)["tie_word_embeddings"] is False
    (tmp_path / "m-Q8_0-00002-of-00002.gguf").unlink()
    with pytest.raises(GgufFileError, match="00002-of-00002.gguf is missing"):
        read_gguf(a)


def test_bad_files_raise_one_line_errors(tmp_path):
    with pytest.raises(GgufFileError, match="no such GGUF file"):
        read_gguf(tmp_path / "nope.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf at all" * 10)
    with pytest.raises(GgufFileError) as e:
        read_gguf(junk)
    assert "not a readable GGUF file" in str(e.value) and "\n" not in str(e.value)
