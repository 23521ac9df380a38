"""KV cache and recurrent state against llama.cpp's and vLLM's own allocation rules and logs."""
import pytest

from fitprobe.estimator.kv import kv_cache
from fitprobe.estimator.settings import RunSettings

MIB = 1 << 20


def llama(**kw):
    return RunSettings(engine="llama.cpp", **kw)


def test_llama3_8b_f16_is_128_kib_per_token(spec_of):
    kv = kv_cache(spec_of("llama-3.1-8b-instruct"), llama(context=8192))
    assert kv.total == 1024 * MIB  # llama.cpp logs "KV self size = 1024.00 MiB" at n_ctx 8192


def test_llama_cpp_pads_context_to_256(spec_of):
    kv = kv_cache(spec_of("llama-3.1-8b-instruct"), llama(context=5000))
    assert kv.cells_full == 5120


def test_q8_0_cache_uses_34_byte_blocks(spec_of):
    kv = kv_cache(spec_of("llama-3.1-8b-instruct"), llama(context=8192, kv_cache_dtype="q8_0"))
    assert kv.total == 2 * 32 * 8192 * (1024 // 32 * 34)  # 544 MiB


def test_mixtral_log(spec_of):
    # llama.cpp b1971 log (catalogs/data/measured_runs.json): K 32 MiB + V 32 MiB at n_ctx 512
    assert kv_cache(spec_of("mixtral-8x7b-v0.1"), llama(context=512)).total == 64 * MIB


def test_qwen35_hybrid_log(spec_of):
    # llama.cpp issue #20587: 4 slots, unified 4096 cells -> KV 80 MiB; recurrent R 11.25 + S 240 MiB
    spec = spec_of("qwen3.5-35b-a3b")
    attention = kv_cache(spec, llama(context=4096))
    assert attention.full == 80 * MIB
    state = kv_cache(spec, llama(context=4096, batch=4))
    assert state.recurrent == int(251.25 * MIB)


def test_gpt_oss_sliding_layers_capped_at_window_plus_ubatch(spec_of):
    kv = kv_cache(spec_of("gpt-oss-120b"), llama(context=8192))
    assert kv.full == 18 * 8192 * 8 * 64 * 2 * 2  # 18 global layers, 36 KiB/token
    assert kv.cells_window == 768  # pad256(128 + 512)
    assert kv.windowed == 18 * 768 * 8 * 64 * 2 * 2


def test_mla_caches_latent_not_heads(spec_of):
    spec = spec_of("deepseek-v3")
    kv = kv_cache(spec, llama(context=4096))
    assert kv.latent == 61 * 4096 * 576 * 2  # 68.6 KiB/token, K-only latent (2026 llama.cpp)
    assert kv.full == 0
    naive = 61 * 4096 * spec.n_heads * (192 + 128) * 2
    assert naive / kv.total > 30  # the trap other tools fall into


def test_dsa_adds_indexer_keys(spec_of):
    kv = kv_cache(spec_of("deepseek-v3.2"), llama(context=4096))
    assert kv.indexer == 61 * 4096 * 128 * 2


def test_recurrent_state_does_not_grow_with_context(spec_of):
    spec = spec_of("nemotron-3-nano-30b-a3b")
    short, long = kv_cache(spec, llama(context=4096)), kv_cache(spec, llama(context=131072))
    assert short.recurrent == long.recurrent > 0
    assert long.full > short.full


def test_vllm_blocks_of_16(spec_of):
    st = RunSettings(engine="vllm", context=20001, kv_cache_dtype="auto")
    kv = kv_cache(spec_of("llama-3.1-8b-instruct"), st)
    assert kv.total == 20016 * 128 * 1024


def test_vllm_replicates_kv_heads_beyond_tp(spec_of):
    spec = spec_of("llama-3.1-8b-instruct")  # 8 KV heads
    st = RunSettings(engine="vllm", context=4096, kv_cache_dtype="auto")
    assert kv_cache(spec, st, tensor_parallel=16).total == 2 * kv_cache(spec, st, tensor_parallel=8).total


def test_vllm_fp8_halves_cache(spec_of):
    spec = spec_of("qwen3-32b")
    bf16 = kv_cache(spec, RunSettings(engine="vllm", context=8192, kv_cache_dtype="auto")).total
    fp8 = kv_cache(spec, RunSettings(engine="vllm", context=8192, kv_cache_dtype="fp8")).total
    assert fp8 * 2 == bf16


def test_gemma2_alternates_sliding_layers(spec_of):
    spec = spec_of("gemma-2-9b-it")
    assert spec.count("sliding") == spec.count("full") == 21
    kv = kv_cache(spec, llama(context=32768))
    assert kv.windowed < kv.full


def test_deepseek_v4_compressed_cache_vllm(spec_of):
    st = RunSettings(engine="vllm", context=1_048_576, kv_cache_dtype="auto")
    kv = kv_cache(spec_of("deepseek-v4-flash"), st)
    per_token = (kv.latent + kv.indexer) / 1_048_576
    assert per_token == pytest.approx(3850, rel=0.001)  # 21 x 179 + 20 x 4.5625 B (vLLM fp8 entries)


def test_unified_memory_is_one_pool(spec_of):
    from fitprobe.catalogs.quants import quant_table
    from fitprobe.estimator.hardware import Device, Hardware
    from fitprobe.estimator.memory import estimate
    from fitprobe.estimator.verdict import judge

    gib = 1 << 30
    spec, table = spec_of("llama-3.1-8b-instruct"), quant_table()
    apple = Device(name="apple", kind="apple", memory_bytes=6 * gib, usable_cap_bytes=4 * gib, unified_memory=True)
    unified = Hardware(devices=[apple])
    mem = estimate(spec, table.find("Q4_K_M"), table, llama(context=8192, gpu_layers=12), unified)
    separate = Hardware(devices=[Device(name="gpu", memory_bytes=6 * gib, usable_cap_bytes=4 * gib)],
                        system_ram_bytes=6 * gib)
    assert mem.host_total_bytes < 5.7 * gib < mem.host_total_bytes + mem.total_bytes
    assert judge(mem, separate, error_band=0.01).status != "exceeds"
    assert judge(mem, unified, error_band=0.01).status == "exceeds"  # the GPU share is the same 6 GiB
