"""Cost, rent vs buy, fine-tuning memory, diagnosis and recommendations: formulas and worked cases."""
import pytest

from fitprobe.catalogs.quants import quant_table
from fitprobe.catalogs.resolve import resolve
from fitprobe.estimator import cost
from fitprobe.estimator.finetune import (NF4_DQ_BPW, FinetuneOptions, activation_bytes, devices_needed,
                                         finetune_memory, param_groups)

GIB = 1 << 30


def test_cost_formulas():
    assert cost.usd_per_million(3.6, 1000) == pytest.approx(1.0)
    # 450 W × 4 h × 30.44 d = 54.8 kWh → $8.22 at $0.15
    assert cost.electricity_monthly(450, 1, 4, 0.15) == pytest.approx(450 * 4 * 365.25 / 12 / 1000 * 0.15)
    assert cost.months_to_amortize(1600, 41.4, 8.2) == pytest.approx(1600 / 33.2)
    assert cost.months_to_amortize(1600, 5.0, 8.2) is None


def test_rent_vs_buy_defaults_to_catalog_price_times_count():
    off = cost.OfferCost(provider="P", instance="1x", gpu_key="k", gpu_count=1, tier="on-demand",
                         price_per_hour_usd=0.5, date_checked="2026-01", source="https://x", status="fits",
                         aggregate_tps=100.0, usd_per_million_tokens=1.39, monthly_usd=60.9)
    r = cost.rent_vs_buy(cost.CostOptions(), catalog_price=1000, price_basis="MSRP", tdp_w=300, devices=2,
                         best=off, local_tps=100.0)
    assert r.hardware_price_usd == 2000 and r.electricity_monthly_usd == pytest.approx(cost.electricity_monthly(300, 2, 4, 0.15))
    assert r.rent_monthly_usd == pytest.approx(0.5 * 4 * cost.DAYS_PER_MONTH)
    assert r.months_to_amortize == pytest.approx(2000 / (r.rent_monthly_usd - r.electricity_monthly_usd))
    r2 = cost.rent_vs_buy(cost.CostOptions(hardware_price_usd=500), catalog_price=None, price_basis="", tdp_w=None,
                          devices=1, best=None, local_tps=None)
    assert r2.hardware_price_usd == 500 and r2.months_to_amortize is None and "no cloud offer" in r2.note


def test_lora_params_and_qlora_weights_match_formulas_worked_example():
    spec = resolve("llama-3-8b-instruct").spec
    linear, other, dims = param_groups(spec)
    assert 16 * dims == 41_943_040  # FORMULAS §5.2: 41.9 M adapters at r=16 on q,k,v,o,gate,up,down
    q = finetune_memory(spec, FinetuneOptions())[0]
    assert q.weights_bytes == int(linear * NF4_DQ_BPW / 8 + other * 2)
    assert q.weights_bytes / 1e9 == pytest.approx(5.7, abs=0.15)  # 3.6 GB NF4 + 2.1 GB bf16 embeddings/head


def test_full_finetune_bytes_per_param_and_optimizers():
    spec = resolve("qwen3-0.6b").spec
    linear, other, _ = param_groups(spec)
    n = linear + other
    for opt, b in (("adamw", 8), ("adamw8bit", 2), ("sgd", 4)):
        full = finetune_memory(spec, FinetuneOptions(optimizer=opt))[2]
        assert full.weights_bytes == 6 * n and full.grads_optimizer_bytes == int(n * (4 + b))


def test_activations_checkpointing_and_logits():
    spec = resolve("llama-3-8b-instruct").spec
    s, h, L, V = 2048, 4096, 32, 128256
    ck = activation_bytes(spec, FinetuneOptions(fused_loss=True))
    assert ck == L * 2 * s * h + 34 * s * h
    no = activation_bytes(spec, FinetuneOptions(gradient_checkpointing=False, fused_loss=True))
    assert no == L * 34 * s * h
    assert activation_bytes(spec, FinetuneOptions()) - ck == 8 * s * V


def test_devices_needed_shards_states_not_activations():
    spec = resolve("llama-3-8b-instruct").spec
    full = finetune_memory(spec, FinetuneOptions())[2]
    n = devices_needed(full, 76 * GIB)
    room = 76 * GIB - full.activations_bytes
    assert (full.weights_bytes + full.grads_optimizer_bytes) / n <= room
    assert (full.weights_bytes + full.grads_optimizer_bytes) / (n - 1) > room
    assert devices_needed(full, full.activations_bytes // 2) is None


def test_diagnosis_kv_numbers_come_from_the_sizer():
    from fitprobe.catalogs.gpus import find_gpu
    from fitprobe.estimator.diagnosis import diagnose
    from fitprobe.estimator.hardware import Hardware
    from fitprobe.estimator.plan import Sizer
    from fitprobe.estimator.settings import RunSettings

    spec, table = resolve("llama-3.1-8b-instruct").spec, quant_table()
    hw = Hardware(devices=[find_gpu("RTX 3060").device()])
    sizer = Sizer(spec, table, hw, error_band=0.05)
    fmt, st = table.find("Q8_0"), RunSettings(quant="Q8_0", context=32768)
    d = diagnose(sizer, fmt, st, sizer.plan(fmt, st), model="m", hardware=hw.name)
    # Llama-3.1-8B: 32 layers × 8 KV heads × 128 × 2 (K,V) × 2 B = 128 KiB per token
    assert d.kv_8k_bytes == 8192 * 128 * 1024 and d.kv_32k_bytes == 4 * d.kv_8k_bytes
    assert d.kv_alt_dtype == "q8_0" and d.kv_saving_32k_bytes == d.kv_32k_bytes - d.kv_32k_bytes * 34 // 64
    assert "cannot hold" in d.verdict and d.tips


def test_cloud_offers_validate_against_the_gpu_catalog():
    from fitprobe.catalogs.cloud import load_offers
    from fitprobe.catalogs.gpus import find_gpu

    offers = load_offers()
    assert len(offers) >= 30
    assert all(find_gpu(o.gpu_key) is not None and o.price_per_hour_usd > 0 for o in offers)
