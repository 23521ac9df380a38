"""Human text for the launch plans, fixes, gate and verify sections of a PlanOutput."""
from __future__ import annotations

import textwrap

STATUS = {"fits": "FITS", "tight": "TIGHT", "exceeds": "DOES NOT FIT"}


def _wrapped(text: str, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, 100, initial_indent=indent, subsequent_indent=indent + "   ", break_on_hyphens=False,
                         break_long_words=False)


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def render_launch(o, *, commands: bool = True) -> str:
    """Every engine's command with each flag's reason (`commands`), then fixes, gate and verify."""
    lines: list[str] = []
    if o.launch and commands:
        lines += ["", "Launch commands (each flag chosen so the plan fits; reasons below)"]
        for engine, p in o.launch.items():
            where = f"{_gib(p.total_bytes)} on GPU" + (f", {_gib(p.host_bytes)} in RAM" if p.host_bytes else "")
            lines += ["", f"  [{engine}] {STATUS.get(p.status, p.status)} — {p.context:,} tokens, {p.quant}, "
                          f"{p.kv_cache_dtype} KV, {where}"]
            lines += [f"    $ {c}" for c in p.command.splitlines() if c]
            for f in p.flags:
                lines.append(f"      {f.flag}{' ' + f.value if f.value is not None else ''}: {f.reason}")
            lines += [f"      note: {n}" for n in p.notes]
    if o.fixes:
        lines += ["", "What would make it fit as asked (best first)"]
        for f in o.fixes:
            lines += _wrapped(f"{f.rank}. {f.change} — {STATUS.get(f.status, f.status)}; {f.cost}")
    if o.gate is not None:
        lines += ["", f"Gate: {'PASS' if o.gate.passed else 'FAIL'} ({o.gate.subject})"]
        for c in o.gate.checks:
            lines += _wrapped(f"[{'ok' if c.passed else 'FAIL'}] {c.name}: need {c.required}, have {c.actual} — {c.reason}")
    v = getattr(o, "verify", None)
    if v is not None:
        lines += ["", f"Verify (llama-fit-params): {'ran' if v.ok else 'failed: ' + (v.error or '')}"]
        if v.fitted_args:
            lines.append(f"  llama.cpp chose: {v.fitted_args[:160]}")
        for d in v.devices:
            ours = f"fitprobe {d.fitprobe_mib} MiB (diff {d.difference_mib:+d})" if d.fitprobe_mib is not None else ""
            lines.append(f"  {d.device} {d.name}: llama.cpp {d.llama_mib} MiB used, {d.layers} layers; {ours}")
        lines += [f"  note: {n}" for n in v.notes]
    return "\n".join(lines)
