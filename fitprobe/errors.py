"""Error kinds and exit codes, defined once.

Every failure fitprobe reports is a `FitprobeError` carrying one `Kind`: the CLI turns it into one
line on stderr (and, with --json, `{"error": {"code", "kind", "message"}}` on stdout) and exits with
the kind's code; the Python API raises it; a server maps the same kinds. The codes above 64 are the
BSD sysexits a shell script already knows: 70 EX_SOFTWARE, 74 EX_IOERR, 75 EX_TEMPFAIL.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    name: str
    code: int
    meaning: str


FITS = 0  # not errors: the verdict's own codes
EXCEEDS = 1

USAGE = Kind("usage", 2, "an option, argument or environment setting is wrong: fix the call")
MODEL_NOT_FOUND = Kind("model_not_found", 3, "the model is not in the catalog, not a file and not on the Hub "
                                             "(or gated/private for this token)")
MODEL_UNREADABLE = Kind("model_unreadable", 3, "the model's config.json, GGUF header or Hub files cannot be read "
                                               "or hold values no real model has")
HARDWARE = Kind("hardware", 4, "this machine could not be probed: a vendor tool or library is present but failed "
                               "or hung, or fewer devices than --expect-gpus were seen")
OUTPUT = Kind("output", 74, "the answer could not be written (full disk, closed pipe)")
RETRY_LATER = Kind("retry_later", 75, "the Hub was unreachable, too slow or answered with a server error, "
                                      "and nothing usable was cached: retry later")
INTERNAL = Kind("internal", 70, "a bug in fitprobe (FITPROBE_DEBUG=1 shows the traceback)")
INTERRUPTED = Kind("interrupted", 130, "interrupted (Ctrl-C)")

KINDS = (USAGE, MODEL_NOT_FOUND, MODEL_UNREADABLE, HARDWARE, OUTPUT, RETRY_LATER, INTERNAL, INTERRUPTED)


class FitprobeError(Exception):
    """A failure with a kind; the message is one line."""

    kind: Kind = INTERNAL

    def __init__(self, message: str, kind: Kind | None = None):
        super().__init__(" ".join(str(message).split()))
        # What a person reads: the message itself when it is a translatable sentence
        # (fitprobe.estimator.message.msg), else the one-line English text.
        self.text = message if type(message) is not str and str(self) == message else str(self)
        if kind is not None:
            self.kind = kind

    @property
    def code(self) -> int:
        return self.kind.code

    def as_dict(self) -> dict:
        return {"error": {"code": self.kind.code, "kind": self.kind.name, "message": str(self)}}


def message_of(exc: BaseException) -> str:
    """An exception's one-line message, still translatable when it was made with estimator.message.msg."""
    if isinstance(exc, FitprobeError):
        return exc.text
    args = getattr(exc, "args", ())
    return args[0] if len(args) == 1 and isinstance(args[0], str) and args[0] == str(exc) else str(exc)


class UsageError(FitprobeError, ValueError):
    kind = USAGE


class ModelError(FitprobeError, ValueError):
    """The model cannot be resolved: not found (default), unreadable, or the Hub must be retried."""

    kind = MODEL_NOT_FOUND


class HardwareError(FitprobeError, RuntimeError):
    kind = HARDWARE


def exit_codes_table() -> str:
    """Markdown table of the exit codes (README, docs/gate.md and the contract doc show it)."""
    rows = ["| code | kind | meaning |", "|---|---|---|",
            "| 0 | - | fits (or tight, unless `--strict`); with gate options: every requirement holds |",
            "| 1 | - | does not fit, or a `--require-*`/`--strict`/`--min-margin` requirement fails |"]
    rows += [f"| {k.code} | `{k.name}` | {k.meaning} |" for k in KINDS]
    return "\n".join(rows)
