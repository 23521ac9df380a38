"""The one way the probe runs a program: time-limited, output-capped, never raising, text or a reason."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass

from fitprobe.estimator.message import Num, msg

DEFAULT_TIMEOUT_S = 8.0
MAX_OUTPUT_BYTES = 1 << 20  # nvidia-smi -q on an 8-GPU MIG node prints ~100 KB; more is not a tool's answer


@dataclass
class RunResult:
    """stdout when the program ran; `reason` says why not. `missing` tells "not installed" apart
    from a tool that is there but failed, hung, crashed or printed more than any real answer."""

    ok: bool
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    reason: str | None = None
    missing: bool = False
    flooded: bool = False

    @property
    def broken(self) -> bool:
        """The tool is there but hung, crashed, could not start or flooded its output."""
        return not self.ok and not self.missing and (self.returncode is None or self.returncode < 0 or self.flooded)


def find_program(name: str, extra_paths: tuple[str, ...] = ()) -> str | None:
    """PATH lookup, then known install places (WSL keeps nvidia-smi in /usr/lib/wsl/lib)."""
    found = shutil.which(name)
    if found:
        return found
    for path in extra_paths:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


class _Capped:
    """Reads a pipe to its end in a thread, keeping the first `limit` bytes (the rest is drained,
    so a tool that floods its output is neither blocked nor allowed to fill our memory)."""

    def __init__(self, pipe, limit: int):
        self.data, self.total, self.limit = bytearray(), 0, limit
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.thread.start()

    def _read(self, pipe) -> None:
        try:
            while chunk := pipe.read(65536):
                self.total += len(chunk)
                room = self.limit - len(self.data)
                if room > 0:
                    self.data += chunk[:room]
        except (OSError, ValueError):
            pass

    def text(self) -> str:
        self.thread.join(1.0)
        return bytes(self.data).decode("utf-8", errors="replace")


def _kill(proc: subprocess.Popen) -> None:
    """The tool and anything it started (a wrapper script's child would keep the pipes open)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        proc.kill()
    try:
        proc.wait(1.0)
    except subprocess.TimeoutExpired:
        pass


def run_command(args: list[str], timeout: float = DEFAULT_TIMEOUT_S, max_output: int = MAX_OUTPUT_BYTES) -> RunResult:
    """Run args[0] with a time limit. A hung tool (a wedged driver makes nvidia-smi hang) is killed."""
    try:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except FileNotFoundError:
        return RunResult(False, reason=msg("%(tool)s not found", tool=args[0]), missing=True)
    except PermissionError as exc:
        return RunResult(False, reason=msg("%(tool)s: permission denied (%(why)s)", tool=args[0], why=exc.strerror or str(exc)))
    except OSError as exc:
        return RunResult(False, reason=msg("%(tool)s: %(exc)s", tool=args[0], exc=exc))
    out, err = _Capped(proc.stdout, max_output), _Capped(proc.stderr, max_output)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return RunResult(False, out.text(), err.text(), None, msg("%(tool)s timed out after %(seconds)ss", tool=args[0], seconds=Num(timeout, "g")))
    stdout, stderr = out.text(), err.text()
    if out.total > max_output:
        return RunResult(False, "", stderr, proc.returncode,
                         msg("%(tool)s printed %(size)s: more than any real answer", tool=args[0],
                             size=Num(out.total / (1 << 20), ".1f", "MiB")), flooded=True)
    if proc.returncode < 0:
        return RunResult(False, stdout, stderr, proc.returncode, msg("%(tool)s crashed (signal %(signal)s)", tool=args[0], signal=str(-proc.returncode)))
    if proc.returncode != 0:
        detail = _first_line(stdout) or _first_line(stderr) or msg("no output")
        return RunResult(False, stdout, stderr, proc.returncode, msg("%(tool)s exited %(code)s: %(detail)s", tool=args[0], code=str(proc.returncode), detail=detail))
    return RunResult(True, stdout, stderr, 0)
