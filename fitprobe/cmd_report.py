"""`fitprobe report MODEL (--gpu NAME | probed)`: the whole sizing page — memory, quant matrix,
context scaling, speed, cloud cost and rent vs buy, fine-tuning, recommended hardware, diagnosis —
in the terminal, as the JSON contract (--json), or as one self-contained HTML file (--html)."""
from __future__ import annotations

import sys

import click

from .cli import EXIT_EXCEEDS, EXIT_FITS, EXIT_OUTPUT, EXIT_USAGE, MAX_GPUS, Number, fail, positive, size_options
from .estimator.message import msg
from .i18n import N_, _

GIB = 1 << 30


def _report_options(f):
    opts = [
        click.option("--html", "html_path", default=None, type=click.Path(dir_okay=False), help="write the page as HTML"),
        click.option("--hours-per-day", type=positive(24), default=4.0, show_default=True, help="cost: hours of use per day"),
        click.option("--electricity", type=Number(0, 100), default=0.15, show_default=True, help="cost: electricity USD per kWh"),
        click.option("--hardware-price", type=Number(0, 1e9), default=None, help="cost: purchase price (default: catalog)"),
        click.option("--ft-seq-len", type=int, default=2048, show_default=True, help="fine-tuning sequence length"),
        click.option("--ft-batch", type=int, default=1, show_default=True, help="fine-tuning micro-batch"),
        click.option("--ft-no-checkpointing", is_flag=True, help="fine-tuning without gradient checkpointing"),
        click.option("--ft-optimizer", type=click.Choice(["adamw", "adamw8bit", "sgd"]), default="adamw",
                     show_default=True, help="fine-tuning optimizer"),
        click.option("--lora-rank", type=int, default=16, show_default=True, help="LoRA / QLoRA rank"),
        click.option("--fused-loss", is_flag=True, help="fine-tuning with a fused cross-entropy (no full logits)"),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@click.command("report", help=N_("The full report for MODEL on named (--gpu) or probed hardware; without MODEL, the "
                                 "hardware page: which catalog models run there, at which format and speed (as "
                                 "`fitprobe fit`)."))
@click.argument("model", required=False)
@click.option("--gpu", default=None, help="catalog GPU name or 'cpu' (default: probe this machine)")
@click.option("--gpus", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True, help="number of identical GPUs")
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

        write_html(opts["html_path"], render_html(out))
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

        write_html(opts["html_path"], render_hardware_html(out))
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
        sized = use_case(request, command="report", right_now=False, hf_token=opts.get("token"), lookup=lookup)
    finally:
        end_lookup(lookup)
    fill_report(sized, sized.resolved, sized.fmt, sized.settings, sized.hardware, cost_options=cost,
                finetune_options=ft, ram_bandwidth_gbs=opts.get("ram_bw"))
    return sized


def _g(n: float | None) -> str:
    return "-" if n is None else f"{n / GIB:,.2f}"


def _num(x: float | None, fmt: str = "{:,.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def render_text(o) -> str:
    """The plan page followed by the report sections."""
    from fitprobe.render import render_plan

    lines = [render_plan(o, full=True)]
    sp = o.speed
    lines += ["", "Speed"]
    if sp:
        lines += [
            f"  decode        {sp.decode_tps:,.1f} tok/s per sequence"
            + (f", {sp.aggregate_tps:,.1f} tok/s over {sp.batch} sequences" if sp.batch > 1 else "")
            + f"  ({sp.bound} bound; {sp.bytes_per_token / 1e9:.2f} GB read per step)",
            f"  prefill       {_num(sp.prefill_tps)} tok/s;  TTFT for a {sp.prompt_tokens:,}-token prompt: "
            f"{_num(sp.ttft_ms, '{:,.0f}')} ms",
            f"  backend       {sp.backend}: η {sp.efficiency.bandwidth:.2f}, MFU {sp.efficiency.compute:.2f}, "
            f"t_fixed {sp.efficiency.fixed_ms:.2f} ms" + ("" if sp.efficiency.calibrated else " (uncalibrated)"),
        ] + [f"  - {n}" for n in sp.notes]
    else:
        lines.append("  not estimated (see notes)")
    c = o.cost
    if c:
        lines += ["", f"Cloud cost ({c.options.hours_per_day:g} h/day)",
                  f"  {'provider':<14}{'instance':<34}{'$/h':>7}{'$/month':>10}{'tok/s':>9}{'$/1M tok':>10}  fit"]
        for off in [x for x in c.offers if x.status != "exceeds"][:10]:
            lines.append(f"  {off.provider[:13]:<14}{off.instance[:33]:<34}{off.price_per_hour_usd:>7.2f}"
                         f"{off.monthly_usd:>10.2f}{_num(off.aggregate_tps):>9}"
                         f"{_num(off.usd_per_million_tokens, '{:,.2f}'):>10}  {off.status}")
        r = c.rent_vs_buy
        lines += ["", "Rent vs buy",
                  f"  hardware ${_num(r.hardware_price_usd, '{:,.0f}')} ({r.price_basis}); electricity "
                  f"${_num(r.electricity_monthly_usd, '{:,.2f}')}/month at {r.tdp_w or '-'} W, "
                  f"${r.electricity_usd_per_kwh:g}/kWh, {r.hours_per_day:g} h/day",
                  f"  renting {r.rent_instance or '-'}: ${_num(r.rent_monthly_usd, '{:,.2f}')}/month; "
                  f"months to amortize: {_num(r.months_to_amortize)}"] + ([f"  - {r.note}"] if r.note else [])
    f = o.finetune
    if f:
        fo = f.options
        lines += ["", f"Fine-tuning memory (seq {fo.seq_len}, micro-batch {fo.micro_batch}, "
                      f"{'checkpointing' if fo.gradient_checkpointing else 'no checkpointing'}, {fo.optimizer}, "
                      f"LoRA r={fo.lora_rank}) GiB",
                  f"  {'method':<42}{'weights':>9}{'grad+opt':>10}{'activ.':>8}{'total':>9}  here  smallest GPU"]
        for m in f.methods:
            here = "-" if m.fits is None else ("yes" if m.fits else f"no ({m.devices_needed or '>64'} needed)")
            lines.append(f"  {m.label:<42}{_g(m.weights_bytes):>9}{_g(m.grads_optimizer_bytes):>10}"
                         f"{_g(m.activations_bytes):>8}{_g(m.total_bytes):>9}  {here}  {m.smallest_gpu or '-'}")
    if o.recommendations:
        lines += ["", "Recommended hardware"]
        for p in o.recommendations:
            extra = []
            if p.decode_tps:
                extra.append(f"~{p.decode_tps:,.1f} tok/s")
            if p.price_usd:
                extra.append(f"${p.price_usd:,.0f} ({p.price_basis})")
            if p.usd_per_usable_gib:
                extra.append(f"${p.usd_per_usable_gib:,.1f}/usable GiB")
            if p.usd_per_million_tokens:
                extra.append(f"${p.usd_per_million_tokens:,.2f}/1M tok")
            if p.note:
                extra.append(p.note)
            lines.append(f"  {p.role + ':':<26}{p.hardware} [{p.engine}, {p.status}] " + ", ".join(extra))
    d = o.diagnosis
    if d:
        lines += ["", "Diagnosis", f"  {d.verdict}"] + [f"  - {t}" for t in d.tips] + [f"  {d.kv}"]
    return "\n".join(lines)
