"""`fitprobe report`: text, --json and --html (the page in a browser: test_report_page.py)."""
import json
import re

from click.testing import CliRunner

from fitprobe.cli import main

ARGS = ["report", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--ctx", "16384"]


def _json(args):
    res = CliRunner().invoke(main, args + ["--json"])
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.output)


def test_report_json_has_every_section():
    o = _json(ARGS)
    assert o["speed"]["decode_tps"] > 0 and o["speed"]["ttft_ms"] > 0
    assert o["cost"]["cheapest"]["usd_per_million_tokens"] > 0
    assert [m["method"] for m in o["finetune"]["methods"]] == ["qlora", "lora", "full"]
    roles = [p["role"] for p in o["recommendations"]]
    assert {"best single GPU", "best value", "Apple unified memory", "cheapest cloud", "smallest multi-GPU set"} <= set(roles)
    assert "16,384" in o["diagnosis"]["verdict"] and o["diagnosis"]["kv_alt_dtype"] == "q8_0"


def test_report_text_and_options():
    res = CliRunner().invoke(main, ARGS + ["--hours-per-day", "8", "--electricity", "0.30", "--ft-optimizer", "adamw8bit"])
    assert res.exit_code == 0, res.output
    for part in ("Speed", "Cloud cost (8 h/day)", "Rent vs buy", "Fine-tuning memory", "Recommended hardware", "Diagnosis"):
        assert part in res.output
    assert "$0.3/kWh" in res.output and "adamw8bit" in res.output


def test_report_bad_option_is_one_line():
    res = CliRunner().invoke(main, ARGS + ["--hours-per-day", "30"])
    assert res.exit_code == 2 and res.output.strip().count("\n") == 0 and "--hours-per-day" in res.output


def test_report_does_not_fit_exit_code_and_diagnosis():
    o = _json(["report", "llama-3.1-70b-instruct", "--gpu", "RTX 3060", "--quant", "Q8_0"])
    assert o["verdict"]["status"] == "exceeds" and "cannot hold" in o["diagnosis"]["verdict"]
    assert o["diagnosis"]["tips"]


def test_report_html_is_one_self_contained_page(tmp_path):
    """The page loads nothing (no external script, style, image or frame); the browser tests are in
    test_report_page.py."""
    page = tmp_path / "report.html"
    res = CliRunner().invoke(main, ARGS + ["--html", str(page)])
    assert res.exit_code == 0 and res.output.strip() == f"wrote {page}"
    html = page.read_text()
    assert html.startswith("<!doctype html>") and "@media (prefers-color-scheme:dark)" in html and "@media print" in html
    assert not re.search(r"<(script[^>]*\bsrc=|link|img|iframe)\b|@import|url\(", html), "the page must load nothing"


def test_report_html_unwritable_path_exits_74(tmp_path):
    res = CliRunner().invoke(main, ARGS + ["--html", str(tmp_path / "missing" / "report.html")])
    assert res.exit_code == 74 and "cannot write" in res.output and res.output.strip().count("\n") == 0


def test_a_long_wait_reads_in_seconds_or_minutes(tmp_path):
    """A CPU-only 4K-prompt prefill takes minutes: the text and the page give it in s or min, never
    as six-digit milliseconds; the page's number still carries the JSON value and its divisor."""
    from fitprobe.render import duration

    assert [duration(ms) for ms in (9_999, 12_345, 99_000, 415_000, 600_000, 5_400_000)] == [
        "9,999 ms", "12.3 s", "99.0 s", "415 s", "10 min", "90 min"]
    args = ["report", "llama-3.1-8b-instruct", "--gpu", "cpu", "--ram-gib", "32", "--threads", "1", "--ram-bw", "13"]
    ttft = _json(args)["speed"]["ttft_ms"]
    assert ttft > 600_000  # 4,096 prompt tokens at ~5 tok/s on one core
    res = CliRunner().invoke(main, args)
    assert f"TTFT for a 4,096-token prompt: {ttft / 60e3:,.0f} min" in res.output, res.output
    page = tmp_path / "report.html"
    assert CliRunner().invoke(main, args + ["--html", str(page)]).exit_code == 0
    assert re.search(r'data-k="speed.ttft_ms" data-v="[0-9.]+" data-f=",.0f" data-s="60000">'
                     + re.escape(f"{ttft / 60e3:,.0f}") + r"</span>&nbsp;min", page.read_text())
