"""`fitprobe fit` on named hardware: the table, the filters and sorts, --all, the JSON contract, errors,
and the whole pipeline's sense as memory grows (real planners, no stand-ins)."""
import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from fitprobe.cli import main

GIB = 1 << 30


def run(*args):
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def on_4090():
    code, out, _ = run("fit", "--gpu", "RTX 4090", "--ram-gib", "64", "--json")
    assert code == 0
    return json.loads(out)


def test_every_catalog_model_is_ranked_with_a_plan_that_runs(on_4090):
    rows = on_4090["rows"]
    from fitprobe.catalogs.models import load_models

    assert len(rows) >= 50 and len(rows) <= len(load_models())
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    scores = [r["score"]["score"] for r in rows]
    assert scores == sorted(scores, reverse=True)
    for r in rows:
        assert r["runs"] and r["status"] in ("fits", "tight") and r["margin_bytes"] >= 0
        assert r["context"] >= 4096 or r["context"] == r["max_context"]
        assert r["decode_tps"] > 0 and r["command"]
        s = r["score"]
        assert abs(s["score"] - s["quality"] * s["speed_factor"] * s["context_factor"]) < 0.02
    small = next(r for r in rows if r["model"] == "llama-3.2-1b-instruct")
    assert small["quant"] == "BF16" and small["placement"] == "gpu" and small["context"] == 131072


def test_the_table_fits_in_100_columns():
    code, out, _ = run("fit", "--gpu", "RTX 3060", "--all", "--family", "deepseek")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "would fit:" in out and " no " in out


def test_filters_hold_for_every_row():
    code, out, _ = run("fit", "--gpu", "RTX 4090", "--ram-gib", "64", "--use-case", "coding", "--min-ctx", "65536",
                       "--min-tps", "20", "--max-params", "40", "--json")
    data = json.loads(out)
    assert code == 0 and data["rows"] and data["context_target"] == 65536
    for r in data["rows"]:
        assert "coding" in r["tags"] and r["context"] >= 65536 and r["decode_tps"] >= 20 and r["params"] <= 40e9
    code, out, _ = run("fit", "--gpu", "H100 SXM", "--engine", "vllm", "--family", "qwen3", "--limit", "5", "--json")
    rows = json.loads(out)["rows"]
    assert len(rows) == 5 and all(r["engine"] == "vllm" and "qwen3" in r["family"] for r in rows)
    code, out, _ = run("fit", "--gpu", "H100 SXM", "--use-case", "vision", "--json")
    assert all("vision" in r["tags"] for r in json.loads(out)["rows"])


def test_sort_by_speed_orders_decode_speed():
    code, out, _ = run("fit", "--gpu", "RTX 4090", "--sort", "speed", "--limit", "10", "--json")
    tps = [r["decode_tps"] for r in json.loads(out)["rows"]]
    assert tps == sorted(tps, reverse=True)


def test_all_lists_what_does_not_fit_after_what_does_with_a_fix():
    code, out, _ = run("fit", "--gpu", "RTX 3060", "--all", "--json")
    rows = json.loads(out)["rows"]
    runs = [r["runs"] for r in rows]
    assert runs == sorted(runs, reverse=True) and not all(runs)
    missing = [r for r in rows if not r["runs"]]
    assert all(r["score"]["score"] == 0 and r["margin_bytes"] < 0 for r in missing)
    assert any("more GPU" in f for r in missing for f in r["would_fit"])


def test_json_validates_against_fitprobe_schema_fit(on_4090):
    from tests.gate.test_schema import validate

    code, out, _ = run("schema", "fit")
    schema = json.loads(out)
    assert code == 0 and schema["title"].startswith("fitprobe FitOutput")
    validate(on_4090, schema, schema)


@pytest.mark.parametrize("args,needle", [
    (["--min-ctx", "0"], "--min-ctx"), (["--limit", "0"], "--limit"), (["--max-params", "-1"], "--max-params"),
    (["--gpu", "RTX 9999"], "unknown GPU"), (["--sort", "vibes"], "vibes"), (["--min-tps", "-2"], "--min-tps"),
    (["--gpu", "cpu"], "--ram-gib"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    code, out, err = run("fit", *(["--gpu", "RTX 4090"] if "--gpu" not in args else []), *args)
    assert code == 2 and out == ""
    assert needle in err and "Traceback" not in err


def test_nothing_runs_exits_1():
    code, out, _ = run("fit", "--gpu", "RTX 3060", "--min-ctx", "1000000")
    assert code == 1 and "nothing matches" in out


@pytest.fixture(scope="module")
def pipeline():
    from fitprobe.app import error_band
    from fitprobe.catalogs.model_uses import load_quant_quality
    from fitprobe.catalogs.quants import quant_table
    from fitprobe.catalogs.speed_calibration import load_calibration
    from fitprobe.estimator.rank import RankPolicy
    from fitprobe.fitting import catalog_subjects

    facts = {s.name: s.facts for s in catalog_subjects()}
    return facts, dict(table=quant_table(), quality=load_quant_quality(), error_band=error_band(),
                       policy=RankPolicy(), calibration=load_calibration())


@settings(max_examples=12, deadline=None)
@given(model=st.sampled_from(["qwen3-8b", "qwen3-30b-a3b", "gemma-3-27b-it", "llama-3.1-70b-instruct"]),
       gib=st.integers(6, 120), more=st.integers(1, 64), ram=st.sampled_from([None, 32, 128]))
def test_more_memory_never_lowers_a_models_score(pipeline, model, gib, more, ram):
    """Through the real planners and speed model: the model's best score on a bigger card is at least
    its best score on the smaller one (same bandwidth, same RAM)."""
    from fitprobe.estimator.fit import FitContext, fit_model
    from fitprobe.estimator.hardware import Device, Hardware

    facts, shared = pipeline

    def best(mem_gib):
        hw = Hardware(devices=[Device(name="card", memory_bytes=mem_gib * GIB, bandwidth_gbs=1000, fp16_tflops=160)],
                      system_ram_bytes=ram * GIB if ram else None)
        fit = fit_model(facts[model], FitContext(hw=hw, **shared))
        return max((s.score for s in fit.scored), default=0.0)

    assert best(gib + more) >= best(gib) - 1e-9


def test_fit_is_registered_lazily():
    """`fit` shows in --help, but the plain plan path never imports its modules."""
    import subprocess
    import sys

    code = ("import sys\nfrom fitprobe import cli\nsys.argv=['fitprobe','plan','qwen3-8b','--gpu','rtx-4090']\n"
            "try:\n    cli.entry()\nexcept SystemExit:\n    pass\n"
            "mods = ('fitprobe.cmd_fit', 'fitprobe.fitting', 'fitprobe.estimator.rank', 'fitprobe.estimator.fit')\n"
            "print(sorted(m for m in mods if m in sys.modules), file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "Verdict" in run.stdout and run.stderr.strip().splitlines()[-1] == "[]"
    code, out, _ = (lambda r: (r.exit_code, r.stdout, r.stderr))(CliRunner().invoke(main, ["--help"]))
    assert code == 0 and "fit " in out


def test_all_with_plan_filters_keeps_runnable_rows_first():
    code, out, _ = run("fit", "--gpu", "RTX 3060", "--all", "--min-tps", "30", "--family", "qwen3", "--json")
    rows = json.loads(out)["rows"]
    runs = [r["runs"] for r in rows]
    assert code == 0 and runs == sorted(runs, reverse=True) and not all(runs)
    assert all(r["decode_tps"] >= 30 for r in rows if r["runs"])
    filtered = [r for r in rows if not r["runs"] and r["status"] != "exceeds"]
    assert filtered and all(r["would_fit"][0].startswith("it runs") for r in filtered)


def test_cpu_only_title_names_the_ram_not_zero_device_memory():
    code, out, _ = run("fit", "--gpu", "cpu", "--ram-gib", "32", "--limit", "3")
    assert code == 0, out
    title = out.splitlines()[0]
    assert "32 GiB RAM" in title and "GiB usable" not in title
