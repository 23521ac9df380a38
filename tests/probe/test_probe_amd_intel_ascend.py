"""AMD (rocm-smi, sysfs, amdsmi stand-in), Intel and Ascend parsers on recorded outputs."""
from pathlib import Path

from probe_fixtures import fixture_text

from fitprobe.probe import amd, ascend, intel
from fitprobe.probe.to_hardware import probe_hardware
from fitprobe.probe.types import GiB, MiB, PlatformInfo, ProbeReport


def test_rocm_smi_json_rx7900xt():
    (r,) = amd.parse_rocm_smi_json(fixture_text("rocm-smi-json_RX7900XT.json"))
    assert r.name == "Radeon RX 7900 XT" and r.compute_capability == "gfx1100"
    assert r.memory_total_bytes == 21458059264 and r.memory_used_bytes == 27856896
    assert r.memory_free_bytes == 21458059264 - 27856896 and not r.integrated


def test_rocm_smi_hygon_fork_reports_mib():
    (r,) = amd.parse_rocm_smi_json(fixture_text("rocm-smi-json_Hygon-DCU_dtk24.04.3.json"))
    assert r.memory_total_bytes == 65520 * MiB and r.memory_used_bytes == 2 * MiB


def test_rocm_smi_rx7800xt_busy_card():
    (r,) = amd.parse_rocm_smi_json(fixture_text("rocm-smi-json_RX7800XT_rocm6.2.4.json"))
    assert r.memory_used_bytes == 11615076352  # another process holds 11.6 GB
    assert r.memory_free_bytes == 17163091968 - 11615076352


def test_igpu_next_to_dgpu_is_flagged_and_left_out():
    dgpu, igpu = amd.parse_rocm_smi_csv(fixture_text("rocm-smi-csv_RX6800+Raphael-iGPU.csv"))
    assert dgpu.memory_total_bytes == 17163091968 and not dgpu.integrated
    assert igpu.name == "Raphael" and igpu.memory_total_bytes == 64 * MiB and igpu.integrated
    report = ProbeReport(platform=PlatformInfo(system="Linux"), gpus=[dgpu, igpu], ram_total_bytes=32 * GiB)
    hw = probe_hardware(report, catalog=[])
    assert [d.memory_bytes for d in hw.devices] == [17163091968]
    assert any("Raphael" in n for n in report.notes)


def _amd_card(root: Path, card: str, slot: str, vram: int, gtt: int, used: int = 0) -> None:
    dev = root / "class" / "drm" / card / "device"
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x1002\n")
    (dev / "device").write_text("0x1586\n")
    (dev / "uevent").write_text(f"DRIVER=amdgpu\nPCI_SLOT_NAME={slot}\n")
    (dev / "mem_info_vram_total").write_text(f"{vram}\n")
    (dev / "mem_info_vram_used").write_text(f"{used}\n")
    (dev / "mem_info_gtt_total").write_text(f"{gtt}\n")
    (root / "class" / "drm" / f"{card}-DP-1").mkdir()  # connector entry, skipped


def test_strix_halo_small_carveout_plus_gtt_capped_by_ram(tmp_path):
    # sysfs-hip_StrixHalo-128GB_512MB-carveout.txt: VRAM 0.50 GiB, GTT 128.00 GiB, host RAM 124.92 GiB
    assert "sysfs GTT total:       128.00 GiB" in fixture_text("sysfs-hip_StrixHalo-128GB_512MB-carveout.txt")
    _amd_card(tmp_path, "card1", "0000:c5:00.0", 512 * MiB, 128 * GiB)
    (r,) = amd.read_sysfs(tmp_path)
    assert r.integrated and r.pci_bus_id == "0000:c5:00.0"
    ram = int(124.92 * GiB)
    amd.apply_apu_pools(r, ram)
    assert r.unified_memory
    assert r.usable_cap_bytes == r.memory_total_bytes == 512 * MiB + ram  # GTT capped by RAM, not 128.5 GiB


def test_strix_halo_big_carveout_is_not_summed_with_gtt(tmp_path):
    # dmesg-amdgpu_StrixHalo_96GB-carveout.txt: 98304M of VRAM, 108000M of GTT (tools summed them to 135 GB)
    text = fixture_text("dmesg-amdgpu_StrixHalo_96GB-carveout.txt")
    assert "98304M of VRAM" in text and "108000M of GTT" in text
    _amd_card(tmp_path, "card0", "0000:c5:00.0", 98304 * MiB, 108000 * MiB)
    (r,) = amd.read_sysfs(tmp_path)
    amd.apply_apu_pools(r, 32 * GiB)
    assert not r.integrated and r.memory_total_bytes == 98304 * MiB


def test_rocm_smi_enriched_with_sysfs_gtt(tmp_path):
    (r,) = amd.parse_rocm_smi_json(fixture_text("rocm-smi-json_RX7900XT.json"))
    _amd_card(tmp_path, "card0", "0000:03:00.0", 21458059264, 16 * GiB)
    amd.enrich_from_sysfs([r], tmp_path)
    assert r.gtt_total_bytes == 16 * GiB and r.pci_bus_id == "0000:03:00.0" and not r.integrated


class FakeAmdSmi:
    """amdsmi stand-in with the RX 7900 XT values of rocm-smi-json_RX7900XT.json."""

    class AmdSmiMemoryType:
        VRAM, VIS_VRAM, GTT = 0, 1, 2

    def amdsmi_init(self):
        pass

    def amdsmi_shut_down(self):
        pass

    def amdsmi_get_processor_handles(self):
        return ["h0"]

    def amdsmi_get_gpu_asic_info(self, h):
        return {"market_name": "Radeon RX 7900 XT", "target_graphics_version": "gfx1100"}

    def amdsmi_get_gpu_memory_total(self, h, kind):
        return 21458059264 if kind == 0 else 16 * GiB

    def amdsmi_get_gpu_memory_usage(self, h, kind):
        return 27856896

    def amdsmi_get_gpu_vram_info(self, h):
        raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")


def test_amdsmi_stand_in():
    readings, status = amd.probe(Path("/nonexistent"), am=FakeAmdSmi())
    assert status.present and status.reason == "via amdsmi"
    (r,) = readings
    assert r.source == "amdsmi" and r.memory_free_bytes == 21458059264 - 27856896
    assert r.gtt_total_bytes == 16 * GiB and not r.integrated


def test_amd_nothing_anywhere_gives_reason(tmp_path):
    class Broken:
        def amdsmi_init(self):
            raise KeyError("libamd_smi.so")  # what `import amdsmi` raises without ROCm

    readings, status = amd.probe(tmp_path, am=Broken(), which=lambda *a: None)
    assert readings == [] and not status.present
    assert "amdsmi unavailable (KeyError)" in status.reason and "rocm-smi not found" in status.reason


def _intel_card(root: Path, card: str, slot: str, vram: int | None) -> None:
    dev = root / "class" / "drm" / card / "device"
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x8086\n")
    (dev / "device").write_text("0xe211\n")
    (dev / "uevent").write_text(f"PCI_SLOT_NAME={slot}\n")
    if vram:
        (dev / "tile0").mkdir()
        (dev / "tile0" / "physical_vram_size_bytes").write_text(str(vram))


def test_intel_xe_vram_and_igpu(tmp_path):
    # Arc Pro B60 with ECC on: memory.total 21414 MiB (xpumanager issue #169)
    _intel_card(tmp_path, "card0", "0000:00:02.0", None)
    _intel_card(tmp_path, "card1", "0000:18:00.0", 21414 * MiB)
    igpu, b60 = intel.read_sysfs(tmp_path)
    assert igpu.integrated and igpu.memory_total_bytes is None
    assert b60.memory_total_bytes == 21414 * MiB and not b60.integrated and b60.name == "Intel GPU [8086:e211]"


def test_xpu_smi_dump_na_memory():
    (r,) = intel.parse_xpu_dump(fixture_text("xpu-smi-discovery-dump_ArcA310.csv"))
    assert r.name == "Intel(R) Arc(TM) A310 LP Graphics" and r.memory_total_bytes is None
    assert intel.parse_xpu_dump(fixture_text("xpu-smi-discovery_ArcProB60.txt")) == []  # box table: not this parser


def test_npu_smi_910b3():
    readings = ascend.parse_npu_smi_info(fixture_text("npu-smi-info_910B3-x4.txt"))
    assert len(readings) == 4
    assert readings[0].name == "Ascend 910B3" and readings[0].kind == "npu"
    assert readings[0].memory_total_bytes == 65536 * MiB and readings[0].memory_used_bytes == 3369 * MiB
    assert readings[1].pci_bus_id == "0000:01:00.0"


def test_npu_smi_a3_two_chips_per_npu_id():
    readings = ascend.parse_npu_smi_info(fixture_text("npu-smi-info_Ascend910-A3-2chip_26.0.rc2.txt"))
    assert len(readings) >= 2
    assert readings[0].notes[0] == "NPU 0 chip 0" and readings[1].notes[0] == "NPU 0 chip 1"
    assert readings[1].memory_used_bytes == 2874 * MiB


def test_npu_smi_910a_ddr_not_counted_and_process_table_ignored():
    readings = ascend.parse_npu_smi_info(fixture_text("npu-smi-info_910A-x8_Atlas800-9010_24.1.RC2.txt"))
    assert len(readings) == 8
    assert readings[0].memory_total_bytes == 32768 * MiB
    assert any("15137 MB DDR" in n for n in readings[0].notes)
    assert readings[0].driver == "24.1.RC2"


def test_npu_smi_910b4():
    readings = ascend.parse_npu_smi_info(fixture_text("npu-smi-info_910B4-1_25.2.0.txt"))
    assert [r.name for r in readings] == ["Ascend 910B4-1", "Ascend 910B4-1"]
