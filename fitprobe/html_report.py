"""One self-contained HTML page for a report (inline CSS, SVG and one inline script, no network).

Every number the test compares carries `data-k="<json path>"` and `data-v="<raw JSON value>"`;
the visible text is the same value formatted for people.
"""
from __future__ import annotations

from html import escape

GIB = 1 << 30
STATUS = {"fits": "FITS", "tight": "TIGHT", "exceeds": "DOES NOT FIT"}
CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#1b1f24;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
table{border-collapse:collapse;width:100%;margin:6px 0}th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:right}
th{background:#f6f8fa}td:first-child,th:first-child{text-align:left}.fits{color:#116329}.tight{color:#9a6700}
.exceeds{color:#cf222e}.verdict{font-size:18px;font-weight:600;margin:10px 0}.muted{color:#57606a;font-size:12px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;min-width:150px}
.card b{display:block;font-size:20px}
.sim{border:1px solid #d0d7de;border-radius:6px;padding:10px 12px;min-height:5em;font-family:ui-monospace,monospace;white-space:pre-wrap}
.sim .wait{color:#57606a}"""
# The speed simulator: wait the time to first token, then show one word per token at the decode speed
# (the same timing as fitprobe/simulate.py: token i at ttft + (i+1)/tps, sped up past 30 s). Inline, no network.
SIM_JS = r"""(function(){var b=document.getElementById('sim'),o=document.getElementById('simout');if(!b)return;
var ttft=parseFloat(b.dataset.ttft)/1000||0,tps=parseFloat(b.dataset.tps),n=parseInt(b.dataset.tokens,10);
var words=b.dataset.words.split(' '),total=ttft+n/tps,k=Math.max(1,total/30),timer=null;
function run(){if(timer)clearInterval(timer);var t0=performance.now(),shown=0;o.textContent='';
var w=document.createElement('span');w.className='wait';o.appendChild(w);var txt=document.createTextNode('');o.appendChild(txt);
timer=setInterval(function(){var el=(performance.now()-t0)/1000*k;
if(el<ttft){w.textContent='reading the prompt\u2026 '+el.toFixed(2)+' s';return;}
w.textContent='first token after '+ttft.toFixed(2)+' s\n';var due=Math.min(n,Math.floor((el-ttft)*tps+1e-9));
while(shown<due){txt.data+=(shown?' ':'')+words[shown%words.length];shown++;}
if(shown>=n){clearInterval(timer);timer=null;txt.data+='\n'+n+' tokens in '+total.toFixed(2)+' s at '+tps.toFixed(1)+' tok/s'+(k>1?' (shown '+k.toFixed(1)+'\u00d7 faster)':'');}},16);}
b.addEventListener('click',run);})();"""


def _v(key: str, value, text: str | None = None) -> str:
    """A number with its JSON path and raw value for machine checks."""
    raw = "" if value is None else repr(value) if not isinstance(value, float) else repr(value)
    shown = text if text is not None else ("-" if value is None else str(value))
    return f'<span data-k="{escape(key)}" data-v="{escape(raw)}">{escape(shown)}</span>'


def _gib(key: str, n) -> str:
    return _v(key, n, "-" if n is None else f"{n / GIB:,.2f}")


def _f(key: str, x, fmt: str = "{:,.1f}") -> str:
    return _v(key, x, "-" if x is None else fmt.format(x))


def _st(status: str) -> str:
    return f'<span class="{status}">{STATUS.get(status, status)}</span>'


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def simulator(sp) -> str:
    """The live speed simulator: a button that plays the wait and the tokens (see SIM_JS)."""
    from fitprobe.simulate import SAMPLE

    if not sp.decode_tps:
        return ""
    ttft = "" if sp.ttft_ms is None else f"{sp.ttft_ms:.1f}"
    return ("<h2>Speed simulator</h2><div class='muted'>one word per token; the pause is the time to first token "
            f"of a {sp.prompt_tokens:,}-token prompt</div>"
            f"<button id='sim' data-ttft='{ttft}' data-tps='{sp.decode_tps:.4f}' data-tokens='120' "
            f"data-words='{escape(' '.join(SAMPLE))}'>Play</button><div id='simout' class='sim'></div>"
            f"<script>{SIM_JS}</script>")


def scaling_svg(o) -> str:
    """Total memory and KV cache against context (log2 x axis), with the usable line."""
    rows = o.scaling
    if not rows:
        return ""
    W, H, L, B = 720, 260, 60, 40
    usable = o.hardware.usable_bytes or 0
    top = max([r.total_bytes for r in rows] + [usable]) * 1.1 or 1
    n = len(rows)

    def x(i):
        return L + (W - L - 20) * (i / max(1, n - 1))

    def y(v):
        return H - B - (H - B - 10) * v / top

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
             f'aria-label="memory by context">', f'<rect width="{W}" height="{H}" fill="#fff"/>']
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        v = top * frac
        parts.append(f'<line x1="{L}" x2="{W - 20}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eaeef2"/>'
                     f'<text x="{L - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end">{v / GIB:,.0f}</text>')
    if usable:
        parts.append(f'<line x1="{L}" x2="{W - 20}" y1="{y(usable):.1f}" y2="{y(usable):.1f}" stroke="#cf222e" '
                     f'stroke-dasharray="6 4"/><text x="{W - 22}" y="{y(usable) - 4:.1f}" font-size="11" '
                     f'text-anchor="end" fill="#cf222e">usable {usable / GIB:,.1f} GiB</text>')
    for key, color in (("total_bytes", "#0969da"), ("kv_cache_bytes", "#8250df")):
        pts = " ".join(f"{x(i):.1f},{y(getattr(r, key)):.1f}" for i, r in enumerate(rows))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
    for i, r in enumerate(rows):
        label = f"{r.context // 1024}K" if r.context % 1024 == 0 else f"{r.context:,}"
        color = {"fits": "#116329", "tight": "#9a6700"}.get(r.status, "#cf222e")
        parts.append(f'<circle cx="{x(i):.1f}" cy="{y(r.total_bytes):.1f}" r="4" fill="{color}"/>'
                     f'<text x="{x(i):.1f}" y="{H - B + 16}" font-size="11" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="{L}" y="{H - 6}" font-size="11">context (tokens) — blue: total GiB, purple: KV cache GiB'
                 f'</text><text x="12" y="16" font-size="11">GiB</text></svg>')
    return "".join(parts)


def render_html(o) -> str:
    s, m, v, hw = o.settings, o.memory, o.verdict, o.hardware
    title = f"{o.model.id} on {hw.name}"
    h = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)} — fitprobe</title>"
         f"<style>{CSS}</style></head><body>",
         f"<h1>{escape(title)}</h1><div class='muted'>{escape(s.quant)}, {s.context:,} tokens, {escape(s.kv_cache_dtype)} KV, "
         f"{s.batch} sequence(s), {escape(s.engine)} · {escape(o.model.architecture)}, "
         f"{o.model.params_total / 1e9:,.2f}B params ({o.model.params_active / 1e9:,.2f}B active) · {escape(o.model.attention)}</div>",
         f"<div class='verdict {v.status}' data-k='verdict.status' data-v='{v.status}'>{STATUS[v.status]}</div>"
         f"<div>{escape(v.reason)}</div>"]
    sp = o.speed
    cards = [("Total on accelerators (GiB)", _gib("memory.total_bytes", m.total_bytes)),
             ("Usable (GiB)", _gib("hardware.usable_bytes", hw.usable_bytes)),
             ("Margin (GiB)", _gib("verdict.margin_bytes", v.margin_bytes))]
    if sp:
        cards += [("Decode tok/s", _f("speed.decode_tps", sp.decode_tps)),
                  ("Prefill tok/s", _f("speed.prefill_tps", sp.prefill_tps)),
                  (f"TTFT {sp.prompt_tokens // 1024}K prompt (ms)", _f("speed.ttft_ms", sp.ttft_ms, "{:,.0f}"))]
    h.append("<div class='cards'>" + "".join(f"<div class='card'>{lab}<b>{val}</b></div>" for lab, val in cards) + "</div>")
    h.append("<h2>Memory breakdown</h2>" + _table(["part", "GiB"], [
        ["weights", _gib("memory.weights_bytes", m.weights_bytes)],
        ["KV cache & state", _gib("memory.kv_cache_bytes", m.kv_cache_bytes)],
        ["engine & activation buffers", _gib("memory.buffers_bytes", m.buffers_bytes)],
        ["total on accelerators", _gib("memory.total_bytes", m.total_bytes)],
        ["system RAM (weights + KV + buffers)", _gib("memory.host_weights_bytes", m.host_weights_bytes)
         + " + " + _gib("memory.host_kv_cache_bytes", m.host_kv_cache_bytes)
         + " + " + _gib("memory.host_buffers_bytes", m.host_buffers_bytes)]]))
    h.append(f"<h2>Quantization matrix @ {s.context:,} tokens</h2>" + _table(
        ["format", "engine", "weights GiB", "KV GiB", "total GiB", "fit", "source"],
        [[("<b>" + escape(r.quant) + "</b>") if r.quant == s.quant else escape(r.quant), escape(r.engine),
          _gib(f"matrix.{i}.weights_bytes", r.weights_bytes), _gib(f"matrix.{i}.kv_cache_bytes", r.kv_cache_bytes),
          _gib(f"matrix.{i}.total_bytes", r.total_bytes), _st(r.status), escape(r.weights_source)]
         for i, r in enumerate(o.matrix)]))
    h.append(f"<h2>Context scaling at {escape(s.quant)}</h2>" + scaling_svg(o) + _table(
        ["context", "KV GiB", "total GiB", "fit"],
        [[_v(f"scaling.{i}.context", r.context, f"{r.context:,}"), _gib(f"scaling.{i}.kv_cache_bytes", r.kv_cache_bytes),
          _gib(f"scaling.{i}.total_bytes", r.total_bytes), _st(r.status)] for i, r in enumerate(o.scaling)]))
    if sp:
        e = sp.efficiency
        h.append("<h2>Speed</h2>" + _table(["quantity", "value"], [
            ["decode tok/s per sequence", _f("speed.decode_tps", sp.decode_tps)],
            [f"decode tok/s over {sp.batch} sequence(s)", _f("speed.aggregate_tps", sp.aggregate_tps)],
            ["prefill tok/s", _f("speed.prefill_tps", sp.prefill_tps)],
            [f"time to first token, {sp.prompt_tokens:,}-token prompt (ms)", _f("speed.ttft_ms", sp.ttft_ms, "{:,.0f}")],
            ["bytes read per decode step (GB)", _f("speed.bytes_per_token", sp.bytes_per_token / 1e9, "{:,.2f}")],
            ["bound by", escape(sp.bound)],
            ["backend (η / MFU / fixed ms)", f"{escape(sp.backend)}: {e.bandwidth:.2f} / {e.compute:.2f} / {e.fixed_ms:.2f}"
             + ("" if e.calibrated else " (uncalibrated)")]]) + "".join(f"<div class='muted'>{escape(n)}</div>" for n in sp.notes))
        h.append(simulator(sp))
    c = o.cost
    if c:
        rows = [[escape(x.provider), escape(x.instance), _f(f"cost.offers.{i}.price_per_hour_usd", x.price_per_hour_usd, "{:,.2f}"),
                 _f(f"cost.offers.{i}.monthly_usd", x.monthly_usd, "{:,.2f}"), _f(f"cost.offers.{i}.aggregate_tps", x.aggregate_tps),
                 _f(f"cost.offers.{i}.usd_per_million_tokens", x.usd_per_million_tokens, "{:,.2f}"), _st(x.status),
                 escape(x.date_checked) + f" <a href='{escape(x.source)}'>source</a>"]
                for i, x in enumerate(c.offers) if x.status != "exceeds"]
        h.append(f"<h2>Cloud cost ({c.options.hours_per_day:g} h/day)</h2>" + (_table(
            ["provider", "instance", "$/h", "$/month", "tok/s", "$ per 1M output tokens", "fit", "checked"], rows)
            if rows else "<div>No offer in the price catalog fits.</div>"))
        r = c.rent_vs_buy
        h.append("<h2>Rent vs buy (TCO)</h2>" + _table(["quantity", "value"], [
            ["hardware price ($)", _f("cost.rent_vs_buy.hardware_price_usd", r.hardware_price_usd, "{:,.0f}") + f" ({escape(r.price_basis)})"],
            ["board power (W)", _f("cost.rent_vs_buy.tdp_w", r.tdp_w, "{:,.0f}")],
            ["electricity per month ($)", _f("cost.rent_vs_buy.electricity_monthly_usd", r.electricity_monthly_usd, "{:,.2f}")],
            ["renting " + escape(r.rent_instance or "-") + " per month ($)", _f("cost.rent_vs_buy.rent_monthly_usd", r.rent_monthly_usd, "{:,.2f}")],
            ["months to amortize", _f("cost.rent_vs_buy.months_to_amortize", r.months_to_amortize)],
            ["local electricity per 1M tokens ($)", _f("cost.rent_vs_buy.local_usd_per_million_tokens", r.local_usd_per_million_tokens, "{:,.3f}")],
        ]) + (f"<div class='muted'>{escape(r.note)}</div>" if r.note else ""))
    f = o.finetune
    if f:
        fo = f.options
        h.append(f"<h2>Fine-tuning memory</h2><div class='muted'>sequence {fo.seq_len}, micro-batch {fo.micro_batch}, "
                 f"{'gradient checkpointing' if fo.gradient_checkpointing else 'no checkpointing'}, {fo.optimizer}, "
                 f"LoRA rank {fo.lora_rank}</div>" + _table(
                     ["method", "weights GiB", "gradients + optimizer GiB", "activations GiB", "total GiB", "fits here",
                      "devices needed", "smallest GPU"],
                     [[escape(x.label), _gib(f"finetune.methods.{i}.weights_bytes", x.weights_bytes),
                       _gib(f"finetune.methods.{i}.grads_optimizer_bytes", x.grads_optimizer_bytes),
                       _gib(f"finetune.methods.{i}.activations_bytes", x.activations_bytes),
                       _gib(f"finetune.methods.{i}.total_bytes", x.total_bytes),
                       "-" if x.fits is None else ("yes" if x.fits else "no"), str(x.devices_needed or "-"),
                       escape(x.smallest_gpu or "-")] for i, x in enumerate(f.methods)]))
    if o.recommendations:
        h.append("<h2>Recommended hardware</h2>" + _table(
            ["role", "hardware", "engine", "fit", "total GiB", "decode tok/s", "price $", "$ / usable GiB", "$ / 1M tokens"],
            [[escape(p.role), escape(p.hardware), escape(p.engine), _st(p.status),
              _gib(f"recommendations.{i}.total_bytes", p.total_bytes), _f(f"recommendations.{i}.decode_tps", p.decode_tps),
              _f(f"recommendations.{i}.price_usd", p.price_usd, "{:,.0f}"),
              _f(f"recommendations.{i}.usd_per_usable_gib", p.usd_per_usable_gib, "{:,.1f}"),
              _f(f"recommendations.{i}.usd_per_million_tokens", p.usd_per_million_tokens, "{:,.2f}")]
             for i, p in enumerate(o.recommendations)]))
    d = o.diagnosis
    if d:
        h.append("<h2>Diagnosis</h2>" + f"<p>{escape(d.verdict)}</p>" +
                 ("<ul>" + "".join(f"<li>{escape(t)}</li>" for t in d.tips) + "</ul>" if d.tips else "") +
                 f"<p>{escape(d.kv)}</p>")
    if o.notes:
        h.append("<h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>" for n in o.notes) + "</ul>")
    h.append(f"<p class='muted'>fitprobe report · schema {escape(o.schema_version)}</p></body></html>")
    return "".join(h)


def render_hardware_html(o) -> str:
    """The hardware page (`report` without MODEL): what runs here, at which format and speed (a FitOutput)."""
    hw = o.hardware
    title = f"What runs on {hw.name}"
    ram = f"{hw.system_ram_bytes / GIB:,.0f} GiB" if hw.system_ram_bytes else "not given"
    h = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)} — fitprobe</title>"
         f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>",
         f"<div class='muted'>{escape(o.source)} · sorted by {escape(o.sort)} · context target {o.context_target:,} "
         f"tokens · score = quality × speed factor × context factor</div>",
         "<div class='cards'>" + "".join(f"<div class='card'>{lab}<b>{val}</b></div>" for lab, val in [
             ("Accelerators", _v("hardware.count", hw.count)),
             ("Usable (GiB)", _gib("hardware.usable_bytes", hw.usable_bytes)),
             ("System RAM", escape(ram)),
             ("Models that run", _v("rows.runs", sum(r.runs for r in o.rows)))]) + "</div>"]
    rows = [[_v(f"rows.{i}.rank", r.rank), escape(r.model), escape(r.quant), escape(r.engine),
             _v(f"rows.{i}.context", r.context, f"{r.context:,}"), escape(r.placement),
             _gib(f"rows.{i}.total_bytes", r.total_bytes + r.host_bytes), _gib(f"rows.{i}.margin_bytes", r.margin_bytes),
             _f(f"rows.{i}.decode_tps", r.decode_tps), _f(f"rows.{i}.prefill_tps", r.prefill_tps, "{:,.0f}"),
             _st(r.status), _f(f"rows.{i}.score.score", r.score.score)] for i, r in enumerate(o.rows)]
    h.append("<h2>Models on this hardware</h2>" + _table(
        ["#", "model", "format", "engine", "context", "placement", "memory GiB", "margin GiB", "decode tok/s",
         "prefill tok/s", "fit", "score"], rows))
    if o.unsupported:
        h.append("<h2>Not sized</h2><ul>" + "".join(f"<li>{escape(u.model)}: {escape(u.reason)}</li>"
                                                   for u in o.unsupported) + "</ul>")
    if o.notes:
        h.append("<h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>" for n in o.notes) + "</ul>")
    h.append(f"<p class='muted'>fitprobe report (hardware page) · schema {escape(o.schema_version)}</p></body></html>")
    return "".join(h)
