"""The report page in real headless Chromium (Playwright driving /usr/bin/chromium): at desktop and phone
widths, every number on the page is the JSON's number, formatted for the page's language; nothing overflows
sideways; the console stays clean; nothing is fetched; the simulator plays fitprobe/simulate.py's timing.

Screenshots are kept in build/screenshots/ (git ignores build/; FITPROBE_SCREENSHOT_DIR sets another folder) to
look at: every case and width, and dark mode and the hardware page in each language.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fitprobe.cli import main

CHROMIUM = os.environ.get("FITPROBE_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
CASES = {  # two GPUs with layers in RAM; one GPU that fits; a model far too big (exit 1)
    "70b-2x4090": ["llama-3.1-70b-instruct", "--gpu", "RTX 4090", "--gpus", "2", "--ram-gib", "64", "--ctx", "16k"],
    "8b-4090": ["llama-3.1-8b-instruct", "--gpu", "RTX 4090"],
    "glm-5070": ["GLM-4.5 (355B-A32B)", "--gpu", "RTX 5070"],
    "probed-busy": ["qwen3-30b-a3b", "--ram-gib", "256"],  # this machine: an H200 with 130 GB taken (below)
    "cpu-only": ["llama-3.1-8b-instruct", "--gpu", "cpu", "--ram-gib", "32"],
}
LANGS = ("en", "es", "de", "zh")
# every case in English; the other languages on the multi-GPU page (the longest) and the one that does not fit
PAGES = [(case, "en") for case in CASES] + [(case, lang) for lang in LANGS[1:] for case in ("70b-2x4090", "glm-5070")]
# Text with digits outside a marked number must be one of these: a string of the JSON shown as it is
# (data-t), a sentence of the core (data-say), page furniture that is no datum (data-lit: device ordinals,
# chart ticks, the simulator's live text), or a command.
ALLOWED = "[data-k],[data-t],[data-say],[data-lit],code,pre,script,style,title"
SHOTS = Path(os.environ.get("FITPROBE_SCREENSHOT_DIR") or Path(__file__).parents[2] / "build" / "screenshots")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from playwright.sync_api import Error, sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.skip(f"HEADLESS CHROMIUM NOT FOUND at {CHROMIUM}: the report page is NOT checked in a browser "
                    "(apt-get install chromium; .ci/run does)")
    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS, timeout=60_000)
    except Error as exc:
        pw.stop()
        pytest.skip(f"HEADLESS CHROMIUM CANNOT START ({str(exc).splitlines()[0]}): the report page is NOT checked")
    yield b
    b.close()
    pw.stop()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Each case's page and JSON from one `report --html --json` run (the same data by construction)."""
    out = {}
    d = tmp_path_factory.mktemp("pages")
    for name, lang in PAGES + [("8b-4090", "de")]:
        html = d / f"{name}-{lang}.html"
        with pytest.MonkeyPatch.context() as mp:
            if name == "probed-busy":
                busy_h200(mp)
            res = CliRunner().invoke(main, ["report", *CASES[name], "--html", str(html), "--json", "--lang", lang])
        assert res.exit_code in (0, 1), res.output
        out[name, lang] = (html, json.loads(res.stdout))
    return out


def busy_h200(mp) -> None:
    """The probe sees one H200 (the stand-in pynvml with the real capture's values) with 130 GB in use."""
    import sys

    mp.syspath_prepend(str(Path(__file__).parents[1] / "probe"))
    from fake_pynvml import FakeNVML
    from test_probe_nvml import H200

    from fitprobe.probe.types import MiB

    busy = {**H200, "memory": {**H200["memory"], "used": 130_000 * MiB, "free": 13_158 * MiB}}
    mp.setitem(sys.modules, "pynvml", FakeNVML([busy]))
    mp.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def lookup(data, path: str):
    """A JSON value by dotted path; 'a - b' and 'a + b + c' are the page's sums and differences."""
    if " - " in path:
        a, b = path.split(" - ")
        return lookup(data, a) - lookup(data, b)
    if " + " in path:
        return sum(lookup(data, p) for p in path.split(" + "))
    parts = path.split(".")
    while parts:
        part = parts.pop(0)
        while isinstance(data, dict) and part not in data and parts:  # a key with a dot: launch.llama.cpp
            part += "." + parts.pop(0)
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


SPEC = re.compile(r"^(?P<group>,)?(?:\.(?P<digits>\d+))?(?P<kind>[dfg%]?)$")


def formatted(value, spec: str, scale: float, lang: str) -> str:
    """What the reader must see for a raw JSON value: Python's formatting in English, the locale's (Babel) else."""
    if value is None:
        return "–"
    x = value / scale if scale != 1 else value
    if spec == "ctx":
        return f"{int(x) // 1024}K" if x % 1024 == 0 else formatted(x, ",", 1, lang)
    if lang == "en":
        return format(x, spec)
    from decimal import Decimal

    from babel.numbers import format_decimal, format_percent

    # Python's rounding of the float (as in English), the locale's symbols and grouping (Babel)
    locale = {"es": "es", "de": "de", "zh": "zh_Hans"}[lang]
    m = SPEC.match(spec)
    digits = int(m["digits"] or 0)
    if m["kind"] == "%":
        exact = Decimal(format(x * 100, f".{digits}f")) / 100
        return format_percent(exact, format=None if not digits else "#,##0." + "0" * digits + "%", locale=locale)
    if m["kind"] in ("g", "") and m["digits"] is None:
        return format_decimal(Decimal(repr(x)), format="#,##0.######" if m["group"] else "0.######", locale=locale)
    return format_decimal(Decimal(format(x, f".{digits}f")),
                          format=("#,##0" if m["group"] else "0") + ("." + "0" * digits if digits else ""), locale=locale)


COLLECT = r"""(allowed) => {
  const UNITS = /1M|1 Mio\.|2³⁰|10⁹|100万/g;  // units in the wording: per 1M tokens, GiB = 2³⁰ bytes
  const nums = [...document.querySelectorAll('[data-k]')].map(e => ({k: e.dataset.k, v: e.dataset.v, f: e.dataset.f,
    s: e.dataset.s, text: e.textContent}));
  const strs = [...document.querySelectorAll('[data-t]')].map(e => ({k: e.dataset.t, text: e.textContent}));
  const says = [...document.querySelectorAll('[data-say]')].map(e => ({k: e.dataset.say, text: e.textContent}));
  const loose = [];
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode())
    if (/[0-9]/.test(n.data.replace(UNITS, '')) && !n.parentElement.closest(allowed)) loose.push(n.data.trim());
  return {nums, strs, says, loose, scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
          sections: [...document.querySelectorAll('h2')].map(h => h.id)};
}"""


def open_page(browser, html: Path, width: str, **context):
    w, h = WIDTHS[width]
    ctx = browser.new_context(viewport={"width": w, "height": h}, **context)
    page = ctx.new_page()
    problems, requests = [], []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: requests.append(r.url) if r.url != html.as_uri() else None)
    page.goto(html.as_uri(), wait_until="load")
    return ctx, page, problems, requests


def keep(shot: Path) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, SHOTS / shot.name)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case,lang", PAGES)
def test_page_shows_the_json_numbers(browser, pages, tmp_path, case, width, lang):
    html, data = pages[case, lang]
    ctx, page, problems, requests = open_page(browser, html, width, reduced_motion="reduce")
    seen = page.evaluate(COLLECT, ALLOWED)
    shot = tmp_path / f"{case}-{width}-{lang}.png"
    page.screenshot(path=str(shot), full_page=True)
    keep(shot)
    ctx.close()
    assert not problems, problems
    assert not requests, f"the page fetched {requests}"
    assert seen["sections"][:3] == ["plan", "memory", "speed"] and "faq" in seen["sections"]
    assert seen["scrollWidth"] <= seen["innerWidth"], f"{seen['scrollWidth']} px wide in a {seen['innerWidth']} px viewport"
    assert len(seen["nums"]) > 150
    for n in seen["nums"]:
        expected = lookup(data, n["k"])
        raw = json.loads(n["v"])
        assert raw == pytest.approx(expected, rel=1e-12, abs=0) if isinstance(expected, float) else raw == expected, n
        assert n["text"] == formatted(raw, n["f"], float(n["s"]), lang), n
    for s in seen["strs"]:
        assert s["text"] == str(lookup(data, s["k"]) or "–"), s
    for s in seen["says"]:
        assert s["text"].strip(), s
        if lang == "en":
            assert s["text"] == lookup(data, s["k"]), s
    assert not seen["loose"], f"numbers on the page that are not the JSON's: {seen['loose']}"


def test_probed_page_says_idle_and_right_now(browser, pages):
    html, data = pages["probed-busy", "en"]
    assert data["verdict"]["status"] == "fits" and data["verdict_now"]["status"] == "exceeds"
    ctx, page, _, _ = open_page(browser, html, "desktop")
    verdict = page.locator("#verdict").inner_text()
    now_cmd = page.locator("#cmd-now").inner_text()
    ctx.close()
    assert "On the idle hardware" in verdict and "Right now (free memory)" in verdict
    assert now_cmd == data["recommended_now"]["command"]


def test_multi_gpu_summary_adds_up(browser, pages):
    """The issue's complaint: the cards said total 42.0, usable 45.6, margin 1.36 on two GPUs. Now the margin
    card names the tightest device with its own usable and needed, and each device's bar adds up."""
    html, data = pages["70b-2x4090", "en"]
    ctx, page, _, _ = open_page(browser, html, "desktop")
    card = page.locator(".card", has_text="Margin").inner_text()
    ctx.close()
    mem, margin = data["memory"], data["verdict"]["margin_bytes"]
    tight = [d for d in mem["per_device"] if d["usable_bytes"] - d["total_bytes"] == margin]
    assert tight and len(mem["per_device"]) == 2
    for d in mem["per_device"]:
        assert d["weights_bytes"] + d["kv_cache_bytes"] + d["buffers_bytes"] == d["total_bytes"]
    gib = lambda n: f"{n / (1 << 30):,.2f}"  # noqa: E731
    assert gib(tight[0]["usable_bytes"]) in card and gib(tight[0]["total_bytes"]) in card and gib(margin) in card


def test_simulator_waits_then_types_at_the_decode_speed(browser, pages):
    """Chromium's clock run forward: no word before the time to first token, then tps words a second
    (fitprobe/simulate.py's Playback, sped up only past 30 s)."""
    from fitprobe.simulate import Playback

    html, data = pages["8b-4090", "en"]
    sp = data["speed"]
    pb = Playback.plan(sp["ttft_ms"], sp["decode_tps"], 120, 30.0)
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, reduced_motion="reduce")
    page = ctx.new_page()
    page.clock.install()
    page.goto(html.as_uri())
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)  # from here on time moves only when run
    page.click("#sim-play")
    out = page.locator("#sim-out")
    t = int(pb.first_token_at * 1000 * 0.8)
    page.clock.run_for(t)
    assert out.inner_text().startswith("reading the prompt")
    page.clock.run_for(math.ceil(pb.token_time(9) * 1000) - t)
    t = math.ceil(pb.token_time(9) * 1000)
    text = out.inner_text()
    assert text.startswith(f"first token after {pb.ttft_s:.2f} s")

    def due(ms: float) -> int:  # tokens Playback has shown by then
        return sum(pb.token_time(i) * 1000 <= ms for i in range(pb.tokens))

    # the page redraws every 16 ms: what it shows is what was due at its last frame
    assert due(t - 17) <= len(text.splitlines()[1].split()) <= due(t) == 10
    page.clock.run_for(int(pb.token_time(pb.tokens - 1) * 1000) + 100)
    assert f"{pb.tokens} tokens in {pb.real_seconds:.2f} s" in out.inner_text()
    ctx.close()


# Every visible text on the dark page keeps a 4.5:1 contrast (WCAG AA) against the dark background
READABLE_ON_DARK = r"""() => {
  const lum = c => { const [r, g, b] = c.match(/[\d.]+/g).slice(0, 3).map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const bg = lum(getComputedStyle(document.body).backgroundColor);
  return [...document.querySelectorAll('h1,h2,p,td,th,summary,li,small,span')]
    .filter(e => e.offsetParent && e.textContent.trim() && !e.closest('.badge'))
    .filter(e => (lum(getComputedStyle(e).color) + 0.05) / (bg + 0.05) < 4.5).map(e => e.textContent.trim().slice(0, 40));
}"""


@pytest.mark.parametrize("lang", LANGS)
def test_dark_mode_print_and_show_all(browser, pages, tmp_path, lang):
    html, _ = pages["70b-2x4090", lang]
    ctx, page, problems, _ = open_page(browser, html, "phone", color_scheme="dark")
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    unreadable = page.evaluate(READABLE_ON_DARK)
    assert page.evaluate("document.documentElement.lang") == lang
    shot = tmp_path / f"70b-2x4090-phone-dark-{lang}.png"
    page.screenshot(path=str(shot), full_page=True)
    keep(shot)
    hidden = page.locator("#cloud ~ details").first
    assert hidden.evaluate("d => !d.open")
    page.set_viewport_size({"width": 794, "height": 1123})  # A4 at 96 dpi
    page.emulate_media(media="print")
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    assert page.evaluate("[...document.querySelectorAll('details')].every(d => d.open)")
    assert page.locator("button").first.is_hidden()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    pdf = page.pdf(format="A4")
    ctx.close()
    assert pdf.startswith(b"%PDF") and len(pdf) > 50_000
    assert bg == "rgb(13, 17, 23)" and not unreadable and not problems, unreadable


HARDWARE_TITLE = {"en": "What runs on RTX 4090", "es": "Qué se ejecuta en RTX 4090", "de": "Was auf RTX 4090 läuft",
                  "zh": "RTX 4090 上能运行什么"}


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("lang", LANGS)
def test_hardware_page_numbers_and_width(browser, tmp_path, lang, width, scheme):
    html = tmp_path / "hw.html"
    res = CliRunner().invoke(main, ["report", "--gpu", "RTX 4090", "--ram-gib", "64", "--html", str(html), "--json",
                                    "--lang", lang])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    ctx, page, problems, requests = open_page(browser, html, width, color_scheme=scheme)
    seen = page.evaluate(COLLECT, ALLOWED)
    title = page.locator("h1").inner_text()
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    shot = tmp_path / f"hardware-{width}-{scheme}-{lang}.png"
    page.screenshot(path=str(shot), full_page=True)
    keep(shot)
    ctx.close()
    assert not problems and not requests
    assert seen["scrollWidth"] <= seen["innerWidth"]
    assert len(seen["nums"]) >= 7 * len(data["rows"])
    assert title == HARDWARE_TITLE[lang] and (bg == "rgb(13, 17, 23)") == (scheme == "dark")
    for n in seen["nums"]:
        assert json.loads(n["v"]) == lookup(data, n["k"]), n
        assert n["text"] == formatted(json.loads(n["v"]), n["f"], float(n["s"]), lang), n
    for s in seen["strs"]:
        assert s["text"] == str(lookup(data, s["k"])), s
    for s in seen["says"]:
        assert s["text"].strip() and (lang != "en" or s["text"] == lookup(data, s["k"])), s
    assert not seen["loose"], seen["loose"]


def test_copy_button_copies_the_command(browser, pages):
    html, data = pages["8b-4090", "de"]
    ctx = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    page = ctx.new_page()
    page.goto(html.as_uri())
    button = page.locator("button[data-copy='cmd-recommended']")
    assert button.inner_text() == "Kopieren"
    button.click()
    page.wait_for_function("document.querySelector(\"button[data-copy='cmd-recommended']\").textContent === 'Kopiert'")
    copied = page.evaluate("navigator.clipboard.readText()")
    ctx.close()
    assert copied == data["recommended"]["command"]
