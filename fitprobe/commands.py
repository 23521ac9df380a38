"""Command bodies behind the click definitions: errors become one line and an exit code."""
from __future__ import annotations

import os
import sys

import click
from pydantic import ValidationError

from .cli import EXIT_EXCEEDS, EXIT_FITS, EXIT_MODEL, EXIT_USAGE, fail, parse_bytes


def build_settings(fmt, hw, opts: dict):
    from fitprobe.app import UsageError, default_engine
    from fitprobe.estimator.settings import RunSettings

    engine = opts.get("engine") or default_engine(fmt, hw)
    kv = opts.get("kv_cache") or ("auto" if engine in ("vllm", "sglang") else "f16")
    if opts["context"] <= 0:
        raise UsageError(f"--ctx must be a positive number of tokens, got {opts['context']}")
    if opts["batch"] <= 0:
        raise UsageError(f"--batch must be at least 1, got {opts['batch']}")
    try:
        return RunSettings(quant=fmt.name, context=opts["context"], kv_cache_dtype=kv, batch=opts["batch"],
                           engine=engine, ubatch=opts["ubatch"], flash_attention=not opts["no_flash_attn"],
                           gpu_layers=opts["gpu_layers"], gpu_memory_utilization=opts["gpu_util"])
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UsageError(f"invalid {err['loc'][0] if err['loc'] else 'setting'}: {err['msg']}") from None


def emit(sized, as_json: bool) -> None:
    from fitprobe.render import render_plan

    if as_json:
        click.echo(sized.output.model_dump_json(indent=2))
    else:
        click.echo(render_plan(sized.output))


def run_plan(command: str, model: str, *, gpu: str, gpus: int, **opts) -> None:
    from fitprobe.app import UsageError, catalog_hardware, check_settings, pick_format, size_plan
    from fitprobe.catalogs.resolve import ResolveError, resolve

    try:
        if not 0 < opts["usable_fraction"] <= 1:
            raise UsageError("--usable must be a fraction in (0, 1]")
        if not 0 < opts["gpu_util"] <= 1:
            raise UsageError("--gpu-util must be a fraction in (0, 1]")
        ram = int(opts["ram_gib"] * (1 << 30)) if opts.get("ram_gib") else None
        if opts.get("ram_gib") is not None and opts["ram_gib"] <= 0:
            raise UsageError("--ram-gib must be positive")
        min_margin = parse_bytes(opts["min_margin"])
        hw = catalog_hardware(gpu, gpus, usable_fraction=opts["usable_fraction"], ram_bytes=ram)
        token = opts.get("token") or os.environ.get("HF_TOKEN")
        resolved = resolve(model, token=token, revision=opts.get("revision"))
        fmt = pick_format(resolved, opts.get("quant"))
        settings = build_settings(fmt, hw, opts)
        check_settings(settings, fmt, hw)
        sized = size_plan(command, resolved, fmt, settings, hw, min_margin_bytes=min_margin)
    except ResolveError as exc:
        fail(str(exc), EXIT_MODEL)
    except (UsageError, click.BadParameter) as exc:
        fail(str(exc), EXIT_USAGE)
    emit(sized, opts["as_json"])
    sys.exit(EXIT_EXCEEDS if sized.output.verdict.status == "exceeds" else EXIT_FITS)
