"""Issue #14 item 4: every GPU the seed calculator pages list resolves to a catalog entry with its memory;
bandwidth and prices are there where a source gives them, and where none does the entry says why."""
import re

import pytest

from fitprobe.catalogs.gpus import find_gpu, load_gpus

# the "other GPUs" list of the seed pages (shared/seeds/*.txt), as they print the names
SEED_GPUS = [
    "RTX 3060 12GB", "RTX 4060 Ti 16GB", "RTX 4070 Ti Super", "RTX 4080 Super", "RTX 5070 12GB", "RTX 5070 Ti",
    "RTX 5080", "RTX 3090", "RTX 4090", "RTX 4090 D", "RTX 5090", "RTX 5090 D", "RTX A6000", "RTX 6000 Ada",
    "RTX PRO 6000 Blackwell", "DGX Spark (GB10 128GB)", "L4 24GB", "A40 48GB", "L20 48GB", "L40S 48GB",
    "A800 80GB SXM", "A100 80GB SXM", "H800 80GB SXM", "H100 80GB SXM", "H20 96GB HBM3", "H20 141GB HBM3e",
    "H200 141GB SXM", "B200 180GB", "B300 288GB Blackwell Ultra", "Ascend 910B 64GB (昇腾)",
    "Ascend 910C 128GB (昇腾)", "Atlas 300I Duo 96GB (310P)", "MLU590 80GB (寒武纪思元)",
    "DCU K100-AI 64GB (海光深算)", "MetaX C500 64GB (沐曦曦云)", "MTT S4000 48GB (摩尔线程)",
    "Radeon RX 7900 XTX 24GB", "Radeon AI PRO R9700 32GB", "Ryzen AI Max+ 395 128GB", "Instinct MI300X 192GB",
    "Instinct MI325X 256GB", "Instinct MI355X 288GB", "Arc Pro B60 24GB", "Gaudi 3 128GB HBM2e",
    "Mac mini M4 Pro 64GB", "MacBook Pro M4 Max 128GB", "Mac Studio M3 Ultra 512GB",
]
# seed names that name no real device: Apple made no M4 Ultra, and the recorded P800 has 96 GiB, not 64
NOT_A_DEVICE = ["Mac Studio M4 Ultra 256GB", "Kunlunxin P800 64GB (昆仑芯)"]


@pytest.mark.parametrize("name", SEED_GPUS)
def test_seed_gpu_resolves_with_memory_and_says_why_bandwidth_is_missing(name):
    gpu = find_gpu(name)
    assert gpu is not None and gpu.memory_gib, name
    if gpu.bandwidth_gbs is None:
        assert "bandwidth" in gpu.notes.lower(), f"{gpu.key}: no bandwidth and no reason"


@pytest.mark.parametrize("name", NOT_A_DEVICE)
def test_seed_names_of_no_real_device_do_not_resolve(name):
    assert find_gpu(name) is None


def test_p800_has_the_recorded_96_gib():
    assert find_gpu("Kunlunxin P800").memory_gib == 96


@pytest.mark.parametrize("key,gbs", [("h20-141gb", 4800), ("dcu-k100-ai", 896)])
def test_bandwidths_sourced_this_round(key, gbs):
    gpu = find_gpu(key)
    assert gpu.bandwidth_gbs == gbs and any("github.com" in s for s in gpu.sources)


def test_prices_say_what_they_are_and_used_prices_are_dated():
    for gpu in load_gpus():
        if gpu.price_usd is not None:
            assert gpu.price_basis, gpu.key
        if gpu.used_price_usd is not None:
            assert re.search(r"20\d\d", gpu.used_price_basis or ""), f"{gpu.key}: used price without a date"
    assert find_gpu("Radeon AI PRO R9700").price_usd == 1299
    assert find_gpu("Arc Pro B60").price_usd == 499
    assert find_gpu("Ryzen AI Max+ 395 128GB").price_usd == 1999
