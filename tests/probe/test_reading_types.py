"""Readings are records (no pydantic at run time): every one the parsers build from recorded tool
outputs must match its declared field types, which `fitprobe.record_json` checks as it writes them."""
import pytest
from fake_pynvml import FakeNVML
from probe_fixtures import FIXTURES, fixture_text
from test_probe_nvml import H100, H100_MIG, H200

from fitprobe.probe import amd, ascend, cpu, intel, nvidia_nvml
from fitprobe.probe.types import GpuReading
from fitprobe.record_json import ContractError, record_data

PARSED = [
    *[(amd.parse_rocm_smi_json, f.name) for f in sorted(FIXTURES.glob("rocm-smi-json_*.json"))],
    *[(amd.parse_rocm_smi_csv, f.name) for f in sorted(FIXTURES.glob("rocm-smi-csv_*.csv"))],
    *[(ascend.parse_npu_smi_info, f.name) for f in sorted(FIXTURES.glob("npu-smi-info_*.txt"))],
    (intel.parse_xpu_dump, "xpu-smi-discovery-dump_ArcA310.csv"),
    (cpu.parse_cpuinfo, "proc-cpuinfo_sandbox-VM_AMD-EPYC_cpu0.txt"),
    (cpu.parse_lscpu, "lscpu-flags_Xeon-8488C_AWS-m7i_AMX.txt"),
]


@pytest.mark.parametrize("parse,name", PARSED, ids=[name for _, name in PARSED])
def test_parsed_readings_match_their_declared_types(parse, name):
    readings = parse(fixture_text(name))
    readings = readings if isinstance(readings, list) else [readings]
    assert readings
    for reading in readings:
        record_data(reading)


@pytest.mark.parametrize("devices", [[H200], [H100_MIG], [H100, H200]])
def test_nvml_readings_match_their_declared_types(devices):
    readings, status = nvidia_nvml.probe(FakeNVML(devices))
    for reading in readings + [status]:
        record_data(reading)


def test_a_wrong_type_in_a_reading_is_caught():
    bad = GpuReading(index=0, name="x", vendor="nvidia", source="nvml", memory_total_bytes="24 GiB")
    with pytest.raises(ContractError, match=r"memory_total_bytes: expected int, got str"):
        record_data(bad)
