"""Work under a total deadline: Hub lookups and the hardware probe both promise an answer in time.

A `Job` runs a function in a daemon thread, so a request or a vendor tool that hangs past the
deadline is left behind (it dies with the process) instead of holding the answer hostage; a
thread pool would join its workers at exit and wait for exactly the hang we are escaping.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable


DEFAULT_LOOKUP_TIMEOUT_S = 15.0  # a Hub lookup: config, model info and headers take ~1 s on a good network


class DeadlinePassed(TimeoutError):
    """The work did not finish before its deadline."""


class Deadline:
    """A fixed point in time, `seconds` from now."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.started = time.monotonic()
        self.end = self.started + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class Job:
    """`fn()` started now in a daemon thread; `result()` waits for it, at most `timeout` seconds."""

    def __init__(self, fn: Callable[[], Any], name: str = "fitprobe-job"):
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, args=(fn,), name=name, daemon=True).start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for the result
            self._error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float | None) -> Any:
        if not self._done.wait(timeout):
            raise DeadlinePassed
        if self._error is not None:
            raise self._error
        return self._value


def run_within(deadline: Deadline, fn: Callable[[], Any], *, on_slow: Callable[[], None] | None = None,
               slow_after: float = 1.0) -> Any:
    """fn() if it finishes before the deadline (else DeadlinePassed); `on_slow` is called once,
    from this thread, when it is still running after `slow_after` seconds."""
    job = Job(fn)
    if on_slow is not None and slow_after < deadline.remaining():
        try:
            return job.result(slow_after)
        except DeadlinePassed:
            on_slow()
    return job.result(deadline.remaining())


@dataclass
class Lookup:
    """The budget of one model resolution's network lookups (every Hub request it makes, base model
    and GGUF repos included): a total deadline, a callback when it runs long, the client's own logs
    only when verbose, and how many requests it sent (`fitprobe -v` prints them)."""

    timeout: float = DEFAULT_LOOKUP_TIMEOUT_S
    on_slow: Callable[[], None] | None = None
    verbose: bool = False
    slow_after: float = 1.0
    requests: int = 0
    progress_shown: bool = False
    deadline: Deadline | None = field(default=None, repr=False)

    def start(self) -> Deadline:
        if self.deadline is None:
            self.deadline = Deadline(self.timeout)
        return self.deadline
