"""The one way the probe runs a program: time-limited, never raising, text or a reason."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

DEFAULT_TIMEOUT_S = 8.0


@dataclass
class RunResult:
    """stdout when the program ran; `reason` says why not (missing, hung, failed, crashed)."""

    ok: bool
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    reason: str | None = None


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


def run_command(args: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> RunResult:
    """Run args[0] with a time limit. A hung tool (a wedged driver makes nvidia-smi hang) is killed."""
    try:
        proc = subprocess.run(
            args,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        return RunResult(False, reason=f"{args[0]} not found")
    except subprocess.TimeoutExpired:
        return RunResult(False, reason=f"{args[0]} timed out after {timeout:g}s")
    except PermissionError as exc:
        return RunResult(False, reason=f"{args[0]}: permission denied ({exc.strerror or exc})")
    except OSError as exc:
        return RunResult(False, reason=f"{args[0]}: {exc}")
    if proc.returncode < 0:
        return RunResult(
            False, proc.stdout, proc.stderr, proc.returncode, f"{args[0]} crashed (signal {-proc.returncode})"
        )
    if proc.returncode != 0:
        detail = _first_line(proc.stdout) or _first_line(proc.stderr) or "no output"
        return RunResult(
            False, proc.stdout, proc.stderr, proc.returncode, f"{args[0]} exited {proc.returncode}: {detail}"
        )
    return RunResult(True, proc.stdout, proc.stderr, 0)
