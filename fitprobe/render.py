"""Human-readable text for a PlanOutput (the terminal twin of the JSON contract)."""
from __future__ import annotations

from .schema import PlanOutput

GIB, GB = 1 << 30, 10**9
STATUS = {"fits": "FITS", "tight": "TIGHT", "exceeds": "DOES NOT FIT"}


def gib(n: int | float) -> str:
    return f"{n / GIB:,.2f}"


def ctx_label(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else f"{n:,}"


def render_plan(o: PlanOutput) -> str:
    s, m, v, hw = o.settings, o.memory, o.verdict, o.hardware
    lines = [
        f"{o.model.id} on {hw.name} — {s.quant}, {ctx_label(s.context)} context, {s.kv_cache_dtype} KV, "
        f"{s.batch} sequence{'s' if s.batch > 1 else ''}, {s.engine}",
        f"  model: {o.model.architecture}, {o.model.params_total / 1e9:,.2f}B params "
        f"({o.model.params_active / 1e9:,.2f}B active), {o.model.n_layers} layers, {o.model.attention}; "
        f"source: {o.model.source}",
    ]
    if hw.source == "probe":
        probed = ", ".join(f"{d.name} ({d.memory_bytes / GIB:.1f} GiB" + (f", {d.free_bytes / GIB:.1f} free)" if d.free_bytes is not None else ")")
                           for d in hw.devices) or "no GPU"
        ram = f"; RAM {hw.system_ram_bytes / GIB:.1f} GiB" if hw.system_ram_bytes else ""
        lines.append(f"  probed: {probed}{ram}")
    lines += [
        "",
        f"Verdict: {STATUS[v.status]} — {v.reason}",
    ]
    if o.verdict_now is not None:
        lines.append(f"Right now: {STATUS[o.verdict_now.status]} — {o.verdict_now.reason}")
    lines += ["", f"  {'Memory breakdown':<30}{'GiB':>10}{'GB':>10}"]
    host = m.host_weights_bytes + m.host_kv_cache_bytes + m.host_buffers_bytes
    if hw.count:
        rows = [("Weights", m.weights_bytes), ("KV cache & state", m.kv_cache_bytes),
                ("Engine & activation buffers", m.buffers_bytes), ("Total on GPU", m.total_bytes),
                ("System RAM (CPU side)", host)]
    else:
        rows = [("Weights", m.host_weights_bytes), ("KV cache & state", m.host_kv_cache_bytes),
                ("Engine & activation buffers", m.host_buffers_bytes), ("Total in RAM", host)]
    for label, value in rows:
        lines.append(f"  {label:<30}{gib(value):>10}{value / GB:>10.2f}")
    physical = f"{hw.memory_bytes / GIB:,.0f} GiB physical" if hw.count else "system RAM"
    lines += [
        f"  {'Usable memory':<30}{gib(hw.usable_bytes):>10}   ({physical}, {hw.usable_fraction:.0%} usable)",
        f"  {'Safety margin':<30}{('+' if v.margin_bytes >= 0 else '') + gib(v.margin_bytes):>10}   on {v.limiting}",
        f"  {'Utilization':<30}{v.utilization:>10.0%}",
        f"  weights: {m.weights_source}; GGUF/checkpoint size {gib(m.model_file_bytes)} GiB",
    ]
    if o.speed is not None:
        sp = o.speed
        prefill = f", prefill ~{sp.prefill_tps:,.0f} tok/s, TTFT ({sp.prompt_tokens // 1024}K prompt) ~{sp.ttft_ms:,.0f} ms" \
            if sp.prefill_tps and sp.ttft_ms else ""
        label = "speed" if v.status != "exceeds" else "speed if it fit as asked"
        lines.append(f"  {label}: decode ~{sp.decode_tps:,.1f} tok/s per sequence ({sp.bound}-bound){prefill}")
    if len(m.per_device) > 1:
        lines.append("")
        lines.append(f"  {'Per device':<22}{'layers':>7}{'weights':>10}{'KV':>9}{'buffers':>9}{'total':>9}{'usable':>9}")
        for i, d in enumerate(m.per_device):
            lines.append(f"  {f'{i}: {d.name}'[:22]:<22}{d.layers:>7}{gib(d.weights_bytes):>10}{gib(d.kv_cache_bytes):>9}"
                         f"{gib(d.buffers_bytes):>9}{gib(d.total_bytes):>9}{gib(d.usable_bytes):>9}")
    lines += ["", f"Quantization matrix @ {ctx_label(s.context)} (GiB)",
              f"  {'format':<12}{'engine':<11}{'weights':>9}{'KV':>8}{'total':>9}  {'fit':<13}source"]
    for r in o.matrix:
        mark = "*" if r.quant == s.quant else " "
        lines.append(f" {mark}{r.quant:<12}{r.engine:<11}{gib(r.weights_bytes):>9}{gib(r.kv_cache_bytes):>8}"
                     f"{gib(r.total_bytes):>9}  {STATUS[r.status]:<13}{r.weights_source}"
                     + (f" ({r.note})" if r.note else ""))
    lines += ["", f"Context scaling at {s.quant} (GiB)", f"  {'context':>9}{'KV':>9}{'total':>9}  fit"]
    for r in o.scaling:
        flag = "  (beyond the model's maximum)" if r.beyond_model_max else ""
        lines.append(f"  {ctx_label(r.context):>9}{gib(r.kv_cache_bytes):>9}{gib(r.total_bytes):>9}  {STATUS[r.status]}{flag}")
    if o.notes:
        lines += ["", "Notes:"] + [f"  - {n}" for n in o.notes]
    return "\n".join(lines) + "\n"
