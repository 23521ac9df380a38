"""A short memory-bandwidth reading for `fitprobe probe --bench` (no numpy, a few hundred ms).

How it is measured: each of T threads (up to 32) copies its own pair of buffers (64 MiB per thread,
less past 8 threads so that all buffers stay under 1 GiB; well past any last-level cache) with ctypes.memmove, which runs libc's memmove outside the GIL, so the threads
copy at once. Bandwidth = bytes read + bytes written (2 × copied) / wall time of the slowest thread,
best of a few rounds after a warm-up round (page faults). It is a STREAM-copy-like lower bound of
the peak: what many cores can stream, the quantity CPU decode runs at.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time

from fitprobe.estimator.message import msg

MIB = 1 << 20
MAX_THREADS = 32  # enough to saturate a 12-channel server socket; keeps the buffers under 1 GiB


def _threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def measure_copy_bandwidth(*, threads: int | None = None, mib_per_thread: int | None = None, rounds: int = 3,
                           budget_s: float = 1.5, clock=time.perf_counter) -> tuple[float, str]:
    """(GB/s, how it was measured). Stops early when the time budget is spent."""
    n = threads or min(_threads(), MAX_THREADS)
    mib_per_thread = mib_per_thread or max(8, min(64, 512 // n))  # 2 buffers each: at most 1 GiB in all
    size = mib_per_thread * MIB
    pairs = [(ctypes.create_string_buffer(size), ctypes.create_string_buffer(size)) for _ in range(n)]
    start_all = clock()
    best = 0.0
    done = 0
    for r in range(rounds + 1):  # round 0 warms up: pages get mapped
        barrier = threading.Barrier(n + 1)

        def copy(src, dst):
            barrier.wait()
            ctypes.memmove(dst, src, size)

        workers = [threading.Thread(target=copy, args=p) for p in pairs]
        for w in workers:
            w.start()
        barrier.wait()
        t0 = clock()
        for w in workers:
            w.join()
        elapsed = clock() - t0
        if r and elapsed > 0:
            best = max(best, 2 * size * n / elapsed / 1e9)
            done += 1
        if r and clock() - start_all > budget_s:
            break
    method = msg("memmove copy, %(threads)s threads x %(mib)s MiB, read+write bytes / time, best of %(rounds)s rounds "
                 "(STREAM-copy-like lower bound)", threads=str(n), mib=str(mib_per_thread), rounds=str(done))
    return best, method
