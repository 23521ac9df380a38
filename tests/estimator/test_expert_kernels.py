"""llama.cpp's CUDA/HIP kernel choice for routed experts and dense matmuls (ggml-cuda.cu ggml_cuda_mul_mat_id,
mmq.cu ggml_cuda_should_use_mmq, mmf.cu ggml_cuda_should_use_mmf at build b11434), and what the slow paths cost
in a prefill estimate."""
from math import comb

import pytest

from fitprobe.catalogs.gpus import find_gpu
from fitprobe.catalogs.quants import quant_table
from fitprobe.catalogs.resolve import resolve
from fitprobe.catalogs.speed_calibration import load_calibration
from fitprobe.estimator.expert_kernels import (SORTED_CALL_LAUNCHES, dequantizes, expert_matmuls, expert_tiles,
                                                sorted_path)
from fitprobe.estimator.fields import replace
from fitprobe.estimator.hardware import Hardware
from fitprobe.estimator.memory import estimate
from fitprobe.estimator.quant import weight_bytes
from fitprobe.estimator.settings import RunSettings
from fitprobe.estimator.speed import estimate_speed, launch_ms, prefill_terms
from fitprobe.estimator.tensors import inventory

CAL = load_calibration()


def test_volta_runs_quantized_experts_one_at_a_time_from_64_tokens():
    # FP16 tensor cores but no integer MMA: MMQ only below MMQ_DP4A_MAX_BATCH_SIZE (64)
    assert sorted_path("7.0", "Q4_K_M", 64, 128, 768) and sorted_path("7.0", "MXFP4", 512, 32, 2880)
    assert not sorted_path("7.0", "Q4_K_M", 63, 128, 768)
    assert not sorted_path("7.0", "Q4_K_M", 4, 128, 768)  # a few tokens: the grouped matrix-vector kernel
    for cc in ("7.5", "8.6", "8.9", "12.0", "6.1"):  # Turing MMA; Pascal's dp4a MMQ has no rival
        assert not sorted_path(cc, "Q4_K_M", 512, 128, 768)


def test_amd_rules_follow_the_architecture_and_the_type():
    assert not sorted_path("gfx1201", "Q6_K", 2048, 8, 14336)  # RDNA4: MMQ always
    assert sorted_path("gfx1100", "Q6_K", 256, 8, 14336)  # RDNA3 with few experts: hipBLAS past 128 tokens
    assert not sorted_path("gfx1100", "Q6_K", 128, 8, 14336)
    assert not sorted_path("gfx1151", "Q6_K", 256, 8, 14336)  # RDNA3.5: up to 256
    assert not sorted_path("gfx1100", "Q6_K", 2048, 128, 768)  # ≥ 64 experts: MMQ
    assert not sorted_path("gfx1100", "Q4_K_M", 2048, 8, 14336)
    assert sorted_path("gfx90a", "Q8_0", 512, 8, 14336)  # CDNA2: rocBLAS past 128 tokens for most types
    assert not sorted_path("gfx90a", "Q4_0", 512, 8, 14336) and not sorted_path("gfx90a", "Q8_0", 512, 128, 768)
    assert not sorted_path("gfx942", "Q8_0", 512, 8, 14336)  # CDNA3: MMQ


def test_f16_and_bf16_experts_take_mmf_within_its_bounds():
    assert not sorted_path("8.6", "BF16", 512, 128, 768)
    assert sorted_path("8.6", "BF16", 513, 128, 768)  # rows ≤ 1024: MMF up to 512 tokens
    assert not sorted_path("8.6", "BF16", 128, 128, 2048) and sorted_path("8.6", "BF16", 129, 128, 2048)
    assert sorted_path("7.5", "BF16", 64, 128, 768) and not sorted_path("7.5", "F16", 64, 128, 768)
    assert not sorted_path("gfx1201", "BF16", 512, 128, 768) and sorted_path("gfx1030", "F16", 64, 128, 768)


def test_dense_matmuls_dequantize_where_mmq_declines():
    assert dequantizes("7.0", "Q4_K_M", 512) and not dequantizes("7.0", "Q4_K_M", 32)
    assert not dequantizes("8.9", "Q4_K_M", 512) and not dequantizes("7.0", "F16", 512)


def test_an_expert_dequantizes_when_its_own_tokens_reach_the_threshold():
    """Tokens per expert are Binomial(m, k/E): on Volta an expert of a 512-token micro-batch takes the cuBLAS
    path (3 launches and an F16 copy) when it got 64 tokens or more."""
    launches, copies = expert_matmuls("7.0", "Q4_K_M", 512, 8, 128)  # mean 32 tokens
    assert copies < 1e-4 and launches == pytest.approx(2.0, abs=1e-4)
    launches, copies = expert_matmuls("7.0", "MXFP4", 512, 4, 32)  # mean 64 tokens: about half
    assert 0.4 < copies < 0.6 and launches == pytest.approx(2 + copies)
    assert expert_matmuls("8.9", "Q4_K_M", 512, 4, 32) == (2.0, 0.0)
    assert expert_matmuls("7.0", "BF16", 512, 4, 32) == (2.0, 0.0)


def _plan(model, gpu, cc=None, n=1, **st):
    spec = resolve(model).spec
    table = quant_table()
    settings = RunSettings(**st)
    fmt = table.find(settings.quant)
    w = weight_bytes(spec, fmt, table)
    dev = find_gpu(gpu).device()
    hw = Hardware(devices=[replace(dev, compute_capability=cc or dev.compute_capability)] * n)
    return spec, w, settings, hw, estimate(spec, fmt, table, settings, hw, weights=w)


def test_volta_moe_prefill_pays_one_launch_set_per_reached_expert():
    spec, w, st, hw, mem = _plan("qwen3-30b-a3b", "V100 SXM2 32GB", quant="Q4_K_M", context=8192)
    t = prefill_terms(spec, w, st, hw, mem, tokens=512, depth=0)
    k, e = spec.moe.n_experts_used, spec.moe.n_experts
    reached = e * (1 - (1 - k / e) ** 512)
    per_expert, _ = expert_matmuls("7.0", "Q4_K_M", 512, k, e)
    mats = sum(1 for x in inventory(spec) if x.expert and len(x.shape) == 3)
    assert t.chunk_launches == [pytest.approx(mats * (SORTED_CALL_LAUNCHES + reached * per_expert))]
    dense = sum(x.n for x in inventory(spec) if x.quantizable and not x.expert and x.layer is not None)
    assert sum(t.chunk_dequant_bytes[0]) == pytest.approx(4 * dense, rel=1e-3)  # dense matmuls: F16 copies

    # Turing's grouped MMQ computes one 128-wide tile per expert (~32 tokens): without the share π of its empty
    # columns it costs what the sorted path's per-expert matmuls do, so the difference is the launches and copies
    cuda = CAL.backends["llama.cpp/cuda"]
    cal = replace(CAL, backends={**CAL.backends, "llama.cpp/cuda": replace(cuda, tile_padding=0.0)})
    slow = estimate_speed(spec, w, st, hw, mem, calibration=cal, prompt_tokens=512)
    turing = Hardware(devices=[replace(hw.devices[0], compute_capability="7.5")])
    fast = estimate_speed(spec, w, st, turing, mem, calibration=cal, prompt_tokens=512)
    assert prefill_terms(spec, w, st, turing, mem, tokens=512, depth=0).chunk_launches == []
    eff = slow.efficiency
    copy_s = 4 * dense / (900e9 * eff.bandwidth * CAL.device_bandwidth(hw.devices[0], slow.backend))
    extra_s = t.chunk_launches[0] * launch_ms(eff) / 1e3 + copy_s
    assert slow.ttft_ms - fast.ttft_ms == pytest.approx(extra_s * 1e3, rel=0.02)
    assert any("one expert at a time" in n for n in slow.notes)
    assert not any("one expert at a time" in n for n in fast.notes)


def test_vulkan_and_small_micro_batches_have_no_sorted_path():
    spec, w, st, hw, mem = _plan("qwen3-30b-a3b", "V100 SXM2 32GB", quant="Q4_K_M", context=8192)
    assert prefill_terms(spec, w, st, hw, mem, tokens=512, depth=0, backend="vulkan").chunk_launches == []
    spec, w, st, hw, mem = _plan("qwen3-30b-a3b", "V100 SXM2 32GB", quant="Q4_K_M", context=8192, ubatch=32)
    t = prefill_terms(spec, w, st, hw, mem, tokens=512, depth=0)
    assert t.chunk_launches == [] and t.chunk_dequant_bytes == []



def test_mmq_sizes_expert_tiles_by_the_micro_batch_outside_rdna3_and_rdna4():
    """mul_mat_q_switch_J takes the narrowest tile with the fewest tiles over the micro-batch's columns (mmq.cu),
    and an expert's tokens fill whole tiles: one 128-wide tile for the ~32 tokens each of 128 experts top-8 gets
    from 512. RDNA3/RDNA4 size the tiles by the tokens per expert instead: no padding to price there."""
    assert expert_tiles("8.9", "Q4_K_M", 512, 8, 128) == (128, pytest.approx(1.0))
    assert expert_tiles("8.9", "Q4_K_M", 200, 8, 128)[0] == 112  # two tiles either way: 112 is the narrowest listed
    assert expert_tiles("8.9", "MXFP4", 4096, 4, 32) == (128, pytest.approx(4.49, abs=0.01))  # ~512 tokens each
    assert expert_tiles("8.9", "Q4_K_M", 16, 8, 128) == (16, pytest.approx(1.0))
    assert expert_tiles("gfx90a", "Q4_0", 512, 8, 128)[0] == 64  # CDNA: by the micro-batch, widest listed 64
    assert expert_tiles("6.1", "Q4_0", 512, 8, 128)[0] == 64  # Pascal dp4a: up to 64
    assert expert_tiles("gfx1100", "Q6_K", 512, 8, 128) is None
    assert expert_tiles("gfx1201", "Q4_K_M", 512, 8, 128) is None


def test_expert_tiles_are_the_binomial_expectation():
    width, tiles = expert_tiles("8.6", "Q4_K_M", 24, 2, 8)  # 24 tokens: one 24-wide tile, ~6 tokens per expert
    p, reached = 2 / 8, 1 - (1 - 2 / 8) ** 24
    by_hand = sum(comb(24, x) * p ** x * (1 - p) ** (24 - x) * -(-x // 24) for x in range(1, 25)) / reached
    assert width == 24 and tiles == pytest.approx(by_hand) == pytest.approx(1.0)
    width, tiles = expert_tiles("8.6", "Q4_K_M", 200, 6, 8)  # 150 tokens per expert in 112-wide tiles
    p, reached = 6 / 8, 1 - (1 - 6 / 8) ** 200
    by_hand = sum(comb(200, x) * p ** x * (1 - p) ** (200 - x) * -(-x // 112) for x in range(1, 201)) / reached
    assert width == 112 and tiles == pytest.approx(by_hand) and 1.9 < tiles <= 2.0


def test_no_tiles_where_mmq_does_not_run_the_experts():
    assert expert_tiles("7.0", "Q4_K_M", 512, 8, 128) is None  # Volta: the sorted path
    assert expert_tiles("8.9", "BF16", 512, 8, 128) is None  # MMF
    assert expert_tiles("8.9", "Q4_K_M", 4, 8, 128) is None  # MMVQ
    spec, w, st, hw, mem = _plan("qwen3-30b-a3b", "RTX 4090", quant="Q4_K_M", context=8192)
    assert prefill_terms(spec, w, st, hw, mem, tokens=1024, depth=0).chunk_expert_tiles == [
        expert_tiles(hw.devices[0].compute_capability, "Q4_K_M", 512, 8, 128)] * 2
    assert prefill_terms(spec, w, st, hw, mem, tokens=1024, depth=0, backend="vulkan").chunk_expert_tiles == []
    spec, w, st, hw, mem = _plan("llama-3.1-8b-instruct", "RTX 4090", quant="Q4_K_M", context=8192)
    assert prefill_terms(spec, w, st, hw, mem, tokens=512, depth=0).chunk_expert_tiles == []
