"""Engine overheads: llama.cpp's op-offload staging under --n-cpu-moe, vLLM's per-rank reserve."""
import pytest

from fitprobe.catalogs.gpus import find_gpu
from fitprobe.catalogs.quants import quant_table
from fitprobe.catalogs.resolve import resolve
from fitprobe.estimator.buffers import (OP_OFFLOAD_MIN_BATCH, VLLM_CUDA_GRAPH_BYTES, llama_cpp_offload_staging_bytes,
                                        vllm_overhead_bytes)
from fitprobe.estimator.hardware import Hardware
from fitprobe.estimator.memory import estimate
from fitprobe.estimator.quant import weight_bytes
from fitprobe.estimator.settings import RunSettings

GIB = 1 << 30
TABLE = quant_table()


def test_staging_is_the_largest_expert_tensor_plus_its_microbatch_activations():
    spec = resolve("gpt-oss-120b").spec
    fmt = TABLE.find("MXFP4")
    st = RunSettings(quant="MXFP4", ubatch=512, context=8192)
    got = llama_cpp_offload_staging_bytes(spec, fmt, TABLE, st, range(4))
    d, ff, e = spec.hidden_size, spec.moe.expert_ffn, spec.moe.n_experts
    tensor = e * d * ff * 17 // 32  # one of gate/up/down: every expert, MXFP4 blocks of 32 in 17 bytes
    acts = 4 * 512 * spec.moe.n_experts_used * (2 * ff + d)
    assert got == pytest.approx(tensor + acts, rel=0.01)
    bigger = llama_cpp_offload_staging_bytes(spec, fmt, TABLE, RunSettings(quant="MXFP4", ubatch=2048), range(4))
    assert bigger > got  # grows with -ub
    assert llama_cpp_offload_staging_bytes(spec, fmt, TABLE, st, range(0)) == 0
    small_ub = RunSettings(quant="MXFP4", ubatch=OP_OFFLOAD_MIN_BATCH - 1)
    assert llama_cpp_offload_staging_bytes(spec, fmt, TABLE, small_ub, range(4)) == 0  # stays on the CPU
    dense = resolve("llama-3.1-8b-instruct").spec
    assert llama_cpp_offload_staging_bytes(dense, TABLE.find("Q4_K_M"), TABLE, RunSettings(), range(4)) == 0


def test_expert_offload_grows_the_first_gpu_buffer():
    spec = resolve("qwen3-30b-a3b").spec
    fmt = TABLE.find("Q4_K_M")
    hw = Hardware(devices=[find_gpu("RTX 3090").device()] * 2)
    w = weight_bytes(spec, fmt, TABLE)
    full = estimate(spec, fmt, TABLE, RunSettings(context=4096), hw, weights=w)
    st = RunSettings(context=4096, cpu_moe_layers=10)
    off = estimate(spec, fmt, TABLE, st, hw, weights=w)
    staging = llama_cpp_offload_staging_bytes(spec, fmt, TABLE, st, range(10))
    assert staging > 0
    assert off.per_device[0].buffers_bytes == full.per_device[0].buffers_bytes + staging
    assert off.per_device[1].buffers_bytes == full.per_device[1].buffers_bytes  # ggml offloads to backend 0
    assert off.total_bytes == full.total_bytes - sum(w.experts_per_layer[:10]) + staging


def test_vllm_reserve_grows_with_tp_and_counts_graphs():
    h100 = 80 * GIB
    one, four = vllm_overhead_bytes(1, h100, cuda_graphs=False), vllm_overhead_bytes(4, h100, cuda_graphs=False)
    assert four == pytest.approx(4 * one, rel=1e-6)
    assert vllm_overhead_bytes(1, h100) - one == VLLM_CUDA_GRAPH_BYTES


def test_qwen3_235b_fp8_on_4_h100_leaves_about_the_logged_kv_budget():
    # vLLM issue 21348: "Available KV cache memory: 8.11 GiB" per rank (vLLM < 0.21: no graphs in the budget).
    # fitprobe had promised ~15 GiB (1.9x); the plan below counts the CUDA graphs of current vLLM too. On the
    # 79.18 GiB CUDA reports for an H100 (gpus.json cuda_total_mib) it leaves 8.08 GiB.
    spec = resolve("qwen3-235b-a22b").spec
    fmt = TABLE.find("FP8")
    st = RunSettings(quant="FP8", engine="vllm", kv_cache_dtype="auto", context=8192)
    hw = Hardware(devices=[find_gpu("H100 SXM").device()] * 4)
    mem = estimate(spec, fmt, TABLE, st, hw)
    d = mem.per_device[0]
    room = d.usable_bytes - d.weights_bytes - d.buffers_bytes + VLLM_CUDA_GRAPH_BYTES
    assert room / GIB == pytest.approx(8.11, rel=0.02)


def test_vllm_reserve_does_not_grow_with_tp_over_pcie():
    # RTX 3090s under TP logged 0.20 GiB non-torch memory per rank (vLLM PR 14447): no NVLink buffers
    mem = 24 * GIB
    assert vllm_overhead_bytes(4, mem, nvlink=False) == vllm_overhead_bytes(1, mem, nvlink=False)
    assert vllm_overhead_bytes(4, mem, nvlink=True) > vllm_overhead_bytes(4, mem, nvlink=False)


def test_meta_405b_fp8_checkpoint_keeps_the_listed_modules_bf16():
    # vLLM issue 6746: Meta-Llama-3.1-405B-Instruct-FP8 on 8 x H100, "Loading model weights took 57.7520 GB" per
    # rank. Meta's fbgemm_fp8 checkpoint keeps blocks 0 and 125, every self_attn and lm_head in BF16
    # (catalogs/data/measured_runs.json checkpoint_quantization, with its source).
    from fitprobe.catalogs.models import find_model
    from fitprobe.estimator.config import spec_from_config

    entry = find_model("llama-3.1-405b")
    skip = ["model.layers.0", "model.layers.125", "lm_head"] + [f"model.layers.{i}.self_attn" for i in range(1, 125)]
    q = {"quant_method": "fbgemm_fp8", "modules_to_not_convert": skip}
    spec = spec_from_config({**entry.config, "quantization_config": q}, name=entry.name)
    fmt = TABLE.find("FP8")
    meta = weight_bytes(spec, fmt, TABLE)
    on_load = weight_bytes(spec_from_config(entry.config, name=entry.name), fmt, TABLE)
    assert meta.per_layer[0] == meta.per_layer[125] > meta.per_layer[1] == meta.per_layer[124]
    assert meta.total / 8 / GIB == pytest.approx(57.752, rel=0.02)  # -1.8 %; quantized on load: -17 %
    assert on_load.total / 8 / GIB < 0.85 * 57.752


@pytest.mark.parametrize("gpu, logged_gib", [("RTX 3090", 23.58), ("RTX 5090", 31.37)])
def test_vllm_takes_its_share_of_the_cuda_total_vllm_logs(gpu, logged_gib):
    # "the current vLLM instance can use total_gpu_memory (23.58GiB) x gpu_memory_utilization" (vLLM PR 14447,
    # RTX 3090s) and "(31.37GiB)" on an RTX 5090 (vLLM issue 14452): the catalog's cuda_total_mib, not 24/32 GiB
    from fitprobe.estimator.memory import engine_usable_bytes

    device = find_gpu(gpu).device()
    assert device.driver_total_bytes / GIB == pytest.approx(logged_gib, abs=0.005)
    hw = Hardware(devices=[device])
    usable = engine_usable_bytes(hw, device, RunSettings(engine="vllm", gpu_memory_utilization=0.9))
    assert usable == int(device.driver_total_bytes * 0.9)
    assert usable < int(device.memory_bytes * 0.9)  # the nominal size would promise 0.4-0.6 GiB more
    assert engine_usable_bytes(hw, device, RunSettings(engine="llama.cpp")) == int(device.memory_bytes * 0.95)
