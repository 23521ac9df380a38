"""Human-readable text for a PlanOutput (the terminal twin of the JSON contract).

The default page answers first: the recommended deployment, its verdict, speed and command, its
memory per device, then the other engines in one line each — about 40 lines, 100 columns. `full`
adds every flag's reason, the quantization matrix and the context table (`report` always has them).
"""
from __future__ import annotations

import textwrap

from .schema import PlanOutput

GIB, GB = 1 << 30, 10**9
WIDTH = 100
STATUS = {"fits": "FITS", "tight": "TIGHT", "exceeds": "DOES NOT FIT"}


def gib(n: int | float) -> str:
    return f"{n / GIB:,.2f}"


def ctx_label(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else f"{n:,}"


def wrap(text: str, indent: str = "  ", first: str | None = None) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent if first is None else first, subsequent_indent=indent + "  ",
                         break_on_hyphens=False, break_long_words=False) or [indent]


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
    return (f"{quant}, {ctx_label(context)} context, {kv} KV, {batch} sequence{'s' if batch > 1 else ''}, {engine}")


def render_plan(o: PlanOutput, *, full: bool = False) -> str:
    from fitprobe.estimator.launch.text import render_launch

    r, v, hw = o.recommended, o.verdict, o.hardware
    lines = [f"{o.model.id} on {hw.name}" + (f" ({_probed(o)})" if hw.source == "probe" else ""),
             *wrap(f"model: {o.model.architecture}, {o.model.params_total / 1e9:,.2f}B params "
                   f"({o.model.params_active / 1e9:,.2f}B active), {o.model.n_layers} layers, {o.model.attention}; "
                   f"source: {o.model.source}"), ""]
    if o.asked is not None:
        a = o.asked
        lines += wrap(f"As asked ({_settings_text(a.settings.quant, a.settings.context, a.settings.kv_cache_dtype, a.settings.batch, a.settings.engine)}): "
                      f"{STATUS[a.verdict.status]} — {a.verdict.reason}", "", "")
    label = "Recommended" if o.asked is not None else "Verdict"
    speed = f" — ~{r.decode_tps:,.1f} tok/s" if r.decode_tps and r.status != "exceeds" else ""
    lines += wrap(f"{label}: {STATUS[r.status]}{speed} — {v.reason}", "", "")
    lines += wrap(_settings_text(r.quant, r.context, r.kv_cache_dtype, r.batch, r.engine)
                  + (f"; fits up to {ctx_label(r.max_context)}" if r.max_context and r.max_context > r.context else ""))
    lines += [f"  change: {c}" for c in r.changes]
    if r.command:
        lines += command_lines(r.command)
    if o.verdict_now is not None:
        lines += wrap(f"Right now: {STATUS[o.verdict_now.status]} — {o.verdict_now.reason}", "", "")
    n = o.recommended_now
    if n is not None:
        speed = f", ~{n.decode_tps:,.1f} tok/s" if n.decode_tps else ""
        lines += wrap(f"What fits right now: {STATUS[n.status]}{speed} — "
                      + ("; ".join(n.changes) or _settings_text(n.quant, n.context, n.kv_cache_dtype, n.batch, n.engine)),
                      "", "")
        lines += command_lines(n.command)
    lines += [""] + _memory_table(o)
    if o.speed is not None:
        sp = o.speed
        prefill = (f", prefill ~{sp.prefill_tps:,.0f} tok/s, TTFT ({sp.prompt_tokens // 1024}K prompt) "
                   f"~{sp.ttft_ms:,.0f} ms" if sp.prefill_tps and sp.ttft_ms else "")
        label = "speed" if r.status != "exceeds" else "speed if it fit"
        lines += wrap(f"{label}: decode ~{sp.decode_tps:,.1f} tok/s per sequence ({sp.bound}-bound){prefill}")
    m = o.memory
    lines.append(f"  weights: {m.weights_source}; GGUF/checkpoint size {gib(m.model_file_bytes)} GiB")
    others = [(e, p) for e, p in o.launch.items() if e != r.engine]
    if others and not full:
        lines += ["", "Other engines (--full or --engine NAME for their commands)"]
        for e, p in others:
            sp = f"~{p.speed.decode_tps:,.1f} tok/s" if p.speed and p.fits else "speed n/a"
            what = (f"{ctx_label(p.context)}, {p.quant}, {p.kv_cache_dtype} KV, {sp}" if p.command
                    else (p.notes[-1] if p.notes else "no plan"))
            lines += wrap(f"{e:<10}{STATUS[p.status]:<13}{what}")
    if full:
        lines.append(render_launch(o))
        lines += _matrix(o) + _scaling(o)
    else:
        lines.append(render_launch(o, commands=False))
    if o.verify is not None:
        from .verify import render_verify

        lines += ["", *render_verify(o.verify)]
    if o.notes:
        lines += ["", "Notes:"]
        for n in o.notes:
            lines += wrap(n, "  ", "  - ")
    return "\n".join(lines).rstrip() + "\n"


def _probed(o: PlanOutput) -> str:
    hw = o.hardware
    parts = [f"{d.memory_bytes / GIB:.1f} GiB" + (f", {d.free_bytes / GIB:.1f} free" if d.free_bytes is not None else "")
             for d in hw.devices]
    ram = f"RAM {hw.system_ram_bytes / GIB:.1f} GiB" if hw.system_ram_bytes else "RAM unknown"
    return "probed: " + "; ".join(parts + [ram])


def _memory_table(o: PlanOutput) -> list[str]:
    """Per device (identical ones once) and system RAM: weights, KV, buffers, total, usable, margin."""
    m, hw = o.memory, o.hardware
    rows = []
    values = [(d.layers, d.weights_bytes, d.kv_cache_bytes, d.buffers_bytes, d.total_bytes, d.usable_bytes)
              for d in m.per_device]
    if len(values) > 1 and len(set(values)) == 1 and len({d.name for d in m.per_device}) == 1:
        rows.append((f"each of {len(values)}x {m.per_device[0].name}", *values[0]))
    else:
        many = len(values) > 1
        rows += [((f"{i}: " if many else "") + d.name, *v) for i, (d, v) in enumerate(zip(m.per_device, values))]
    width = max([len(r[0]) for r in rows] + [12])
    lines = [f"  {'Memory (GiB)':<{width}}{'layers':>7}{'weights':>9}{'KV':>8}{'buffers':>9}{'total':>9}"
             f"{'usable':>9}{'margin':>9}"]
    for name, layers, w, kv, buf, total, usable in rows:
        lines.append(f"  {name:<{width}}{layers:>7}{gib(w):>9}{gib(kv):>8}{gib(buf):>9}{gib(total):>9}{gib(usable):>9}"
                     f"{_signed(usable - total):>9}")
    host = m.host_weights_bytes + m.host_kv_cache_bytes + m.host_buffers_bytes
    if host or not m.per_device:
        ram = hw.system_ram_bytes
        usable = int(ram * hw.usable_fraction) if ram else None
        layers = m.per_device and max(0, o.model.n_layers - m.gpu_layers) or (0 if m.per_device else o.model.n_layers)
        lines.append(f"  {'system RAM':<{width}}{layers:>7}{gib(m.host_weights_bytes):>9}{gib(m.host_kv_cache_bytes):>8}"
                     f"{gib(m.host_buffers_bytes):>9}{gib(host):>9}"
                     + (f"{gib(usable):>9}{_signed(usable - host):>9}" if usable else f"{'unknown':>9}"))
    lines += wrap(f"usable = {hw.usable_fraction:.0%} of physical memory"
                  + (f", at most --gpu-memory-utilization {o.settings.gpu_memory_utilization:g} for vLLM"
                     if o.settings.engine == "vllm" else "")
                  + f"; the verdict's margin is on {o.verdict.limiting}; the estimate's error band there is "
                    f"{o.verdict.uncertainty_bytes / GIB:.2f} GiB"
                  + (f": {o.verdict.band_note}" if o.verdict.band_note else ""))
    return lines


def _signed(n: int) -> str:
    return ("+" if n >= 0 else "") + gib(n)


def _matrix(o: PlanOutput) -> list[str]:
    s = o.asked.settings if o.asked else o.settings
    lines = ["", f"Quantization matrix @ {ctx_label(s.context)} (GiB)",
             f"  {'format':<12}{'engine':<11}{'weights':>9}{'KV':>8}{'total':>9}  {'fit':<13}source"]
    for r in o.matrix:
        mark = "*" if r.quant == s.quant else " "
        lines.append(f" {mark}{r.quant:<12}{r.engine:<11}{gib(r.weights_bytes):>9}{gib(r.kv_cache_bytes):>8}"
                     f"{gib(r.total_bytes):>9}  {STATUS[r.status]:<13}{r.weights_source}"
                     + (f" ({r.note})" if r.note else ""))
    return lines


def _scaling(o: PlanOutput) -> list[str]:
    s = o.asked.settings if o.asked else o.settings
    lines = ["", f"Context scaling at {s.quant} (GiB)", f"  {'context':>9}{'KV':>9}{'total':>9}  fit"]
    for r in o.scaling:
        flag = "  (beyond the model's maximum)" if r.beyond_model_max else ""
        lines.append(f"  {ctx_label(r.context):>9}{gib(r.kv_cache_bytes):>9}{gib(r.total_bytes):>9}  {STATUS[r.status]}{flag}")
    return lines
