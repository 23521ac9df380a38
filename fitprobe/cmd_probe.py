"""`fitprobe probe [--json]`: what this machine has, as a table or as the ProbeReport JSON."""
from __future__ import annotations

import sys

import click

from fitprobe.estimator.message import msg


def _gib(n: int | None) -> str:
    return f"{n / 1024**3:.1f} GiB" if n else "-"


def render_report(report) -> str:
    """Readable text: devices (memory total/free, source, catalog match), CPU/RAM, backends."""
    lines = []
    visible = [g for g in report.gpus if g.visible]
    if not visible:
        lines.append("no GPU: CPU/RAM only")
    else:
        lines.append(f"{'#':>2}  {'device':<34} {'total':>10} {'free':>10}  {'source':<11} catalog")
    for g in report.gpus:
        flag = "" if g.visible else f"  [{g.hidden_reason}]"
        usable = f" (usable cap {_gib(g.usable_cap_bytes)})" if g.usable_cap_bytes else ""
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
            lines.append(f"      - {note}")
    cpu = report.cpu
    if cpu is not None:
        cores = f"{cpu.physical_cores or '?'} cores / {cpu.logical_cores or '?'} threads"
        flags = " ".join(cpu.flags) or "-"
        lines.append(f"CPU: {cpu.model or 'unknown'} ({cores}); flags: {flags}")
    ram = f"RAM: {_gib(report.ram_total_bytes)} total, {_gib(report.ram_available_bytes)} available"
    if report.cgroup_limit_bytes:
        ram += f"; container limit {_gib(report.cgroup_limit_bytes)}"
    lines.append(ram)
    if report.ram_bandwidth_gbs:
        lines.append(f"RAM bandwidth: {report.ram_bandwidth_gbs:.1f} GB/s measured ({report.ram_bandwidth_method}); "
                     f"pass it to plan/check as --ram-bw {report.ram_bandwidth_gbs:.0f}")
    if report.visible_masks:
        lines.append("masks: " + ", ".join(f"{k}={v}" for k, v in report.visible_masks.items()))
    lines.append("backends:")
    for b in report.backends:
        state = f"found {b.devices}" if b.present else "FAILED" if b.failed else "not present"
        lines.append(f"  {b.name:<11} {state}" + (f" ({b.reason})" if b.reason else ""))
    for note in report.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


@click.command("probe")
@click.option("--json", "as_json", is_flag=True, help="Print the full probe report as JSON.")
@click.option("--bench", is_flag=True, help="Also measure the RAM bandwidth (a memory copy, under 2 s).")
def probe_command(as_json: bool, bench: bool) -> None:
    """Show the GPUs, CPU and RAM this machine has, and where each number came from.
    Exit 4 when a vendor tool or library is there but failed (the report says which)."""
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
        click.echo("error: hardware not probeable: " + "; ".join(f"{b.name}: {b.reason}" for b in failed), err=True)
        sys.exit(HARDWARE.code)
