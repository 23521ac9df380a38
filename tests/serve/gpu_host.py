"""Run `fitprobe serve` on a host with one stand-in NVIDIA H200 (tests/probe's FakeNVML, fed with the
values of the real H200 capture): the probe, catalog matching, sizing and the server all run for real.
FAKE_GPU_USED_MIB makes other processes hold that much of its memory (a busy GPU).

    python tests/serve/gpu_host.py [serve options]
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "probe"))

from fake_pynvml import FakeNVML  # noqa: E402
from test_probe_nvml import H200  # noqa: E402

from fitprobe.probe.types import MiB  # noqa: E402

used = int(os.environ.get("FAKE_GPU_USED_MIB", "0"))
device = H200
if used:
    mem = H200["memory"]
    device = {**H200, "memory": {**mem, "used": used * MiB, "free": mem["total"] - mem["reserved"] - used * MiB}}
sys.modules["pynvml"] = FakeNVML([device])
os.environ.pop("CUDA_VISIBLE_DEVICES", None)

from fitprobe.cli import entry  # noqa: E402

sys.argv = ["fitprobe", "serve", *sys.argv[1:]]
entry()
