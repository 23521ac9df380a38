"""Human text for the launch plans, fixes, gate and verify sections of a PlanOutput (in the language
fitprobe.i18n has chosen: this module is the terminal edge, not the pure core)."""
from __future__ import annotations

from fitprobe.i18n import _, say, spec, wrap
from fitprobe.render import status


def _wrapped(text: str, indent: str = "  ") -> list[str]:
    return wrap(text, 100, indent, indent + "   ")


def _gib(n: int) -> str:
    return spec(n / (1 << 30), ".1f", "GiB")


def render_launch(o, *, commands: bool = True) -> str:
    """Every engine's command with each flag's reason (`commands`), then fixes, gate and verify."""
    lines: list[str] = []
    if o.launch and commands:
        lines += ["", _("Launch commands (each flag chosen so the plan fits; reasons below)")]
        for engine, p in o.launch.items():
            where = _("%(size)s on GPU") % {"size": _gib(p.total_bytes)} + (
                _(", ") + _("%(size)s in RAM") % {"size": _gib(p.host_bytes)} if p.host_bytes else "")
            lines += ["", f"  [{engine}] {status(p.status)} — " + _("%(tokens)s tokens") % {"tokens": spec(p.context, ",")}
                      + _(", ") + _(", ").join([p.quant, f"{p.kv_cache_dtype} KV", where])]
            lines += [f"    $ {c}" for c in p.command.splitlines() if c]
            for f in p.flags:
                lines.append(f"      {f.flag}{' ' + f.value if f.value is not None else ''}: {say(f.reason)}")
            lines += ["      " + _("note: %(note)s") % {"note": say(n)} for n in p.notes]
    if o.fixes:
        lines += ["", _("What would make it fit as asked (best first)")]
        for f in o.fixes:
            lines += _wrapped(f"{f.rank}. {say(f.change)} — {status(f.status)}" + _("; ") + say(f.cost))
    if o.gate is not None:
        verdict = _("PASS") if o.gate.passed else _("FAIL")
        lines += ["", _("Gate: %(verdict)s (%(subject)s)") % {"verdict": verdict, "subject": o.gate.subject}]
        for c in o.gate.checks:
            lines += _wrapped(f"[{_('ok') if c.passed else _('FAIL')}] " + _(
                "%(name)s: need %(required)s, have %(actual)s — %(reason)s") % {
                "name": c.name, "required": say(c.required), "actual": say(c.actual), "reason": say(c.reason)})
    v = getattr(o, "verify", None)
    if v is not None:
        ran = _("ran") if v.ok else _("failed: %(error)s") % {"error": v.error or ""}
        lines += ["", _("Verify (llama-fit-params): %(result)s") % {"result": ran}]
        if v.fitted_args:
            lines.append("  " + _("llama.cpp chose: %(args)s") % {"args": v.fitted_args[:160]})
        for d in v.devices:
            ours = (_("fitprobe %(mib)s MiB (diff %(diff)s)") % {"mib": d.fitprobe_mib, "diff": f"{d.difference_mib:+d}"}
                    if d.fitprobe_mib is not None else "")
            lines.append(f"  {d.device} {d.name}: " + _("llama.cpp %(mib)s MiB used, %(layers)s layers; %(ours)s") % {
                "mib": d.llama_mib, "layers": d.layers, "ours": ours})
        lines += ["  " + _("note: %(note)s") % {"note": say(n)} for n in v.notes]
    return "\n".join(lines)
