"""`fitprobe report --gpu NAME` without MODEL: the hardware page, in text, JSON (FitOutput) and HTML."""
import json
import re
from html import escape as html_escape

from click.testing import CliRunner

from fitprobe.cli import main


def test_hardware_page_text_and_json_agree():
    r = CliRunner().invoke(main, ["report", "--gpu", "RTX 4090", "--ram-gib", "64"])
    assert r.exit_code == 0 and r.stdout.startswith("What runs on RTX 4090")
    j = CliRunner().invoke(main, ["report", "--gpu", "RTX 4090", "--ram-gib", "64", "--json"])
    data = json.loads(j.stdout)
    assert data["command"] == "report" and data["rows"]
    first = data["rows"][0]
    assert re.search(rf"^\s+1 {re.escape(first['model'][:20])}", r.stdout, re.M)


def test_hardware_page_html_carries_every_row(tmp_path):
    page = tmp_path / "hw.html"
    r = CliRunner().invoke(main, ["report", "--gpu", "H100 SXM", "--html", str(page)])
    assert r.exit_code == 0 and "wrote" in r.stdout
    html = page.read_text()
    data = json.loads(CliRunner().invoke(main, ["report", "--gpu", "H100 SXM", "--json"]).stdout)
    for i, row in enumerate(data["rows"]):
        assert f'data-k="rows.{i}.decode_tps" data-v="{json.dumps(row["decode_tps"])}"' in html
        assert f'<td class="l id" data-t="rows.{i}.model">{html_escape(row["model"])}</td>' in html
    assert "<script" not in html and html.startswith("<!doctype html>")
