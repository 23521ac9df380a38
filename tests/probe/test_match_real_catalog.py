"""Real probe names against the bundled catalog: each card maps to its own entry (memory variants,
laptop parts, Apple bins, one chip of a dual-chip board), never to a sibling product."""
import pytest

from fitprobe.probe import match
from fitprobe.probe.to_hardware import probe_hardware
from fitprobe.probe.types import GiB, MiB, GpuReading, PlatformInfo, ProbeReport

CATALOG = match.load_catalog()


def _match(name, mem, vendor="nvidia", **kw):
    r = GpuReading(index=0, name=name, vendor=vendor, memory_total_bytes=int(mem), source="nvml", **kw)
    entry = match.match_reading(r, CATALOG)
    return (entry or {}).get("key"), r


@pytest.mark.parametrize("name, mib, key", [
    ("NVIDIA GeForce RTX 5060", 8151, "rtx-5060"),
    ("NVIDIA GeForce RTX 5060 Ti", 8151, "rtx-5060-ti-8gb"),
    ("NVIDIA GeForce RTX 5060 Ti", 16311, "rtx-5060-ti-16gb"),
    ("NVIDIA GeForce RTX 4060 Ti", 8188, "rtx-4060-ti-8gb"),
    ("NVIDIA GeForce RTX 4060 Ti", 16380, "rtx-4060-ti-16gb"),
    ("NVIDIA GeForce RTX 4070 Ti", 12282, "rtx-4070-ti"),
    ("NVIDIA GeForce RTX 4070 Ti SUPER", 16376, "rtx-4070-ti-super"),
    ("NVIDIA GeForce RTX 3080", 10240, "rtx-3080-10gb"),
    ("NVIDIA GeForce RTX 3080", 12288, "rtx-3080-12gb"),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", 16376, "rtx-4090-laptop"),
    ("NVIDIA GeForce RTX 4090", 24564, "rtx-4090"),
    ("Tesla P40", 24576, "tesla-p40"),
    ("Tesla P100-PCIE-16GB", 16280, "tesla-p100-pcie-16gb"),
    ("Tesla P100-PCIE-12GB", 12198, "tesla-p100-pcie-12gb"),
    ("Tesla P100-SXM2-16GB", 16280, "tesla-p100-sxm2-16gb"),
])
def test_nvidia_names_with_probed_memory(name, mib, key):
    assert _match(name, mib * MiB)[0] == key


@pytest.mark.parametrize("total, key", [(17163091968, "mi50-16gb"), (34342961152, "mi50-32gb")])
def test_rocm_smis_name_for_vega20_instinct_cards_resolves_by_memory(total, key):
    """ROCm names a 16 GB and a 32 GB MI50 alike, 'AMD Instinct MI60 / MI50' (the 16 GB card of probe-samples
    rocm-smi-*_2xMI50+Cezanne, VRAM Total 17163091968 B; 32 GB cards in llama.cpp's device lists, 32752 MiB): the
    probed memory picks the row."""
    assert _match("AMD Instinct MI60 / MI50", total, vendor="amd")[0] == key


def test_a_card_the_driver_names_only_generically_is_matched_by_its_gfx_target_and_memory():
    """probe-samples rocm-smi-*_2xMI50+Cezanne: the 32 GB MI50 (PCI id 0x66a0, which libdrm's amdgpu.ids does not
    list) reports 'Card Series: AMD Radeon Graphics', GFX version gfx906, 34342961152 B of VRAM. The name says
    nothing; the GFX target and the memory narrow it to the MI50 32GB and the MI60, which the probe names instead of
    borrowing either's figures. A 16 GB gfx906 has one entry; the Cezanne iGPU (gfx90c, 512 MiB) none."""
    key, r = _match("AMD Radeon Graphics", 34342961152, vendor="amd", compute_capability="gfx906")
    assert key is None and r.catalog_key is None
    assert "Radeon Instinct MI50 32GB, Radeon Instinct MI60" in r.match_note and "--gpu" in r.match_note
    key, r = _match("AMD Radeon Graphics", 17163091968, vendor="amd", compute_capability="gfx906")
    assert key == "mi50-16gb" and "gfx906" in r.match_note
    key, r = _match("AMD Radeon Graphics", 536870912, vendor="amd", compute_capability="gfx90c")
    assert key is None and "not in the GPU catalog" in r.match_note
    assert _match("AMD Radeon Graphics", 34342961152, vendor="amd")[0] is None  # no GFX target: nothing to go on


@pytest.mark.parametrize("name, vendor, key", [
    ("AMD Radeon RX 6800 XT", "amd", "rx-6800-xt"),
    ("Intel(R) Arc(TM) B580 Graphics", "intel", "arc-b580"),
    ("Ascend 910B3", "huawei", "ascend-910b"),
])
def test_other_vendors(name, vendor, key):
    mem = {"rx-6800-xt": 16, "arc-b580": 12, "ascend-910b": 64}[key] * GiB
    assert _match(name, mem, vendor)[0] == key


@pytest.mark.parametrize("chip, cores, gib, key, bandwidth", [
    ("Apple M4 Max", 32, 36, "apple-m4-max-36gb", 410),
    ("Apple M4 Max", 40, 48, "apple-m4-max-48gb", 546),
    ("Apple M4 Max", 40, 128, "apple-m4-max-128gb", 546),
    ("Apple M4 Max", None, 64, "apple-m4-max-64gb", 546),
    ("Apple M3 Max", 30, 96, "apple-m3-max-96gb", 300),
])
def test_apple_bins_and_sizes(chip, cores, gib, key, bandwidth):
    got, r = _match(chip, gib * GiB, "apple", unified_memory=True, gpu_cores=cores)
    assert got == key
    hw = probe_hardware(ProbeReport(platform=PlatformInfo(system="Darwin"), gpus=[r], ram_total_bytes=gib * GiB))
    assert hw.devices[0].bandwidth_gbs == bandwidth


def test_apple_core_count_never_borrows_another_bin():
    key, _ = _match("Apple M4 Max", 36 * GiB, "apple", unified_memory=True, gpu_cores=40)
    assert key != "apple-m4-max-36gb"  # the 36 GB row is the 32-core bin (410 GB/s)


def test_one_chip_of_an_atlas_300i_duo_gets_its_share():
    key, r = _match("Ascend 310P3", 44280 * MiB, "huawei", kind="npu")
    assert key == "atlas-300i-duo"
    hw = probe_hardware(ProbeReport(platform=PlatformInfo(system="Linux"), gpus=[r]))
    assert hw.devices[0].bandwidth_gbs == 204 and hw.devices[0].kind == "npu"


def test_ascend_910c_die_from_npu_smi_gets_half_the_card():
    from pathlib import Path

    from fitprobe.probe import ascend

    text = (Path(__file__).parent / "fixtures" / "npu-smi-info_Ascend910-A3-2chip_26.0.rc2.txt").read_text()
    readings = ascend.parse_npu_smi_info(text)
    match.match_all(readings, CATALOG)
    hw = probe_hardware(ProbeReport(platform=PlatformInfo(system="Linux"), gpus=readings))
    assert {r.catalog_key for r in readings} == {"ascend-910c"}
    assert all(d.memory_bytes == 64 * GiB and d.bandwidth_gbs == 1600 for d in hw.devices)  # 3200 GB/s per 2 dies
