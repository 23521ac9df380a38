"""Masks, catalog matching, ProbeReport → Hardware, registry and the `probe` command."""
import json
import sys

from click.testing import CliRunner
from fake_pynvml import FakeNVML
from test_probe_nvml import H100, H100_MIG, H200

from fitprobe.cmd_probe import probe_command
from fitprobe.probe import match, nvidia_nvml
from fitprobe.probe.masks import apply_masks, parse_mask
from fitprobe.probe.registry import probe_machine
from fitprobe.probe.run import run_command
from fitprobe.probe.to_hardware import probe_hardware
from fitprobe.probe.types import GiB, MiB, GpuReading, MigInstance, PlatformInfo, ProbeReport


def _gpu(i, name="NVIDIA GeForce RTX 4090", vendor="nvidia", uuid=None, mem=24564 * MiB, **kw):
    return GpuReading(index=i, name=name, vendor=vendor, uuid=uuid, memory_total_bytes=mem, source="nvml", **kw)


# ---- masks ---------------------------------------------------------------------------------------

def test_parse_mask_rules():
    assert parse_mask(None) is None
    assert parse_mask("") == []
    assert parse_mask("0,2,-1,1") == ["0", "2"]  # stops at the first invalid entry
    assert parse_mask(" GPU-8932f937 , 1") == ["GPU-8932f937", "1"]


def test_cuda_visible_indices_uuid_prefix_and_empty():
    gpus = [_gpu(0, uuid="GPU-aaaa1111"), _gpu(1, uuid="GPU-bbbb2222"), _gpu(2, uuid="GPU-cccc3333")]
    apply_masks(gpus, {"CUDA_VISIBLE_DEVICES": "2,GPU-aaaa"})
    assert [g.visible for g in gpus] == [True, False, True]
    assert gpus[1].hidden_reason == "hidden by CUDA_VISIBLE_DEVICES"
    gpus = [_gpu(0), _gpu(1)]
    apply_masks(gpus, {"CUDA_VISIBLE_DEVICES": ""})
    assert not any(g.visible for g in gpus)


def test_cuda_visible_mig_uuid_keeps_one_slice():
    slices = [MigInstance(index=i, uuid=f"MIG-{i}", gpu_instance_id=i, compute_instance_id=0,
                          memory_total_bytes=9984 * MiB) for i in range(2)]
    gpus = [_gpu(0, name="NVIDIA H100 80GB HBM3", uuid="GPU-h100", mig_mode=True, mig_instances=slices), _gpu(1)]
    apply_masks(gpus, {"CUDA_VISIBLE_DEVICES": "MIG-1"})
    assert gpus[0].visible and [m.uuid for m in gpus[0].mig_instances] == ["MIG-1"]
    assert not gpus[1].visible


def test_mixed_cards_index_mask_warns_about_device_order():
    gpus = [_gpu(0, name="NVIDIA GeForce RTX 3090"), _gpu(1)]
    notes = apply_masks(gpus, {"CUDA_VISIBLE_DEVICES": "1"})
    assert any("CUDA_DEVICE_ORDER" in n for n in notes)
    assert apply_masks([_gpu(0, name="A"), _gpu(1)], {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) == []


def test_rocr_then_hip_renumbering():
    gpus = [_gpu(i, name=f"AMD {i}", vendor="amd", uuid=f"GPU-{i}") for i in range(3)]
    apply_masks(gpus, {"ROCR_VISIBLE_DEVICES": "1,2", "HIP_VISIBLE_DEVICES": "1"})
    assert [g.visible for g in gpus] == [False, False, True]  # HIP index 1 = second of ROCR's list


# ---- catalog matching ----------------------------------------------------------------------------

def _key(name, catalog, **kw):
    r = _gpu(0, name=name, **kw)
    match.match_reading(r, catalog)
    return r.catalog_key


def test_match_names(catalog):
    assert _key("NVIDIA GeForce RTX 4090", catalog) == "rtx-4090"
    assert _key("NVIDIA GeForce RTX 4090 D", catalog) == "rtx-4090-d"
    assert _key("NVIDIA H100 80GB HBM3", catalog, mem=81559 * MiB) == "h100-sxm"
    assert _key("NVIDIA H100 PCIe", catalog, mem=81559 * MiB) == "h100-pcie"
    assert _key("NVIDIA H200", catalog, mem=143771 * MiB) == "h200-sxm"
    assert _key("NVIDIA A100-SXM4-80GB", catalog, mem=81920 * MiB) == "a100-80gb-sxm"
    assert _key("NVIDIA A100-SXM4-40GB", catalog, mem=40960 * MiB) == "a100-40gb-sxm"
    assert _key("Tesla T4", catalog, mem=15360 * MiB) == "t4"
    assert _key("NVIDIA GeForce RTX 3060", catalog, mem=12288 * MiB) == "rtx-3060-12gb"
    assert _key("AMD Radeon RX 7900 XTX", catalog, vendor="amd") == "rx-7900-xtx"
    assert _key("Radeon RX 7900 XT", catalog, vendor="amd", mem=21458059264) is None  # XT is not XTX


def test_match_mig_slice_and_laptop(catalog):
    r = _gpu(0, name="NVIDIA H100 80GB HBM3 MIG 1g.10gb", mem=9984 * MiB)
    match.match_reading(r, catalog)
    assert r.catalog_key == "h100-sxm" and "1g.10gb" in r.match_note
    r = _gpu(0, name="NVIDIA GeForce RTX 4090 Laptop GPU", mem=16376 * MiB)
    match.match_reading(r, catalog)
    assert r.catalog_key is None and "not in the GPU catalog" in r.match_note  # not the desktop card


def test_match_apple_core_counts(catalog):
    r = GpuReading(index=0, name="Apple M3 Max", vendor="apple", memory_total_bytes=64 * GiB,
                   unified_memory=True, gpu_cores=40, source="sysctl")
    assert match.match_reading(r, catalog)["key"] == "apple-m3-max-40c"
    r.gpu_cores = 30  # the binned chip has less bandwidth: do not borrow the 40-core figures
    assert match.match_reading(r, catalog) is None


def test_unmatched_states_derived_bandwidth(catalog):
    r = _gpu(0, name="NVIDIA RTX 4000 SFF Ada Generation", mem=20475 * MiB, mem_clock_mhz=7001,
             mem_bus_width_bits=160, derived_bandwidth_gbs=280.0)
    match.match_reading(r, catalog)
    assert r.catalog_key is None and "280 GB/s derived" in r.match_note


def test_real_catalog_if_present():
    entries = match.load_catalog()
    if not entries:
        return  # catalogs/data/gpus.json not written yet
    r = _gpu(0, name="NVIDIA H100 80GB HBM3", mem=81559 * MiB)
    match.match_reading(r, entries)
    assert r.catalog_key is not None


# ---- ProbeReport → Hardware ----------------------------------------------------------------------

def _report(gpus, **kw):
    return ProbeReport(platform=PlatformInfo(system="Linux"), gpus=gpus, **kw)


def test_hardware_from_heterogeneous_gpus(catalog):
    a = _gpu(0, name="NVIDIA GeForce RTX 4090", memory_free_bytes=24057 * MiB)
    b = _gpu(1, name="NVIDIA GeForce RTX 3060", mem=12288 * MiB)
    match.match_all([a, b], catalog)
    hw = probe_hardware(_report([a, b], ram_total_bytes=64 * GiB, ram_available_bytes=60 * GiB), catalog)
    assert [d.catalog_key for d in hw.devices] == ["rtx-4090", "rtx-3060-12gb"]
    assert hw.name == "NVIDIA GeForce RTX 4090 + NVIDIA GeForce RTX 3060"
    assert hw.devices[0].bandwidth_gbs == 1008.0 and hw.devices[0].fp16_tflops == 165.2
    assert hw.devices[0].free_bytes == 24057 * MiB  # other processes counted
    assert hw.usable_bytes(hw.devices[0], now=True) <= 24057 * MiB


def test_hardware_mig_slice_and_hidden_gpu(catalog):
    readings, _ = nvidia_nvml.probe(FakeNVML([H100_MIG, H200]))
    match.match_all(readings, catalog)
    readings[1].visible = False
    report = _report(readings, ram_total_bytes=256 * GiB)
    hw = probe_hardware(report, catalog)
    (dev,) = hw.devices
    assert dev.name == "NVIDIA H100 80GB HBM3 MIG 3g.40gb" and dev.memory_bytes == 40448 * MiB
    assert dev.bandwidth_gbs < 3350.0 and dev.nvlink
    assert any("4 MIG slices" in n for n in report.notes)


def test_hardware_cgroup_caps_ram_and_unified_devices():
    apple = GpuReading(index=0, name="Apple M1 Max", vendor="apple", memory_total_bytes=32 * GiB,
                       unified_memory=True, integrated=True, usable_cap_bytes=26000 * MiB, source="sysctl")
    hw = probe_hardware(
        _report([apple], ram_total_bytes=32 * GiB, ram_available_bytes=20 * GiB, cgroup_limit_bytes=8 * GiB), []
    )
    (dev,) = hw.devices
    assert dev.kind == "apple" and dev.unified_memory and dev.usable_cap_bytes == 26000 * MiB
    assert hw.system_ram_bytes == 8 * GiB and hw.ram_available_bytes == 8 * GiB


def test_hardware_cpu_only():
    hw = probe_hardware(_report([], ram_total_bytes=16 * GiB, ram_available_bytes=12 * GiB), [])
    assert hw.devices == [] and hw.name == "CPU only" and hw.system_ram_bytes == 16 * GiB


# ---- registry, runner, command -------------------------------------------------------------------

def test_registry_survives_a_crashing_backend(monkeypatch, tmp_path):
    from fitprobe.probe import registry

    def boom(*a, **k):
        raise ValueError("odd output")

    monkeypatch.setattr(registry.amd, "probe", boom)
    monkeypatch.setattr(registry.platform, "system", lambda: "Linux")
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([H100]))
    report = probe_machine(env={"CUDA_VISIBLE_DEVICES": "0"}, sys_root=tmp_path, proc_root=tmp_path,
                           which=lambda *a: None, catalog=[])
    amd_status = next(b for b in report.backends if b.name == "amd")
    assert not amd_status.present and amd_status.reason == "probe error: ValueError: odd output"
    assert len(report.gpus) == 1 and report.visible_masks == {"CUDA_VISIBLE_DEVICES": "0"}


def test_registry_wsl_and_nvidia_smi_fallback(monkeypatch, tmp_path):
    (tmp_path / "version").write_text("Linux version 5.15.153.1-microsoft-standard-WSL2\n")
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([], init_error=RuntimeError("Driver Not Loaded")))
    report = probe_machine(env={}, sys_root=tmp_path, proc_root=tmp_path, which=lambda *a: None, catalog=[])
    assert report.platform.wsl
    assert [b.name for b in report.backends][:2] == ["nvml", "nvidia-smi"]
    assert any("WSL2" in n for n in report.notes)


def test_run_command_reasons():
    assert run_command(["/nonexistent/tool-xyz"]).reason == "/nonexistent/tool-xyz not found"
    res = run_command([sys.executable, "-c", "import sys; print('Failed to initialize NVML: N/A'); sys.exit(255)"])
    assert not res.ok and res.reason.endswith("exited 255: Failed to initialize NVML: N/A")

    hung = run_command([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.3)
    assert hung.reason == f"{sys.executable} timed out after 0.3s" and hung.broken
    flood = run_command([sys.executable, "-c", "print('x' * 3_000_000)"], max_output=1 << 20)
    assert not flood.ok and flood.flooded and "2.9 MiB" in flood.reason and flood.stdout == ""


def test_probe_command_cpu_only_and_json(monkeypatch):
    from fitprobe.probe import registry

    monkeypatch.setattr(registry, "probe_machine", lambda: _report([], ram_total_bytes=16 * GiB))
    out = CliRunner().invoke(probe_command, [])
    assert out.exit_code == 0 and "no GPU: CPU/RAM only" in out.output
    out = CliRunner().invoke(probe_command, ["--json"])
    assert json.loads(out.output)["ram_total_bytes"] == 16 * GiB


def test_probe_command_lists_devices(monkeypatch, catalog):
    g = _gpu(0, name="NVIDIA H100 80GB HBM3", mem=81559 * MiB, memory_free_bytes=81081 * MiB)
    match.match_all([g], catalog)
    from fitprobe.probe import registry

    monkeypatch.setattr(registry, "probe_machine", lambda: _report([g]))
    out = CliRunner().invoke(probe_command, [])
    assert "NVIDIA H100 80GB HBM3" in out.output and "79.6 GiB" in out.output and "H100 80GB SXM" in out.output


def test_probe_command_never_shows_a_traceback(monkeypatch):
    from fitprobe.probe import registry

    def boom():
        raise RuntimeError("kaboom")

    monkeypatch.setattr(registry, "probe_machine", boom)
    out = CliRunner().invoke(probe_command, [])
    assert out.exit_code == 4 and "Traceback" not in out.output
    assert out.output.strip() == "error: probe failed: RuntimeError: kaboom"


def test_probe_command_on_this_machine():
    out = CliRunner().invoke(probe_command, [])
    assert out.exit_code == 0 and "backends:" in out.output and "RAM:" in out.output
