"""The fitprobe command line: parse options, call the core, format.

Exit codes and error kinds live in `fitprobe.errors` (0 fits, 1 does not fit, 2 usage, 3 model,
4 hardware, 74 output, 75 retry later, 70 internal); this module turns every error into one line
on stderr, plus a JSON error object on stdout with --json."""
from __future__ import annotations

import copy
import errno
import importlib
import math
import os
import sys

import click

from fitprobe import __version__
from fitprobe import errors, i18n
from fitprobe.i18n import N_
from fitprobe.estimator.message import msg

EXIT_FITS, EXIT_EXCEEDS = errors.FITS, errors.EXCEEDS
EXIT_USAGE, EXIT_MODEL, EXIT_HARDWARE = errors.USAGE.code, errors.MODEL_NOT_FOUND.code, errors.HARDWARE.code
EXIT_OUTPUT, EXIT_RETRY_LATER = errors.OUTPUT.code, errors.RETRY_LATER.code
_KIND_BY_CODE = {k.code: k for k in reversed(errors.KINDS)}

MAX_GPUS = 4096  # fitprobe.app.MAX_DEVICES: no node or plan has more


def fail(message: str, code: int) -> None:
    """Raise the error of exit code `code`; the command group reports it (one line, JSON with --json)."""
    raise errors.FitprobeError(message, _KIND_BY_CODE.get(code, errors.INTERNAL))


class Number(click.ParamType):
    """A finite float in [low, high] (nan, inf and 1e400 are usage errors, not numbers)."""

    name = "number"

    def __init__(self, low: float, high: float, *, low_open: bool = False):
        self.low, self.high, self.low_open = low, high, low_open

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            number = value
        else:
            try:
                number = float(str(value).strip())
            except ValueError:
                self.fail(i18n._("%(value)s is not a number") % {"value": repr(value)}, param, ctx)
        if not math.isfinite(number):
            self.fail(i18n._("%(value)s is not a finite number") % {"value": repr(value)}, param, ctx)
        too_low = number <= self.low if self.low_open else number < self.low
        if too_low or number > self.high:
            self.fail(i18n._("%(value)s is not in %(range)s") % {
                "value": value, "range": ("(" if self.low_open else "[") + i18n.spec(self.low, "g") + ", "
                + i18n.spec(self.high, "g") + "]"}, param, ctx)
        return number


def positive(high: float) -> Number:
    return Number(0.0, high, low_open=True)


FRACTION = positive(1.0)
GIB_AMOUNT = Number(1 / 1024, 1 << 20)  # 1 MiB .. 1 PiB, in GiB
TOKENS = click.IntRange(1, 1 << 27)  # fitprobe.app.MAX_CONTEXT


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
            self.fail(i18n._("%(value)s is not a context: use tokens (8192), 32k, 128K or max") % {"value": repr(value)},
                      param, ctx)
        return tokens  # zero or negative: the one-line usage error of the use case


def size_options(f):
    """Options shared by plan and check."""
    opts = [
        click.option("--quant", "-q", default=None, help=N_("Q4_K_M (default), Q8_0, BF16, FP8, AWQ, native, ...")),
        click.option("--ctx", "context", type=ContextParam(), default=8192, show_default=True,
                     help=N_("tokens per sequence: 8192, 32k, 128K, or max (the longest that fits)")),
        click.option("--full", is_flag=True, help=N_("also print the quantization matrix and the context table")),
        click.option("--kv-cache", "kv_cache", default=None, help=N_("KV cache type: f16, bf16, fp8, q8_0, q4_0, auto")),
        click.option("--batch", type=int, default=1, show_default=True, help=N_("concurrent sequences")),
        click.option("--engine", type=click.Choice(["llama.cpp", "vllm", "sglang", "ollama", "mlx"]), default=None,
                     help=N_("default: llama.cpp for GGUF quants, vLLM for checkpoints, MLX on Apple")),
        click.option("--ubatch", type=int, default=512, show_default=True, help=N_("llama.cpp micro-batch (-ub)")),
        click.option("--no-flash-attn", is_flag=True, help=N_("llama.cpp without flash attention")),
        click.option("--ngl", "gpu_layers", type=int, default=None, help=N_("llama.cpp -ngl (default: all layers)")),
        click.option("--gpu-util", type=FRACTION, default=0.9, show_default=True,
                     help=N_("vLLM --gpu-memory-utilization")),
        click.option("--usable", "usable_fraction", type=FRACTION, default=0.95, show_default=True,
                     help=N_("share of physical memory treated as usable")),
        click.option("--min-margin", type=SIZE, default="0", help=N_("margin below which the verdict is 'tight', e.g. 2GiB")),
        click.option("--ram-gib", type=GIB_AMOUNT, default=None, help=N_("system RAM for offload (default: unknown)")),
        click.option("--ram-bw", type=positive(1e5), default=None,
                     help=N_("speed: system RAM bandwidth GB/s (default 89.6; measure it: fitprobe probe --bench)")),
        click.option("--threads", "cpu_threads", type=click.IntRange(1, 4096), default=None,
                     help=N_("speed: CPU cores llama.cpp computes on (default: as llama.cpp counts them here: the "
                             "P-cores of a hybrid CPU, else the physical cores)")),
        click.option("--cpu-ghz", type=Number(0.3, 10), default=None,
                     help=N_("speed: their clock in GHz, maximum turbo (default: probed; else 3.5)")),
        click.option("--cpu-class", type=click.Choice(["x86_64", "atom", "arm64", "apple"]), default=None,
                     help=N_("speed: their core class (default: probed; else apple on a Mac, x86_64 otherwise); "
                             "atom: Intel N100-class, Celeron/Pentium N and J")),
        click.option("--token", default=None, help=N_("Hugging Face token for gated repos (or HF_TOKEN)")),
        click.option("--revision", default=None, help=N_("Hub revision (branch, tag or commit) of an org/name MODEL")),
        click.option("--timeout", "hub_timeout", type=Number(0.1, 3600), default=None,  # None: the lookup's 15 s
                     help=N_("seconds a Hub lookup may take in all (default 15; then exit 75: retry later)")),
        click.option("--verbose", "-v", is_flag=True, help=N_("show the Hub client's log lines and request counts")),
        click.option("--json", "as_json", is_flag=True, help=N_("print the JSON contract")),
        click.option("--text", "also_text", is_flag=True, help=N_("with --json: also print the human report on stderr")),
        click.option("--brief", is_flag=True, help=N_("JSON with only the verdict, the deployment, memory and speed "
                                                     "(implies --json; see fitprobe schema --brief)")),
        click.option("--fields", default=None, help=N_("JSON with only these top-level fields, e.g. verdict,memory "
                                                       "(implies --json)")),
        click.option("--require-context", type=int, default=None,
                     help=N_("gate: the plan must serve this many tokens per sequence (sizes at least this context)")),
        click.option("--require-tps", type=positive(1e6), default=None,
                     help=N_("gate: decode tokens/s per sequence the plan must reach")),
        click.option("--strict", is_flag=True, help=N_("gate: a 'tight' verdict fails")),
        click.option("--verify", is_flag=True, help=N_("run llama.cpp's llama-fit-params on this model and quant (a sparse "
                                                       "GGUF, no download) and compare")),
        click.option("--llama-fit-params", "fit_params_path", default=None,
                     help=N_("path of llama-fit-params (default: PATH)")),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


class Size(click.ParamType):
    """A memory size: 2GiB, 1500MB, 512MiB, 10GB, a bare number is GiB; at most 1 PiB. Converts to bytes."""

    name = "size"
    UNITS = {"gib": 1 << 30, "gb": 10**9, "mib": 1 << 20, "mb": 10**6, "b": 1, "": 1 << 30}

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        raw = str(value).strip().lower().replace(" ", "")
        num = raw.rstrip("abcdefghijklmnopqrstuvwxyz")
        try:
            number = float(num)
        except ValueError:
            number = math.nan
        if raw[len(num):] not in self.UNITS or not 0 <= number < math.inf:
            self.fail(i18n._("%(value)s is not a size like 2GiB or 1500MB") % {"value": repr(value)}, param, ctx)
        size = number * self.UNITS[raw[len(num):]]
        if size > 1 << 50:
            self.fail(i18n._("%(value)s is more than 1 PiB: not a memory margin") % {"value": repr(value)}, param, ctx)
        return int(size)


SIZE = Size()


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


class Group(LazyGroup):
    """The command group: every error ends as one line on stderr and its kind's exit code."""

    parse_only = False  # set while the arguments are parsed again for the English error text

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        previous = i18n.language()
        try:
            return self._main(args, prog_name, complete_var, standalone_mode, **extra)
        finally:  # the language is the run's: a caller in the same process gets its own back
            i18n.set_language(previous)

    def _main(self, args, prog_name, complete_var, standalone_mode, **extra):
        argv = list(sys.argv[1:] if args is None else args)
        as_json = "--json" in argv
        try:
            i18n.set_language(i18n.choose(_lang_argument(argv)))  # first, so that every message is translated
            localize(self)
        except errors.FitprobeError as exc:
            report_error(exc, as_json=as_json)
        with i18n.click_speaks(i18n.language()):  # click's own words (Usage:, its errors) too
            try:
                rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            except errors.FitprobeError as exc:
                report_error(exc, as_json=as_json)
            except _NO_ARGS_HELP as exc:  # `fitprobe` alone: the help page, as click shows it
                exc.show()
                sys.exit(exc.exit_code)
            except click.ClickException as exc:  # bad option or argument: one line, not the usage page
                shown = _usage_message(exc)
                error = errors.UsageError(self._english_usage(argv, prog_name, shown) if as_json else shown)
                error.text = shown  # what the reader reads; the JSON object stays English
                report_error(error, as_json=as_json)
            except (click.exceptions.Abort, KeyboardInterrupt):
                report_error(errors.FitprobeError(msg("interrupted"), errors.INTERRUPTED), as_json=False)
            except OSError as exc:
                if exc.errno not in _OUTPUT_ERRNOS:
                    raise
                report_error(errors.FitprobeError(msg("cannot write the output: %(reason)s",
                                                      reason=os.strerror(exc.errno)), errors.OUTPUT),
                             as_json=False)
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv

    def _english_usage(self, argv: list[str], prog_name: str | None, shown: str) -> str:
        """click's message for this usage error in English, for the JSON error object (which never changes
        with the language): the same arguments parsed again in English, no command run. click words parts
        of a message when it raises it, so the translated exception cannot be worded again afterwards.
        An error a command's body raised (a `msg()` sentence, English already) is `shown` as it is."""
        lang = i18n.language()
        if lang == i18n.DEFAULT:
            return shown
        i18n.set_language(i18n.DEFAULT)
        self.parse_only = True
        try:
            with i18n.click_speaks(i18n.DEFAULT):
                try:
                    super().main(argv, prog_name, standalone_mode=False)
                except click.ClickException as exc:
                    return _usage_message(exc)  # worded (format_message) while click speaks English
        finally:
            self.parse_only = False
            i18n.set_language(lang)
        return shown

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is not None:
            localize(command)
            if self.parse_only:  # parse its options, run nothing
                command = copy.copy(command)
                command.callback = None
        return command


LANG_OPTION_HELP = N_("language of the text: en, es, de or zh (default: LC_ALL, LC_MESSAGES, LANG)")


def localize(command: click.Command) -> None:
    """Give a command the --lang option (read before parsing, by Group.main) and its help texts in the
    active language (they are msgids, marked with N_ where they are written; the msgids are kept, so
    one process can show several languages)."""
    if not any(p.name == "lang" for p in command.params):
        command.params.append(click.Option(["--lang"], metavar="LANG", expose_value=False, help=LANG_OPTION_HELP))
        # -h/--help as a parameter of its own: click words the help of its built-in one once per command
        command.add_help_option = False
        command.params.append(click.Option(["-h", "--help"], is_flag=True, expose_value=False, is_eager=True,
                                           callback=_show_help, help=N_("Show this message and exit.")))
    items = [command, *command.params]
    msgids = command.__dict__.setdefault("_help_msgids", [getattr(i, "help", None) for i in items])
    for item, msgid in zip(items, msgids):
        if msgid:
            item.help = i18n._(msgid)


def _show_help(ctx: click.Context, _param, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(ctx.get_help(), color=ctx.color)
        ctx.exit()


def _lang_argument(argv: list[str]) -> str | None:
    """The value of --lang anywhere before `--` (None when absent; click reports a missing value)."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--lang" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--lang="):
            return arg[len("--lang="):]
    return None


_OUTPUT_ERRNOS = {errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT}
_NO_ARGS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2


def _usage_message(exc: click.ClickException) -> str:
    message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        return msg("%(message)s (see: %(command)s --help)", message=message, command=ctx.command_path)
    return message


def report_error(exc: errors.FitprobeError, *, as_json: bool) -> None:
    """One line on stderr; with --json also the error object on stdout. Exits with the kind's code."""
    lines = []
    if as_json:
        import json

        lines.append((sys.stdout, json.dumps(exc.as_dict())))
    lines.append((sys.stderr, i18n._("error: %(message)s") % {"message": i18n.say(exc.text)}))
    for stream, text in lines:
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):  # stdout full or closed: the exit code still says it
            _silence(stream)
    if exc.kind is errors.OUTPUT:
        _silence(sys.stdout)
    sys.exit(exc.code)


def _silence(stream) -> None:
    """Point a failed stream at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError, AttributeError):
        pass



OPTIONAL_COMMANDS = {
    "fit": "fitprobe.cmd_fit:fit_command",
    "simulate": "fitprobe.cmd_simulate:simulate_command",
    "probe": "fitprobe.cmd_probe:probe_command",
    "list": "fitprobe.cmd_list:list_command",
    "report": "fitprobe.cmd_report:report_command",
    "schema": "fitprobe.cmd_schema:schema_command",
    "serve": "fitprobe.cmd_serve:serve_command",
}


def _show_version(ctx: click.Context, _param, value: bool) -> None:
    """--version (click's version_option words its line when the module is imported, before --lang is read)."""
    if value and not ctx.resilient_parsing:
        click.echo(i18n._("%(prog)s, version %(version)s") % {"prog": "fitprobe", "version": __version__})
        ctx.exit()


@click.group(cls=Group, lazy=OPTIONAL_COMMANDS, context_settings={"help_option_names": ["-h", "--help"]},
             help=N_("Will this LLM run on this hardware, how well, and with which launch flags?"))
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help=N_("Show the version and exit."))
def main():
    """The command group; its help text is the msgid above (translated by `localize`)."""


@main.command(help=N_("Size MODEL on named hardware (bundled name, HF id, directory, config.json or .gguf)."))
@click.argument("model")
@click.option("--gpu", required=True, help=N_("catalog GPU name (e.g. 'RTX 4090', 'H100 SXM', 'M4 Max'), or 'cpu'"))
@click.option("--gpus", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True,
              help=N_("number of identical GPUs"))
@click.option("--memory-gib", type=GIB_AMOUNT, default=None,
              help=N_("memory of each GPU (a device the catalog lacks, or override)"))
@size_options
def plan(model, gpu, gpus, **opts):
    from fitprobe import commands

    commands.run_plan("plan", model, gpu=gpu, gpus=gpus, **opts)


@main.command(help=N_("Size MODEL on this machine: probe its GPUs and RAM, then plan (idle and right now)."))
@click.argument("model")
@click.option("--gpu", default=None, help=N_("override the probe with a catalog GPU name (or 'cpu')"))
@click.option("--gpus", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True,
              help=N_("with --gpu: number of identical GPUs"))
@click.option("--expect-gpus", type=click.IntRange(0, MAX_GPUS), default=None,
              help=N_("hardware gate: exit 4 when the probe sees fewer GPUs than this"))
@click.option("--gate-on", type=click.Choice(["now", "idle"]), default="now", show_default=True,
              help=N_("judge the verdict and gate on free memory right now, or on the idle device"))
@size_options
def check(model, gpu, gpus, **opts):
    from fitprobe import commands

    commands.run_check(model, gpu=gpu, gpus=gpus, **opts)


def entry() -> None:
    """Console entry point: no traceback ever reaches a user (FITPROBE_DEBUG=1 shows it)."""
    try:
        main()
    except SystemExit:
        raise
    except Exception as exc:  # a bug: say so in one line instead of a traceback
        if os.environ.get("FITPROBE_DEBUG"):
            raise
        error = f"{type(exc).__name__}: {exc}"
        message = msg("internal error: %(error)s (set FITPROBE_DEBUG=1 for details)", error=error)
        report_error(errors.FitprobeError(message, errors.INTERNAL), as_json="--json" in sys.argv[1:])
    finally:
        _spare_exit_collections()


def _spare_exit_collections() -> None:
    """The process is about to exit: move every live object out of the cyclic collector's reach, so
    the interpreter's shutdown collections do not walk them all (tens of ms of a `plan` answer in
    scripts/bench.py on a 2-core machine). Memory goes back to the system at exit either way; atexit
    handlers and the final flush of stdout/stderr still run."""
    import gc

    gc.freeze()

