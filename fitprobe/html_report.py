"""The report as one self-contained page: Jinja2 templates (fitprobe/templates/) over the report data.

This module adapts, it does not compute: the templates read the PlanOutput (or FitOutput) as it is,
and the few view helpers here only arrange it — number formatting in the page's language, cloud offers
grouped per provider, the context chart's geometry, the simulator's playback (fitprobe/simulate.py's
timing). Every number shown carries `data-k` (its JSON path), `data-v` (the raw JSON value), `data-f`
(the format) and `data-s` (the unit's divisor), so a browser test can compare page and JSON.
Imported by `report` only: the `plan` path never loads Jinja2.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2

TEMPLATES = Path(__file__).parent / "templates"
GIB = 1 << 30
OFFERS_PER_PROVIDER = 3  # cloud offers shown before "show all"
FAQ_CONTEXT = 32768  # the seed pages' "How much VRAM at 32K?"


def render_html(o, lang: str = "en") -> str:
    """The model page (`report MODEL --html`) in `lang` (the sentences of the core follow the active
    language: `fitprobe.i18n.set_language`, as the CLI's --lang sets it)."""
    return _env(lang).get_template("report.html").render(o=o, view=_view(o), lang=lang)


def render_hardware_html(o, lang: str = "en") -> str:
    """The hardware page (`report --html` without MODEL): a FitOutput."""
    return _env(lang).get_template("hardware.html").render(o=o, lang=lang)


@lru_cache(maxsize=None)
def _env(lang: str) -> jinja2.Environment:
    from fitprobe import i18n

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined, extensions=["jinja2.ext.i18n"])
    env.install_gettext_translations(i18n.translations(lang), newstyle=True)  # the terminal's catalogs
    env.filters["fmt"] = lambda value, spec=",.2f", scale=1: format_number(value, spec, scale, lang)
    env.filters["say"] = i18n.say  # a sentence of the core (verdict reasons, notes) in the active language
    env.globals["host_total"] = host_total
    from fitprobe.render import wait_unit

    env.globals["wait_unit"] = wait_unit  # the text report's ms / s / min choice, written once
    return env


def format_number(value, spec: str, scale: float, lang: str) -> str:
    """A JSON number as the page shows it: `value / scale` in the format spec, in the language's number
    style ("421,71" in es and de); 'ctx' is a context length (8K, or 4,100 when not a multiple of 1,024)."""
    from fitprobe.i18n import spec as localized

    if value is None:
        return "–"
    x = value / scale if scale != 1 else value
    if spec == "ctx":
        return f"{x // 1024}K" if x % 1024 == 0 else localized(x, ",", lang=lang)
    return localized(x, spec, lang=lang)


def _view(o) -> dict:
    """What the templates arrange but the contract does not hold in that shape."""
    from fitprobe.simulate import DEFAULT_MAX_SECONDS, DEFAULT_TOKENS, Playback, sample_tokens

    sp = o.speed
    playback = (Playback.plan(sp.ttft_ms, sp.decode_tps, DEFAULT_TOKENS, DEFAULT_MAX_SECONDS)
                if sp is not None and sp.decode_tps > 0 else None)
    tokens, between = sample_tokens()
    return {"playback": playback, "words": " ".join(tokens), "between": between, "limiting": limiting_device(o),
            "offers": offer_groups(o.cost.offers if o.cost else []), "chart": chart(o),
            "faq_scaling": next((i for i, r in enumerate(o.scaling) if r.context == FAQ_CONTEXT), None),
            "other_launch": [(e, p) for e, p in o.launch.items() if e != o.recommended.engine]}


def host_total(mem) -> int:
    """What the plan keeps in system RAM: the three host parts the page adds up for the reader."""
    return mem.host_weights_bytes + mem.host_kv_cache_bytes + mem.host_buffers_bytes


def limiting_device(o) -> int | None:
    """The index of the device whose usable − needed is the verdict's margin (None: system RAM decides)."""
    return next((i for i, d in enumerate(o.memory.per_device)
                 if d.usable_bytes - d.total_bytes == o.verdict.margin_bytes), None)


def offer_groups(offers) -> list[dict]:
    """Per provider (in the order of its cheapest offer): the cheapest few that fit, and every other offer
    for "show all". Offers keep their index in `cost.offers` (the number's JSON path)."""
    groups: dict[str, dict] = {}
    for i, off in enumerate(offers):  # already sorted: fitting first, then by $ per 1M tokens and $ per hour
        g = groups.setdefault(off.provider, {"provider": off.provider, "shown": [], "more": []})
        fits = off.status != "exceeds"
        (g["shown"] if fits and len(g["shown"]) < OFFERS_PER_PROVIDER else g["more"]).append((i, off))
    return list(groups.values())


def chart(o, width: int = 720, height: int = 280) -> dict | None:
    """The context-scaling chart's geometry: one point per scaling row (log2 x), total and KV lines,
    the usable line, and round GiB ticks."""
    rows = o.scaling
    if not rows:
        return None
    left, right, top_pad, bottom = 56, 16, 14, 44
    usable = o.hardware.usable_bytes or 0
    top = max([r.total_bytes for r in rows] + [usable]) * 1.08 or 1
    step = _tick_step(top / GIB)
    n = len(rows)

    def x(i: int) -> float:
        return round(left + (width - left - right) * (i / max(1, n - 1)), 1)

    def y(v: float) -> float:
        return round(height - bottom - (height - bottom - top_pad) * v / top, 1)

    ticks = [(y(k * step * GIB), k * step) for k in range(int(top / GIB / step) + 1)]
    return {"width": width, "height": height, "left": left, "right": width - right, "bottom": height - bottom,
            "ticks": ticks, "usable_y": y(usable) if usable else None,
            "points": [(i, x(i), y(r.total_bytes), y(r.kv_cache_bytes)) for i, r in enumerate(rows)],
            "total_line": " ".join(f"{x(i)},{y(r.total_bytes)}" for i, r in enumerate(rows)),
            "kv_line": " ".join(f"{x(i)},{y(r.kv_cache_bytes)}" for i, r in enumerate(rows))}


def _tick_step(top_gib: float) -> float:
    """A round GiB step giving 3 to 7 grid lines."""
    for step in (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000):
        if top_gib / step <= 6:
            return step
    return 10 ** len(str(int(top_gib)))
