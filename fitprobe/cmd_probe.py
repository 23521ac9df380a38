"""`fitprobe probe [--json]`: what this machine has, as a table or as the ProbeReport JSON."""
from __future__ import annotations

import sys

import click

from fitprobe.estimator.message import msg
from fitprobe.i18n import N_, _, ljust, rjust, say, spec



def ram_share() -> float:
    """η_cpu: the share of a RAM peak (channels × 8 B × MT/s) that CPU decode streams, as the speed fit found it.
    The copy rate `--bench` measures is an achieved rate (on this project's VM the 8B decode streamed 11–12 GB/s
    against a 10.9 GB/s copy), so the peak to pass is the copy rate over η_cpu."""
    from fitprobe.catalogs.speed_calibration import load_calibration

    return load_calibration().cpu.bandwidth

def _gib(n: int | None) -> str:
    return spec(n / 1024**3, ".1f", "GiB") if n else "-"


def render_report(report) -> str:
    """Readable text: devices (memory total/free, source, catalog match), CPU/RAM, backends."""
    lines = []
    visible = [g for g in report.gpus if g.visible]
    if not visible:
        lines.append(_("no GPU: CPU/RAM only"))
    else:
        lines.append(f"{'#':>2}  " + ljust(_("device"), 34) + " " + rjust(_("total"), 10) + " " + rjust(_("free"), 10)
                     + "  " + ljust(_("source"), 11) + " " + _("catalog"))
    for g in report.gpus:
        flag = "" if g.visible else f"  [{say(g.hidden_reason)}]"
        usable = " (" + _("usable cap %(size)s") % {"size": _gib(g.usable_cap_bytes)} + ")" if g.usable_cap_bytes else ""
        match = g.catalog_name or "-"
        lines.append(
            f"{g.index:>2}  {g.name[:34]:<34} {_gib(g.memory_total_bytes):>10} {_gib(g.memory_free_bytes):>10}"
            f"  {g.source:<11} {match}{usable}{flag}"
        )
        for inst in g.mig_instances:
            lines.append(
                f"      MIG {inst.profile or inst.index:<26} {_gib(inst.memory_total_bytes):>10} "
                f"{_gib(inst.memory_free_bytes):>10}"
            )
        for note in ([g.match_note] if g.match_note else []) + g.notes:
            lines.append(f"      - {say(note)}")
    cpu = report.cpu
    if cpu is not None:
        cores = _("%(cores)s cores / %(threads)s threads") % {"cores": cpu.physical_cores or "?",
                                                              "threads": cpu.logical_cores or "?"}
        if cpu.max_ghz:
            cores += _(", ") + spec(cpu.max_ghz, ".2f", "GHz")
        flags = " ".join(cpu.flags) or "-"
        lines.append(_("CPU: %(model)s (%(cores)s); flags: %(flags)s") % {
            "model": cpu.model or _("unknown"), "cores": cores, "flags": flags})
    ram = _("RAM: %(total)s total, %(available)s available") % {"total": _gib(report.ram_total_bytes),
                                                                "available": _gib(report.ram_available_bytes)}
    if report.cgroup_limit_bytes:
        ram += _("; ") + _("container limit %(size)s") % {"size": _gib(report.cgroup_limit_bytes)}
    lines.append(ram)
    if report.ram_bandwidth_gbs:
        lines.append(_("RAM bandwidth: %(gbs)s GB/s measured (%(method)s)") % {
            "gbs": spec(report.ram_bandwidth_gbs, ".1f"), "method": say(report.ram_bandwidth_method)})
        share = ram_share()
        lines.append("  " + _("--ram-bw is a peak, of which llama.cpp's decode streams %(share)s; a copy rate is already what "
                       "decode reaches: pass --ram-bw %(flag)s") % {
            "share": spec(share, ".0%"), "flag": f"{report.ram_bandwidth_gbs / share:.0f}"})
    if report.visible_masks:
        lines.append(_("masks: %(masks)s") % {"masks": _(", ").join(f"{k}={v}" for k, v in report.visible_masks.items())})
    lines.append(_("backends:"))
    for b in report.backends:
        state = (_("found %(devices)s") % {"devices": b.devices} if b.present else _("FAILED") if b.failed
                 else _("not present"))
        lines.append(f"  {b.name:<11} {state}" + (f" ({say(b.reason)})" if b.reason else ""))
    for note in report.notes:
        lines.append(_("note: %(note)s") % {"note": say(note)})
    return "\n".join(lines)


@click.command("probe", help=N_("Show the GPUs, CPU and RAM this machine has, and where each number came from. Exit 4 "
                                "when a vendor tool or library is there but failed (the report says which)."))
@click.option("--json", "as_json", is_flag=True, help=N_("Print the full probe report as JSON."))
@click.option("--bench", is_flag=True, help=N_("Also measure the RAM bandwidth (a memory copy, under 2 s)."))
def probe_command(as_json: bool, bench: bool) -> None:
    from fitprobe.errors import HARDWARE, HardwareError

    try:
        from fitprobe.record_json import dumps, record_data
        from fitprobe.usecases import probe

        report = probe()
        if bench:
            from fitprobe.probe.membw import measure_copy_bandwidth

            gbs, method = measure_copy_bandwidth()
            if gbs > 0:
                report.ram_bandwidth_gbs, report.ram_bandwidth_method = round(gbs, 1), method
        out = dumps(record_data(report)) if as_json else render_report(report)
    except Exception as exc:  # noqa: BLE001 - the probe must never end in a traceback
        from fitprobe.cli import report_error

        report_error(HardwareError(msg("probe failed: %(error_type)s: %(exc)s",
                                       error_type=type(exc).__name__, exc=exc)), as_json=as_json)
    click.echo(out)
    failed = [b for b in report.backends if b.failed]
    if failed:
        click.echo(_("error: %(message)s") % {"message": _("hardware not probeable: %(why)s") % {
            "why": _("; ").join(f"{b.name}: {say(b.reason)}" for b in failed)}}, err=True)
        sys.exit(HARDWARE.code)
