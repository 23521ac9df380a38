"""The verdict's error band: measured per component and per engine family (scripts/accuracy.py --write-band)."""
import json

import pytest

from fitprobe.app import error_band
from fitprobe.catalogs import data_path
from fitprobe.estimator.verdict import ErrorBand, band_for
from scripthelpers import load_script



def _accuracy():
    return load_script("accuracy")


def test_stored_band_is_the_measured_set_s_p90():
    # error_band.json must be regenerated whenever measured_runs.json (or the estimator) changes
    acc = _accuracy()
    errors: dict = {}
    for run in json.loads(data_path("measured_runs.json").read_text())["runs"]:
        fam = errors.setdefault(acc.FAMILY[run["kind"]], {})
        for comp, measured, est in acc.compare_run(run):
            fam.setdefault(comp, []).append(abs(est - measured) / abs(measured))
    overall, engines, counts = acc.bands(errors)
    stored = json.loads(data_path("error_band.json").read_text())
    assert stored["p90_abs_error"] == overall
    assert stored["engines"] == engines and stored["n"] == counts


def test_p90_is_by_nearest_rank():
    pct = _accuracy()._pct
    assert pct([0.01] * 7 + [0.6], 0.9) == 0.6  # 8 comparisons: the worst one
    assert pct([0.01] * 19 + [0.6], 0.9) == 0.01  # 20: the 18th


def test_each_engine_family_is_judged_on_its_own_runs():
    band = error_band()
    stored = json.loads(data_path("error_band.json").read_text())["engines"]
    for engine, family in (("llama.cpp", "llama.cpp"), ("ollama", "llama.cpp"), ("vllm", "vllm"), ("sglang", "vllm")):
        b = band_for(band, engine)
        assert (b.weights, b.kv_cache, b.buffers) == tuple(stored[family][c] for c in ("weights", "kv_cache", "buffers"))
    assert band_for(band, "mlx") is band  # no MLX runs: the all-engine band
    assert band_for(0.05, "vllm") == 0.05  # a plain float band stays as given
    assert band_for(ErrorBand(0.01, 0.01, 0.1), "vllm").weights == 0.01


@pytest.mark.parametrize("engine", ["vllm", "llama.cpp"])
def test_a_plan_reports_its_engine_s_band(engine):
    from click.testing import CliRunner

    from fitprobe.cli import main

    r = CliRunner().invoke(main, ["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 3090", "--engine", engine, "--json"])
    verdict = json.loads(r.stdout)["verdict"]
    assert verdict["error_band"] == pytest.approx(float(band_for(error_band(), engine)))
