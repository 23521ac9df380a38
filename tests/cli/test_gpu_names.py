"""Hardware names resolve to the product they name, or fail listing the candidates (issues #10, #14)."""
import json

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from fitprobe.catalogs.gpus import find_gpu, load_gpus, match_gpus, parse_name
from fitprobe.cli import main

GIB = 1 << 30


def run(*args):
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def keys(name):
    return sorted(e.key for e in match_gpus(name))


@pytest.mark.parametrize("name", ["RTX 5060", "rtx5060", "NVIDIA GeForce RTX 5060", "geforce rtx-5060", "5060",
                                  "RTX 5060 8GB"])
def test_rtx_5060_is_the_8gb_card_never_the_ti(name):
    entry = find_gpu(name)
    assert entry.key == "rtx-5060" and entry.memory_gib == 8 and entry.bandwidth_gbs == 448


def test_ti_and_super_are_other_products():
    assert keys("RTX 4070 Ti") == ["rtx-4070-ti"]
    assert keys("RTX 4070 Ti SUPER") == ["rtx-4070-ti-super"]
    assert keys("RTX 4070") == ["rtx-4070"] and keys("RTX 4070 SUPER") == ["rtx-4070-super"]
    assert keys("RTX 4090") == ["rtx-4090"] and keys("RTX 4090 D") == ["rtx-4090-d"]
    assert keys("RTX 4090 Laptop") == ["rtx-4090-laptop"]


@pytest.mark.parametrize("name, expected", [
    ("RTX 5060 Ti", ["rtx-5060-ti-16gb", "rtx-5060-ti-8gb"]),
    ("RTX 3080", ["rtx-3080-10gb", "rtx-3080-12gb"]),
    ("4060 Ti", ["rtx-4060-ti-16gb", "rtx-4060-ti-8gb"]),
    ("NVIDIA GeForce RTX 4060 Ti", ["rtx-4060-ti-16gb", "rtx-4060-ti-8gb"]),
    ("A100", ["a100-pcie-40gb", "a100-pcie-80gb", "a100-sxm4-40gb", "a100-sxm4-80gb"]),
    ("A100 80GB", ["a100-pcie-80gb", "a100-sxm4-80gb"]),
    ("H20", ["h20-141gb", "h20-96gb"]),
    ("P100", ["tesla-p100-pcie-12gb", "tesla-p100-pcie-16gb", "tesla-p100-sxm2-16gb"]),
    ("AMD Instinct MI60 / MI50", ["mi50-16gb", "mi50-32gb"]),  # rocm-smi's name for every Vega 20 Instinct card
])
def test_a_name_shared_by_memory_variants_is_ambiguous(name, expected):
    assert keys(name) == expected and find_gpu(name) is None


@pytest.mark.parametrize("name, key", [
    ("RTX 5060 Ti 8GB", "rtx-5060-ti-8gb"), ("RTX 5060 Ti 16 GB", "rtx-5060-ti-16gb"),
    ("RTX 3080 10GB", "rtx-3080-10gb"), ("RTX 3080 12GB", "rtx-3080-12gb"), ("4060 Ti 8GB", "rtx-4060-ti-8gb"),
    ("A100 80GB SXM", "a100-sxm4-80gb"), ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"), ("H100 PCIe", "h100-pcie"),
    ("H100", "h100-sxm"),  # a stored alias picks among parts of one memory size
    ("Radeon RX 7900 XTX", "rx-7900-xtx"), ("RX 7900 XTX", "rx-7900-xtx"), ("Intel Arc B580", "arc-b580"),
    ("Tesla P40", "tesla-p40"), ("GTX 1080 Ti", "gtx-1080-ti"), ("rtx-4090", "rtx-4090"),
    ("Tesla P100-PCIE-16GB", "tesla-p100-pcie-16gb"), ("Tesla P100-PCIE-12GB", "tesla-p100-pcie-12gb"),
    ("Tesla P100-SXM2-16GB", "tesla-p100-sxm2-16gb"), ("MI50 32GB", "mi50-32gb"), ("MI60", "mi60"),
    ("AMD Instinct MI60 / MI50 32GB", "mi50-32gb"), ("AMD Instinct MI60 / MI50 16GB", "mi50-16gb"),
])
def test_the_variant_given_picks_one(name, key):
    assert keys(name) == [key]


def test_m4_max_needs_its_memory_size_and_each_size_has_its_own_bandwidth():
    assert keys("M4 Max") == ["apple-m4-max-128gb", "apple-m4-max-36gb", "apple-m4-max-48gb", "apple-m4-max-64gb"]
    small = find_gpu("M4 Max 36GB")
    assert (small.memory_gib, small.bandwidth_gbs, small.gpu_cores) == (36, 410, 32)
    for size in (48, 64, 128):
        e = find_gpu(f"Apple M4 Max {size}GB")
        assert (e.memory_gib, e.bandwidth_gbs, e.gpu_cores) == (size, 546, 40)
    assert find_gpu("M4 Max 96GB") is None and find_gpu("M3 Max 96GB").bandwidth_gbs == 300  # the 30-core bin
    assert find_gpu("apple-m4-max-36gb").key == "apple-m4-max-36gb"


def test_every_apple_chip_needs_a_size():
    chips = {e.key.rsplit("-", 1)[0] for e in load_gpus() if e.key.startswith("apple-")}
    for chip in chips:
        assert find_gpu(chip.replace("apple-", "").replace("-", " ")) is None, chip


def test_names_are_unique_and_parse_case_space_and_punctuation_free():
    assert parse_name("NVIDIA A100-SXM4-80GB") == parse_name("a100 sxm 80 gb")
    assert parse_name("Intel(R) Arc(TM) B580 Graphics").base == parse_name("arc b580").base == "b580"
    assert len({e.key for e in load_gpus()}) == len(load_gpus())


def test_cli_lists_candidates_in_one_line_exit_2():
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "M4 Max")
    assert code == 2 and out.count("\n") == 1
    assert all(f"Apple M4 Max {s}GB" in out for s in (36, 48, 64, 128))
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 5060 Ti")
    assert code == 2 and "RTX 5060 Ti 8GB" in out and "RTX 5060 Ti 16GB" in out


def test_memory_gib_picks_among_variants():
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "M4 Max", "--memory-gib", "36", "--json")
    (dev,) = json.loads(out)["hardware"]["devices"]
    assert code == 0 and dev["catalog_key"] == "apple-m4-max-36gb" and dev["bandwidth_gbs"] == 410


def test_cli_sizes_the_named_card():
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 5060", "--json")
    hw = json.loads(out)["hardware"]
    assert code == 0 and hw["name"] == "RTX 5060 8GB" and hw["memory_bytes"] == 8 * GIB
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "M4 Max 36GB", "--json")
    (dev,) = json.loads(out)["hardware"]["devices"]
    assert dev["bandwidth_gbs"] == 410 and dev["memory_bytes"] == 36 * GIB


def test_atlas_300i_duo_is_two_48gb_devices():
    code, out = run("plan", "qwen3-32b", "--gpu", "Atlas 300I Duo", "--json")
    hw = json.loads(out)["hardware"]
    assert hw["count"] == 2 and hw["memory_bytes"] == 96 * GIB
    assert all(d["memory_bytes"] == 48 * GIB and d["bandwidth_gbs"] == 204 for d in hw["devices"])
    code, out = run("plan", "qwen3-32b", "--gpu", "Atlas 300I Duo", "--gpus", "2", "--json")
    assert json.loads(out)["hardware"]["count"] == 4


def test_list_gpus_shows_whole_names():
    code, out = run("list", "gpus")
    assert code == 0
    for name in ("Apple M4 Max 36GB", "RTX 4090 Laptop GPU 16GB", "Ryzen AI Max+ 395 128GB (Strix Halo)"):
        assert name in out


def test_every_key_and_name_resolves_to_its_own_entry():
    for entry in load_gpus():
        # by key: another test may have reloaded the catalog, so the objects need not be the same ones
        assert find_gpu(entry.key).key == entry.key, entry.key
        assert find_gpu(entry.name).key == entry.key, entry.name


def _respell(name, upper, sep):
    words = name.replace("-", " ").split()
    return sep.join(w.upper() if u else w.lower() for w, u in zip(words, upper + [False] * len(words)))


@given(st.sampled_from([e.name for e in load_gpus()]), st.lists(st.booleans(), max_size=6),
       st.sampled_from([" ", "  ", "-", "_", " - "]))
def test_case_spaces_and_punctuation_never_change_the_answer(name, upper, sep):
    assert find_gpu(_respell(name, upper, sep)) is find_gpu(name)


def test_no_key_reads_as_an_ambiguous_name():
    for entry in load_gpus():
        key = parse_name(entry.key)
        if key.memory_gib is None and key.form is None:
            assert keys(entry.key.replace("-", " ")) == [entry.key], entry.key
