"""Human-readable text for a PlanOutput (the terminal twin of the JSON contract).

The default page answers first: the recommended deployment, its verdict, speed and command, its
memory per device, then the other engines in one line each — about 40 lines, 100 columns. `full`
adds every flag's reason, the quantization matrix and the context table (`report` always has them).
"""
from __future__ import annotations

from .i18n import N_, _, ljust, ngettext, number, percent, rjust, say, spec
from .i18n import width as _width
from .i18n import wrap as wrap_columns
from .schema import PlanOutput

GIB, GB = 1 << 30, 10**9
WIDTH = 100
STATUS = {"fits": N_("FITS"), "tight": N_("TIGHT"), "exceeds": N_("DOES NOT FIT")}


def status(value: str) -> str:
    return _(STATUS[value]) if value in STATUS else value


def gib(n: int | float) -> str:
    return spec(n / GIB, ",.2f")


def ctx_label(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else number(n)


def wrap(text: str, indent: str = "  ", first: str | None = None) -> list[str]:
    return wrap_columns(text, WIDTH, indent if first is None else first, indent + "  ") or [indent]


def command_lines(command: str, indent: str = "    ") -> list[str]:
    """Each command line as pasteable shell, continued with a backslash where it passes 100 columns."""
    out = []
    for line in command.splitlines():
        groups: list[str] = []
        for word in line.split(" "):  # a flag and its value stay on one line
            if groups and not (word.startswith("-") and not word[1:2].isdigit()) and groups[-1].startswith("-") \
                    and " " not in groups[-1]:
                groups[-1] += " " + word
            else:
                groups.append(word)
        cur = f"{indent}$ "
        for g in groups:
            if len(cur) + len(g) + 2 > WIDTH and cur.strip() != "$":
                out.append(cur.rstrip() + " \\")
                cur = indent + "    "
            cur += g + " "
        out.append(cur.rstrip())
    return out


def _settings_text(quant: str, context: int, kv: str, batch: int, engine: str) -> str:
    return ngettext("%(quant)s, %(context)s context, %(kv)s KV, %(n)s sequence, %(engine)s",
                    "%(quant)s, %(context)s context, %(kv)s KV, %(n)s sequences, %(engine)s", batch) % {
        "quant": quant, "context": ctx_label(context), "kv": kv, "n": number(batch), "engine": engine}


def _held_out_lines(sp) -> list[str]:
    """What the speed figures are good for: the backend's error on published runs its fit never saw."""
    e = sp.decode_error
    if e is None:
        return []
    prefill = ""
    if sp.prefill_error is not None:
        p = sp.prefill_error
        prefill = _("; prefill ±%(median)s typical, ±%(p90)s for 9 in 10 (%(points)s runs)") % {
            "median": percent(p.median), "p90": percent(p.p90), "points": p.points}
    return wrap(_("held out of the fit, published %(backend)s runs: decode ±%(median)s typical, ±%(p90)s for 9 in 10 "
                  "(%(points)s runs, %(sources)s sources)%(prefill)s") % {
        "backend": e.backend, "median": percent(e.median), "p90": percent(e.p90), "points": e.points,
        "sources": e.sources, "prefill": prefill}, "      ", "    - ")


def render_plan(o: PlanOutput, *, full: bool = False) -> str:
    from fitprobe.estimator.launch.text import render_launch

    r, v, hw = o.recommended, o.verdict, o.hardware
    lines = [_("%(model)s on %(hardware)s") % {"model": o.model.id, "hardware": hw.name}
             + (f" ({_probed(o)})" if hw.source == "probe" else ""),
             *wrap(_("model: %(architecture)s, %(total)sB params (%(active)sB active), %(layers)s layers, "
                     "%(attention)s; source: %(source)s") % {
                 "architecture": o.model.architecture, "total": spec(o.model.params_total / 1e9, ",.2f"),
                 "active": spec(o.model.params_active / 1e9, ",.2f"), "layers": o.model.n_layers,
                 "attention": say(o.model.attention), "source": say(o.model.source)}), ""]
    if o.asked is not None:
        a = o.asked
        asked = _settings_text(a.settings.quant, a.settings.context, a.settings.kv_cache_dtype, a.settings.batch,
                               a.settings.engine)
        lines += wrap(_("As asked (%(settings)s): %(status)s — %(reason)s") % {
            "settings": asked, "status": status(a.verdict.status), "reason": say(a.verdict.reason)}, "", "")
    headline = (_("Recommended: %(status)s%(speed)s — %(reason)s") if o.asked is not None
                else _("Verdict: %(status)s%(speed)s — %(reason)s"))
    tps = o.speed.decode_tps if o.speed is not None else r.decode_tps  # the speed line's own figure, not re-rounded
    speed = f" — ~{_tps(tps)}" if tps and r.status != "exceeds" else ""
    lines += wrap(headline % {"status": status(r.status), "speed": speed, "reason": say(v.reason)}, "", "")
    lines += wrap(_settings_text(r.quant, r.context, r.kv_cache_dtype, r.batch, r.engine)
                  + (_("; ") + _("fits up to %(context)s") % {"context": ctx_label(r.max_context)}
                     if r.max_context and r.max_context > r.context else ""))
    lines += ["  " + _("change: %(change)s") % {"change": say(c)} for c in r.changes]
    if r.command:
        lines += command_lines(r.command)
    if o.verdict_now is not None:
        lines += wrap(_("Right now: %(status)s — %(reason)s") % {
            "status": status(o.verdict_now.status), "reason": say(o.verdict_now.reason)}, "", "")
    n = o.recommended_now
    if n is not None:
        speed = f", ~{_tps(n.decode_tps)}" if n.decode_tps else ""
        what = _("; ").join(say(c) for c in n.changes) or _settings_text(n.quant, n.context, n.kv_cache_dtype,
                                                                       n.batch, n.engine)
        lines += wrap(_("What fits right now: %(status)s%(speed)s — %(what)s") % {
            "status": status(n.status), "speed": speed, "what": what}, "", "")
        lines += command_lines(n.command)
    lines += [""] + _memory_table(o)
    if o.speed is not None:
        sp = o.speed
        prefill = (_(", ") + _("prefill ~%(prefill)s, TTFT (%(prompt)sK prompt) ~%(ttft)s") % {
            "prefill": _tps(sp.prefill_tps, ",.0f"), "prompt": sp.prompt_tokens // 1024,
            "ttft": duration(sp.ttft_ms)} if sp.prefill_tps and sp.ttft_ms else "")
        template = (_("speed: decode ~%(decode)s per sequence (%(bound)s-bound)%(prefill)s") if r.status != "exceeds"
                    else _("speed if it fit: decode ~%(decode)s per sequence (%(bound)s-bound)%(prefill)s"))
        lines += wrap(template % {"decode": _tps(sp.decode_tps), "bound": _(BOUND.get(sp.bound, sp.bound)),
                                  "prefill": prefill})
        lines += _held_out_lines(sp)
        for note in sp.notes:  # what the figure assumes (uncalibrated backend, no CUDA graphs, recurrent layers)
            lines += wrap(say(note), "      ", "    - ")
    m = o.memory
    lines.append("  " + _("weights: %(source)s; GGUF/checkpoint size %(size)s GiB") % {
        "source": say(m.weights_source), "size": gib(m.model_file_bytes)})
    others = [(e, p) for e, p in o.launch.items() if e != r.engine]
    if others and not full:
        lines += ["", _("Other engines (--full or --engine NAME for their commands)")]
        for e, p in others:
            sp = f"~{_tps(p.speed.decode_tps)}" if p.speed and p.fits else _("speed n/a")
            what = (_(", ").join([ctx_label(p.context), p.quant, f"{p.kv_cache_dtype} KV", sp]) if p.command
                    else (say(p.notes[-1]) if p.notes else _("no plan")))
            lines += wrap(f"{e:<10}{ljust(status(p.status), 13)}{what}")
    if full:
        lines.append(render_launch(o))
        lines += _matrix(o) + _scaling(o)
    else:
        lines.append(render_launch(o, commands=False))
    if o.verify is not None:
        from .verify import render_verify

        lines += ["", *render_verify(o.verify)]
    if o.notes:
        lines += ["", _("Notes:")]
        for n in o.notes:
            lines += wrap(say(n), "  ", "  - ")
    return "\n".join(lines).rstrip() + "\n"


def _tps(value: float, fmt: str = ",.1f") -> str:
    return spec(value, fmt, "tok/s")


def wait_unit(ms: float) -> tuple[str, int, str]:
    """How a wait of `ms` reads (format, divisor, unit): milliseconds under 10 s, seconds under 10 min, minutes
    beyond (a CPU prefill of a 4K prompt can take minutes; "414,994 ms" reads as noise). The page uses it too."""
    if ms < 10_000:
        return ",.0f", 1, "ms"
    if ms < 600_000:
        return (",.1f" if ms < 100_000 else ",.0f"), 1000, "s"
    return ",.0f", 60_000, "min"


def duration(ms: float) -> str:
    fmt, divisor, unit = wait_unit(ms)
    return spec(ms / divisor, fmt, unit)


BOUND = {"GPU bandwidth": N_("GPU bandwidth"), "system RAM bandwidth": N_("system RAM bandwidth"),
         "CPU cores": N_("CPU cores"),
         "per-step overhead": N_("per-step overhead"), "compute": N_("compute")}  # Speed.bound


def _probed(o: PlanOutput) -> str:
    hw = o.hardware
    parts = [spec(d.memory_bytes / GIB, ".1f", "GiB")
             + (_(", ") + _("%(free)s free") % {"free": spec(d.free_bytes / GIB, ".1f")} if d.free_bytes is not None else "")
             for d in hw.devices]
    ram = (_("RAM %(size)s") % {"size": spec(hw.system_ram_bytes / GIB, ".1f", "GiB")} if hw.system_ram_bytes
           else _("RAM unknown"))
    return _("probed: %(devices)s") % {"devices": _("; ").join(parts + [ram])}


def _memory_table(o: PlanOutput) -> list[str]:
    """Per device (identical ones once) and system RAM: weights, KV, buffers, total, usable, margin."""
    m, hw = o.memory, o.hardware
    rows = []
    values = [(d.layers, d.weights_bytes, d.kv_cache_bytes, d.buffers_bytes, d.total_bytes, d.usable_bytes)
              for d in m.per_device]
    if len(values) > 1 and len(set(values)) == 1 and len({d.name for d in m.per_device}) == 1:
        rows.append((_("each of %(n)sx %(name)s") % {"n": len(values), "name": m.per_device[0].name}, *values[0]))
    else:
        many = len(values) > 1
        rows += [((f"{i}: " if many else "") + d.name, *v) for i, (d, v) in enumerate(zip(m.per_device, values))]
    ram_label = _("system RAM")
    head = [_("Memory (GiB)"), _("layers"), _("weights"), "KV", _("buffers"), _("total"), _("usable"), _("margin")]
    width = max([_width(r[0]) for r in rows] + [_width(ram_label), _width(head[0]), 12])
    cols = [max(c, _width(h) + 1) for c, h in zip((7, 9, 8, 9, 9, 9, 9), head[1:])]
    lines = ["  " + ljust(head[0], width) + "".join(rjust(h, c) for h, c in zip(head[1:], cols))]
    for name, layers, w, kv, buf, total, usable in rows:
        cells = [str(layers), gib(w), gib(kv), gib(buf), gib(total), gib(usable), _signed(usable - total)]
        lines.append("  " + ljust(name, width) + "".join(rjust(x, c) for x, c in zip(cells, cols)))
    host = m.host_weights_bytes + m.host_kv_cache_bytes + m.host_buffers_bytes
    if host or not m.per_device:
        ram = hw.system_ram_bytes
        usable = int(ram * hw.usable_fraction) if ram else None
        layers = m.per_device and max(0, o.model.n_layers - m.gpu_layers) or (0 if m.per_device else o.model.n_layers)
        cells = [str(layers), gib(m.host_weights_bytes), gib(m.host_kv_cache_bytes), gib(m.host_buffers_bytes),
                 gib(host)] + ([gib(usable), _signed(usable - host)] if usable else [_("unknown")])
        lines.append("  " + ljust(ram_label, width) + "".join(rjust(x, c) for x, c in zip(cells, cols)))
    limiting = say(o.verdict.limiting) if o.verdict.limiting == "system RAM" else o.verdict.limiting
    lines += wrap(_("usable = %(share)s of physical memory") % {"share": percent(hw.usable_fraction)}
                  + (_(", ") + _("at most --gpu-memory-utilization %(util)s for vLLM") % {
                      "util": spec(o.settings.gpu_memory_utilization, "g")} if o.settings.engine == "vllm" else "")
                  + _("; ") + _("the verdict's margin is on %(where)s; the estimate's error band there is %(band)s") % {
                      "where": limiting, "band": spec(o.verdict.uncertainty_bytes / GIB, ".2f", "GiB")}
                  + (": " + say(o.verdict.band_note) if o.verdict.band_note else ""))
    return lines



def _signed(n: int) -> str:
    return ("+" if n >= 0 else "") + gib(n)


def _matrix(o: PlanOutput) -> list[str]:
    s = o.asked.settings if o.asked else o.settings
    head = [_("format"), _("engine"), _("weights"), "KV", _("total"), _("fit")]
    cols = [max(c, _width(h) + 1) for c, h in zip((12, 11, 9, 8, 9, 13), head)]
    lines = ["", _("Quantization matrix @ %(context)s (GiB)") % {"context": ctx_label(s.context)},
             "  " + ljust(head[0], cols[0]) + ljust(head[1], cols[1])
             + "".join(rjust(h, c) for h, c in zip(head[2:5], cols[2:5])) + "  " + ljust(head[5], cols[5])
             + _("source")]
    for r in o.matrix:
        mark = "*" if r.quant == s.quant else " "
        lines.append(f" {mark}" + ljust(r.quant, cols[0]) + ljust(r.engine, cols[1]) + rjust(gib(r.weights_bytes), cols[2])
                     + rjust(gib(r.kv_cache_bytes), cols[3]) + rjust(gib(r.total_bytes), cols[4]) + "  "
                     + ljust(status(r.status), cols[5]) + say(r.weights_source)
                     + (f" ({say(r.note)})" if r.note else ""))
    return lines


def _scaling(o: PlanOutput) -> list[str]:
    s = o.asked.settings if o.asked else o.settings
    head = [_("context"), "KV", _("total")]
    cols = [max(9, _width(h) + 1) for h in head]
    lines = ["", _("Context scaling at %(quant)s (GiB)") % {"quant": s.quant},
             "  " + "".join(rjust(h, c) for h, c in zip(head, cols)) + "  " + _("fit")]
    for r in o.scaling:
        flag = "  " + _("(beyond the model's maximum)") if r.beyond_model_max else ""
        cells = [ctx_label(r.context), gib(r.kv_cache_bytes), gib(r.total_bytes)]
        lines.append("  " + "".join(rjust(x, c) for x, c in zip(cells, cols)) + "  " + status(r.status) + flag)
    return lines
