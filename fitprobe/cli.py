"""The fitprobe command line: parse options, call the core, format. Exit codes:
0 fits (or tight), 1 does not fit, 2 usage error, 3 model cannot be resolved, 4 hardware not probeable."""
from __future__ import annotations

import importlib
import sys

import click

from fitprobe import __version__

EXIT_FITS, EXIT_EXCEEDS, EXIT_USAGE, EXIT_MODEL, EXIT_HARDWARE = 0, 1, 2, 3, 4


def fail(message: str, code: int) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


class ContextParam(click.ParamType):
    """Tokens per sequence: 8192, 32k / 128K (x 1024), 1M (x 1024^2), or 'max' (the longest that fits)."""

    name = "context"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "max":
            return value
        text = str(value).strip().lower()
        if text == "max":
            return "max"
        scale = {"k": 1 << 10, "m": 1 << 20}.get(text[-1:], 1)
        try:
            tokens = int(float(text[:-1] if scale > 1 else text) * scale)
        except (ValueError, OverflowError):
            self.fail(f"'{value}' is not a context: use tokens (8192), 32k, 128K or max", param, ctx)
        return tokens  # zero or negative: the one-line usage error of build_settings


def size_options(f):
    """Options shared by plan and check."""
    opts = [
        click.option("--quant", "-q", default=None, help="Q4_K_M (default), Q8_0, BF16, FP8, AWQ, native, ..."),
        click.option("--ctx", "context", type=ContextParam(), default=8192, show_default=True,
                     help="tokens per sequence: 8192, 32k, 128K, or max (the longest that fits)"),
        click.option("--full", is_flag=True, help="also print the quantization matrix and the context table"),
        click.option("--kv-cache", "kv_cache", default=None, help="KV cache type: f16, bf16, fp8, q8_0, q4_0, auto"),
        click.option("--batch", type=int, default=1, show_default=True, help="concurrent sequences"),
        click.option("--engine", type=click.Choice(["llama.cpp", "vllm", "sglang", "ollama", "mlx"]), default=None,
                     help="default: llama.cpp for GGUF quants, vLLM for checkpoints, MLX on Apple"),
        click.option("--ubatch", type=int, default=512, show_default=True, help="llama.cpp micro-batch (-ub)"),
        click.option("--no-flash-attn", is_flag=True, help="llama.cpp without flash attention"),
        click.option("--ngl", "gpu_layers", type=int, default=None, help="llama.cpp -ngl (default: all layers)"),
        click.option("--gpu-util", type=float, default=0.9, show_default=True, help="vLLM --gpu-memory-utilization"),
        click.option("--usable", "usable_fraction", type=float, default=0.95, show_default=True,
                     help="share of physical memory treated as usable"),
        click.option("--min-margin", default="0", help="margin below which the verdict is 'tight', e.g. 2GiB"),
        click.option("--ram-gib", type=float, default=None, help="system RAM for offload (default: unknown)"),
        click.option("--ram-bw", type=float, default=None,
                     help="speed: system RAM bandwidth GB/s (default 89.6; measure it: fitprobe probe --bench)"),
        click.option("--threads", "cpu_threads", type=int, default=None,
                     help="speed: CPU cores llama.cpp computes on (default: probed physical cores)"),
        click.option("--token", default=None, help="Hugging Face token for gated repos (or HF_TOKEN)"),
        click.option("--revision", default=None, help="Hub revision (branch, tag or commit)"),
        click.option("--json", "as_json", is_flag=True, help="print the JSON contract"),
        click.option("--text", "also_text", is_flag=True, help="with --json: also print the human report on stderr"),
        click.option("--brief", is_flag=True, help="JSON with only the verdict, the deployment, memory and speed "
                                                  "(implies --json; see fitprobe schema --brief)"),
        click.option("--fields", default=None, help="JSON with only these top-level fields, e.g. verdict,memory "
                                                    "(implies --json)"),
        click.option("--require-context", type=int, default=None,
                     help="gate: the plan must serve this many tokens per sequence (sizes at least this context)"),
        click.option("--require-tps", type=float, default=None, help="gate: decode tokens/s per sequence the plan must reach"),
        click.option("--strict", is_flag=True, help="gate: a 'tight' verdict fails"),
        click.option("--verify", is_flag=True, help="run llama.cpp's llama-fit-params on the local GGUF and compare"),
        click.option("--llama-fit-params", "fit_params_path", default=None, help="path of llama-fit-params (default: PATH)"),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def parse_bytes(text: str) -> int:
    units = {"gib": 1 << 30, "gb": 10**9, "mib": 1 << 20, "mb": 10**6, "b": 1, "": 1 << 30}
    raw = text.strip().lower().replace(" ", "")
    num = raw.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = raw[len(num):]
    try:
        value = float(num)
    except ValueError:
        raise click.BadParameter(f"'{text}' is not a size like 2GiB or 1500MB") from None
    if unit not in units or value < 0:
        raise click.BadParameter(f"'{text}' is not a size like 2GiB or 1500MB")
    return int(value * units[unit])


class LazyGroup(click.Group):
    """A command group whose commands in `lazy` ("name": "module:attribute") are imported only when
    invoked (or listed by --help), so a `plan` run never pays for `report`, `probe` or `schema`."""

    def __init__(self, *args, lazy: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            module, _, attribute = self.lazy[name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)


OPTIONAL_COMMANDS = {
    "fit": "fitprobe.cmd_fit:fit_command",
    "simulate": "fitprobe.cmd_simulate:simulate_command",
    "probe": "fitprobe.cmd_probe:probe_command",
    "list": "fitprobe.cmd_list:list_command",
    "report": "fitprobe.cmd_report:report_command",
    "schema": "fitprobe.cmd_schema:schema_command",
}


@click.group(cls=LazyGroup, lazy=OPTIONAL_COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fitprobe")
def main():
    """Will this LLM run on this hardware, how well, and with which launch flags?"""


@main.command()
@click.argument("model")
@click.option("--gpu", required=True, help="catalog GPU name (e.g. 'RTX 4090', 'H100 SXM', 'M4 Max'), or 'cpu'")
@click.option("--gpus", type=int, default=1, show_default=True, help="number of identical GPUs")
@click.option("--memory-gib", type=float, default=None, help="memory of each GPU (a device the catalog lacks, or override)")
@size_options
def plan(model, gpu, gpus, **opts):
    """Size MODEL on named hardware (bundled name, HF id, directory, config.json or .gguf)."""
    from fitprobe import commands

    commands.run_plan("plan", model, gpu=gpu, gpus=gpus, **opts)


@main.command()
@click.argument("model")
@click.option("--gpu", default=None, help="override the probe with a catalog GPU name (or 'cpu')")
@click.option("--gpus", type=int, default=1, show_default=True, help="with --gpu: number of identical GPUs")
@size_options
def check(model, gpu, gpus, **opts):
    """Size MODEL on this machine: probe its GPUs and RAM, then plan (idle and right now)."""
    from fitprobe import commands

    commands.run_check(model, gpu=gpu, gpus=gpus, **opts)


def entry() -> None:
    """Console entry point: no traceback ever reaches a user (FITPROBE_DEBUG=1 shows it)."""
    import os

    try:
        main()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as exc:  # a bug: say so in one line instead of a traceback
        if os.environ.get("FITPROBE_DEBUG"):
            raise
        fail(f"internal error: {type(exc).__name__}: {exc} (set FITPROBE_DEBUG=1 for details)", 70)
