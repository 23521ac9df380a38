"""`fitprobe report MODEL (--gpu NAME | probed)`: the whole sizing page — memory, quant matrix,
context scaling, speed, cloud cost and rent vs buy, fine-tuning, recommended hardware, diagnosis —
in the terminal, as the JSON contract (--json), or as one self-contained HTML file (--html)."""
from __future__ import annotations

import sys

import click

from .cli import EXIT_EXCEEDS, EXIT_FITS, EXIT_OUTPUT, EXIT_USAGE, MAX_GPUS, Number, fail, positive, size_options
from .estimator.message import msg
from .i18n import N_, _, ljust, rjust, say, spec, width

GIB = 1 << 30


def _report_options(f):
    opts = [
        click.option("--html", "html_path", default=None, type=click.Path(dir_okay=False), help=N_("write the page as HTML")),
        click.option("--hours-per-day", type=positive(24), default=4.0, show_default=True, help=N_("cost: hours of use per day")),
        click.option("--electricity", type=Number(0, 100), default=0.15, show_default=True, help=N_("cost: electricity USD per kWh")),
        click.option("--hardware-price", type=Number(0, 1e9), default=None, help=N_("cost: purchase price (default: catalog)")),
        click.option("--ft-seq-len", type=int, default=2048, show_default=True, help=N_("fine-tuning sequence length")),
        click.option("--ft-batch", type=int, default=1, show_default=True, help=N_("fine-tuning micro-batch")),
        click.option("--ft-no-checkpointing", is_flag=True, help=N_("fine-tuning without gradient checkpointing")),
        click.option("--ft-optimizer", type=click.Choice(["adamw", "adamw8bit", "sgd"]), default="adamw",
                     show_default=True, help=N_("fine-tuning optimizer")),
        click.option("--lora-rank", type=int, default=16, show_default=True, help=N_("LoRA / QLoRA rank")),
        click.option("--fused-loss", is_flag=True, help=N_("fine-tuning with a fused cross-entropy (no full logits)")),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@click.command("report", help=N_("The full report for MODEL on named (--gpu) or probed hardware; without MODEL, the "
                                 "hardware page: which catalog models run there, at which format and speed (as "
                                 "`fitprobe fit`)."))
@click.argument("model", required=False)
@click.option("--gpu", default=None, help=N_("catalog GPU name or 'cpu' (default: probe this machine)"))
@click.option("--gpus", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True, help=N_("number of identical GPUs"))
@size_options
@_report_options
def report_command(model, gpu, gpus, **opts):
    if model is None:
        hardware_page(gpu, gpus, opts)
    from fitprobe.app import UsageError
    from fitprobe.commands import json_selection

    try:
        selection = json_selection(opts)
    except UsageError as exc:
        fail(str(exc), EXIT_USAGE)
    sized = build(model, gpu, gpus, opts)
    out = sized.output
    if opts["html_path"]:
        from .html_report import render_html
        from .i18n import language

        write_html(opts["html_path"], render_html(out, language()))
    if opts["as_json"] or selection["brief"] or selection["fields"]:
        from fitprobe.contract import to_json

        click.echo(to_json(out, **selection))
    elif not opts["html_path"]:
        click.echo(render_text(out))
    else:
        click.echo(_("wrote %(path)s") % {"path": opts["html_path"]})
    sys.exit(EXIT_EXCEEDS if out.verdict.status == "exceeds" else EXIT_FITS)


def write_html(path: str, page: str) -> None:
    """The page to its file; a path that cannot be written is an output error (one line)."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(page)
    except OSError as exc:
        fail(msg("cannot write %(path)s: %(reason)s", path=path, reason=exc.strerror), EXIT_OUTPUT)


def hardware_page(gpu: str | None, gpus: int, opts: dict) -> None:
    """`report` without MODEL: the ranking of `fitprobe fit` as a page (text, --json FitOutput, --html)."""
    from fitprobe.cmd_fit import build as build_fit

    fit_opts = {"gpu": gpu, "gpus": gpus, "ram_gib": opts.get("ram_gib"), "usable_fraction": opts["usable_fraction"],
                "engine": opts.get("engine"), "min_margin": opts.get("min_margin"), "sort": "score"}
    out = build_fit(fit_opts, command="report").output
    if opts["html_path"]:
        from .html_report import render_hardware_html
        from .i18n import language

        write_html(opts["html_path"], render_hardware_html(out, language()))
    if opts["as_json"]:
        from fitprobe.contract import fit_to_json

        click.echo(fit_to_json(out))
    elif not opts["html_path"]:
        from fitprobe.fitting import render_table

        click.echo(render_table(out))
    else:
        click.echo(_("wrote %(path)s") % {"path": opts["html_path"]})
    sys.exit(EXIT_FITS if any(r.runs for r in out.rows) else EXIT_EXCEEDS)


def build(model: str, gpu: str | None, gpus: int, opts: dict):
    """The plan through the shared use case, then the report-only sections (cost, fine-tuning, picks)."""
    from fitprobe import usecases
    from fitprobe.app import fill_report
    from fitprobe.commands import end_lookup, hub_lookup, request_from
    from fitprobe.errors import UsageError
    from fitprobe.estimator.cost import CostOptions
    from fitprobe.estimator.finetune import FinetuneOptions

    try:
        cost = CostOptions(hours_per_day=opts["hours_per_day"], electricity_usd_per_kwh=opts["electricity"],
                           hardware_price_usd=opts["hardware_price"])
        ft = FinetuneOptions(seq_len=opts["ft_seq_len"], micro_batch=opts["ft_batch"],
                             gradient_checkpointing=not opts["ft_no_checkpointing"], lora_rank=opts["lora_rank"],
                             optimizer=opts["ft_optimizer"], fused_loss=opts["fused_loss"])
    except ValueError as exc:  # a bound or choice the options check
        raise UsageError(msg("invalid option: %(exc)s", exc=exc)) from None
    request = request_from(model, gpu, gpus, opts)
    lookup = hub_lookup(model, opts)
    try:
        use_case = usecases.plan if gpu else usecases.check
        # probed hardware: the idle verdict and the one right now (free memory), as `check` gives them
        sized = use_case(request, command="report", right_now=not gpu, hf_token=opts.get("token"), lookup=lookup)
    finally:
        end_lookup(lookup)
    fill_report(sized, sized.resolved, sized.fmt, sized.settings, sized.hardware, cost_options=cost,
                finetune_options=ft, ram_bandwidth_gbs=opts.get("ram_bw"))
    return sized


def _g(n: float | None) -> str:
    return "-" if n is None else spec(n / GIB, ",.2f")


def _num(x: float | None, fmt: str = ",.1f") -> str:
    return "-" if x is None else spec(x, fmt)


def _widths(head: list[str], columns: tuple[int, ...]) -> list[int]:
    """Each column's width: its English width, or its translated header and a space."""
    return [max(n, width(h) + 1) for h, n in zip(head, columns)]


STATUS_WORDS = {"fits": N_("fits"), "tight": N_("tight"), "exceeds": N_("exceeds")}  # as the JSON spells them


def render_text(o) -> str:
    """The plan page followed by the report sections, in the language fitprobe.i18n has chosen."""
    from fitprobe.render import BOUND, duration, render_plan

    def status(value: str) -> str:
        return _(STATUS_WORDS.get(value, value))

    lines = [render_plan(o, full=True)]
    sp = o.speed
    lines += ["", _("Speed")]
    if sp:
        decode = _("%(tps)s tok/s per sequence") % {"tps": _num(sp.decode_tps)}
        if sp.batch > 1:
            decode += _(", ") + _("%(tps)s tok/s over %(n)s sequences") % {"tps": _num(sp.aggregate_tps), "n": sp.batch}
        decode += "  (" + _("%(bound)s bound; %(gb)s GB read per step") % {
            "bound": _(BOUND.get(sp.bound, sp.bound)), "gb": spec(sp.bytes_per_token / 1e9, ".2f")} + ")"
        backend = _("%(backend)s: η %(eta)s, MFU %(mfu)s, t_fixed %(fixed)s ms") % {
            "backend": sp.backend, "eta": spec(sp.efficiency.bandwidth, ".2f"), "mfu": spec(sp.efficiency.compute, ".2f"),
            "fixed": spec(sp.efficiency.fixed_ms, ".2f")}
        lines += [
            "  " + ljust(_("decode"), 14) + decode,
            "  " + ljust(_("prefill"), 14) + _("%(tps)s tok/s;  TTFT for a %(prompt)s-token prompt: %(ttft)s") % {
                "tps": _num(sp.prefill_tps), "prompt": spec(sp.prompt_tokens, ","),
                "ttft": "-" if sp.ttft_ms is None else duration(sp.ttft_ms)},
            "  " + ljust(_("backend"), 14) + backend + ("" if sp.efficiency.calibrated else " " + _("(uncalibrated)")),
        ] + [f"  - {say(n)}" for n in sp.notes]
    else:
        lines.append("  " + _("not estimated (see notes)"))
    c = o.cost
    if c:
        head = [_("provider"), _("instance"), "$/h", _("$/month"), "tok/s", _("$/1M tok"), _("fit")]
        w = _widths(head, (14, 34, 7, 10, 9, 10))
        lines += ["", _("Cloud cost (%(hours)s h/day)") % {"hours": spec(c.options.hours_per_day, "g")},
                  "  " + ljust(head[0], w[0]) + ljust(head[1], w[1]) + "".join(rjust(h, n) for h, n in zip(head[2:6], w[2:]))
                  + "  " + head[6]]
        for off in [x for x in c.offers if x.status != "exceeds"][:10]:
            cells = [spec(off.price_per_hour_usd, ".2f"), spec(off.monthly_usd, ".2f"), _num(off.aggregate_tps),
                     _num(off.usd_per_million_tokens, ",.2f")]
            lines.append("  " + ljust(off.provider[:13], w[0]) + ljust(off.instance[:33], w[1])
                         + "".join(rjust(x, n) for x, n in zip(cells, w[2:])) + "  " + status(off.status))
        r = c.rent_vs_buy
        lines += ["", _("Rent vs buy"),
                  "  " + _("hardware $%(price)s (%(basis)s); electricity $%(power)s/month at %(watts)s W, $%(kwh)s/kWh, "
                           "%(hours)s h/day") % {
                      "price": _num(r.hardware_price_usd, ",.0f"), "basis": say(r.price_basis),
                      "power": _num(r.electricity_monthly_usd, ",.2f"), "watts": spec(r.tdp_w) if r.tdp_w else "-",
                      "kwh": spec(r.electricity_usd_per_kwh, "g"), "hours": spec(r.hours_per_day, "g")},
                  "  " + _("renting %(instance)s: $%(monthly)s/month; months to amortize: %(months)s") % {
                      "instance": r.rent_instance or "-", "monthly": _num(r.rent_monthly_usd, ",.2f"),
                      "months": _num(r.months_to_amortize)}] + ([f"  - {say(r.note)}"] if r.note else [])
    f = o.finetune
    if f:
        fo = f.options
        checkpointing = _("checkpointing") if fo.gradient_checkpointing else _("no checkpointing")
        head = [_("method"), _("weights"), _("grad+opt"), _("activ."), _("total"), _("here"), _("smallest GPU")]
        w = _widths(head, (42, 9, 10, 8, 9))
        lines += ["", _("Fine-tuning memory (seq %(seq)s, micro-batch %(micro)s, %(checkpointing)s, %(optimizer)s, "
                        "LoRA r=%(rank)s) GiB") % {"seq": fo.seq_len, "micro": fo.micro_batch,
                                                   "checkpointing": checkpointing, "optimizer": fo.optimizer,
                                                   "rank": fo.lora_rank},
                  "  " + ljust(head[0], w[0]) + "".join(rjust(h, n) for h, n in zip(head[1:5], w[1:]))
                  + "  " + head[5] + "  " + head[6]]
        for m in f.methods:
            here = ("-" if m.fits is None else _("yes") if m.fits
                    else _("no (%(n)s needed)") % {"n": m.devices_needed or ">64"})
            cells = [_g(m.weights_bytes), _g(m.grads_optimizer_bytes), _g(m.activations_bytes), _g(m.total_bytes)]
            lines.append("  " + ljust(say(m.label), w[0]) + "".join(rjust(x, n) for x, n in zip(cells, w[1:]))
                         + f"  {here}  {m.smallest_gpu or '-'}")
    if o.recommendations:
        lines += ["", _("Recommended hardware")]
        for p in o.recommendations:
            extra = []
            if p.decode_tps:
                extra.append(f"~{_num(p.decode_tps)} tok/s")
            if p.price_usd:
                extra.append(_("$%(price)s (%(basis)s)") % {"price": _num(p.price_usd, ",.0f"), "basis": say(p.price_basis)})
            if p.usd_per_usable_gib:
                extra.append(_("$%(price)s/usable GiB") % {"price": _num(p.usd_per_usable_gib, ",.1f")})
            if p.usd_per_million_tokens:
                extra.append(_("$%(price)s/1M tok") % {"price": _num(p.usd_per_million_tokens, ",.2f")})
            if p.note:
                extra.append(say(p.note))
            lines.append("  " + ljust(_("%(role)s:") % {"role": say(p.role)}, 26)
                         + f"{p.hardware} [{p.engine}{_(', ')}{status(p.status)}] " + _(", ").join(extra))
    d = o.diagnosis
    if d:
        lines += ["", _("Diagnosis"), f"  {say(d.verdict)}"] + [f"  - {say(t)}" for t in d.tips] + [f"  {say(d.kv)}"]
    return "\n".join(lines)
