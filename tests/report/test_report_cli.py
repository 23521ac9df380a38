"""`fitprobe report`: text, --json and --html; the HTML rendered in headless Chromium shows the JSON's numbers."""
import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from fitprobe.cli import main

CHROMIUM = "/usr/bin/chromium"
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


class _Spans(HTMLParser):
    def __init__(self):
        super().__init__()
        self.values: dict[str, list[str]] = {}
        self.texts: dict[str, list[str]] = {}
        self._open: list[str | None] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-k" in a:
            self.values.setdefault(a["data-k"], []).append(a.get("data-v", ""))
            self._open.append(a["data-k"])
        elif tag in ("span", "div"):
            self._open.append(None)

    def handle_endtag(self, tag):
        if tag in ("span", "div") and self._open:
            self._open.pop()

    def handle_data(self, data):
        if self._open and self._open[-1]:
            self.texts.setdefault(self._open[-1], []).append(data)


def _lookup(o, path):
    for part in path.split("."):
        o = o[int(part)] if isinstance(o, list) else o[part]
    return o


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="headless Chromium not installed (Debian package 'chromium')")
def test_html_in_chromium_shows_the_json_numbers(tmp_path):
    page = tmp_path / "report.html"
    res = CliRunner().invoke(main, ARGS + ["--html", str(page)])
    assert res.exit_code == 0, res.output
    o = _json(ARGS)
    html = page.read_text()
    assert not re.search(r"<(script[^>]*\bsrc=|link|img|iframe)\b", html), "the page must load nothing"
    assert html.count("<script>") == 1  # the speed simulator, inline
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-500:]
    spans = _Spans()
    spans.feed(dom.stdout)
    assert len(spans.values) > 60
    for key, raws in spans.values.items():
        expected = _lookup(o, key)
        for raw in raws:
            if expected is None:
                assert raw == ""
            elif isinstance(expected, str):
                assert raw == expected
            elif key == "speed.bytes_per_token":
                assert float(raw) == pytest.approx(expected / 1e9)
            else:
                assert float(raw) == pytest.approx(float(expected), rel=1e-9), key
    # what a reader sees is the same number, formatted
    assert spans.texts["speed.decode_tps"][0] == f"{o['speed']['decode_tps']:,.1f}"
    assert spans.texts["memory.total_bytes"][0] == f"{o['memory']['total_bytes'] / (1 << 30):,.2f}"
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1200,2400", page.as_uri()],
                   capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000
