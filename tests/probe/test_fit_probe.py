"""`fitprobe fit` on the probed machine: the stand-in pynvml (the real H200 capture) is the only thing
replaced; the machine is probed once per run, whatever the number of models sized."""
import json
import sys

from click.testing import CliRunner
from fake_pynvml import FakeNVML
from test_probe_nvml import H200

from fitprobe.cli import main


def test_fit_ranks_on_the_probed_gpu_with_one_probe(monkeypatch):
    from fitprobe.probe import registry

    calls = []
    real = registry.probe_machine
    monkeypatch.setattr(registry, "probe_machine", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([H200]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    r = CliRunner().invoke(main, ["fit", "--json", "--limit", "5"])
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["hardware"]["source"] == "probe" and data["hardware"]["count"] == 1
    assert "H200" in data["hardware"]["name"]
    assert len(data["rows"]) == 5 and all(row["runs"] for row in data["rows"])
    assert calls == [1]
