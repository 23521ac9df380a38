#!/usr/bin/env python3
"""Benchmarks: the full catalog sweep (every model x GPU x format x six contexts) and the cold
start of `fitprobe plan`. Reports the median of several runs.

    python scripts/bench.py [--runs 5]

The sweep sizes each (model, format, context) once with `estimate` on llama.cpp, single device
(a llama.cpp single-device plan does not depend on which GPU it is), then judges it against every
catalog GPU with the verdict's own rule (`status_of`).
"""
from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072)


def sweep() -> tuple[int, float, dict[str, int]]:
    from fitprobe.catalogs.gpus import load_gpus
    from fitprobe.catalogs.models import load_models
    from fitprobe.catalogs.quants import quant_table
    from fitprobe.estimator.config import spec_from_config
    from fitprobe.estimator.hardware import Hardware
    from fitprobe.estimator.kv import kv_cache
    from fitprobe.estimator.memory import estimate
    from fitprobe.estimator.quant import weight_bytes
    from fitprobe.estimator.settings import RunSettings
    from fitprobe.app import error_band
    from fitprobe.estimator.verdict import status_of

    start = time.perf_counter()
    band = error_band()
    table = quant_table()
    devices = [g.device() for g in load_gpus() if g.memory_gib]
    usable = [Hardware(devices=[d]).usable_bytes(d) for d in devices]
    big = [d.memory_bytes >= 70 << 30 and "a100" not in d.name.lower() for d in devices]
    # vLLM's batch defaults (and so its activation peak) differ for >= 70 GiB GPUs: one reference per class
    references = {False: Hardware(devices=[devices[big.index(False)]]), True: Hardware(devices=[devices[big.index(True)]])}
    counts = {"fits": 0, "tight": 0, "exceeds": 0}
    n = 0
    for entry in load_models():
        spec = spec_from_config(entry.config, name=entry.name)
        settings = [RunSettings(context=c) for c in CONTEXTS]
        caches = [kv_cache(spec, st) for st in settings]
        paged = [RunSettings(context=c, engine="vllm", kv_cache_dtype="auto") for c in CONTEXTS]
        paged_caches = [{k: kv_cache(spec, st, max_num_batched_tokens=8192 if k else 2048) for k in references}
                        for st in paged]
        for fmt in table.formats:
            w = weight_bytes(spec, fmt, table)
            if fmt.kind == "checkpoint":  # llama.cpp does not load these: sized for vLLM, per device class
                for st, kvs in zip(paged, paged_caches):
                    need = {k: _need(estimate(spec, fmt, table, st, hw, weights=w, kv=kvs[k]), band)
                            for k, hw in references.items()}
                    for u, b in zip(usable, big):
                        counts[status_of(need[b][0], u, band, uncertainty=need[b][1])] += 1
                    n += len(usable)
                continue
            for st, kv in zip(settings, caches):
                required, uncertainty = _need(estimate(spec, fmt, table, st, references[False], weights=w, kv=kv), band)
                for u in usable:
                    counts[status_of(required, u, band, uncertainty=uncertainty)] += 1
                n += len(usable)
    return n, time.perf_counter() - start, counts


def _need(mem, band) -> tuple[int, int]:
    """(bytes the device needs, the plan's own error band in bytes), as the verdict computes them."""
    d = mem.per_device[0]
    return d.total_bytes, band.bytes_for(d.weights_bytes, d.kv_cache_bytes, d.buffers_bytes)


def cold_start(runs: int) -> tuple[list[float], list[float]]:
    """Wall time of a fresh process, as a user sees it after `pip install` (bytecode compiled, which pip
    does and PYTHONDONTWRITEBYTECODE would otherwise prevent). Returned twice: with the catalog
    validation memo warm (every run after the first on a machine) and empty (the first run, which
    validates the bundled catalogs with pydantic)."""
    root = Path(__file__).resolve().parent.parent
    for package in ("fitprobe", "estimator", "catalogs", "probe"):
        compileall.compile_dir(root / package, quiet=1)
    exe = Path(sys.executable).with_name("fitprobe")
    cmd = [str(exe), "plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090"]

    def timed(env) -> float:
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False, env=env)
        return time.perf_counter() - t

    with tempfile.TemporaryDirectory() as memo:
        env = {**os.environ, "FITPROBE_CACHE_DIR": memo}
        timed(env)  # fills the memo
        warm = [timed(env) for _ in range(runs)]
    first = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as memo:
            first.append(timed({**os.environ, "FITPROBE_CACHE_DIR": memo}))
    return warm, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    results = [sweep() for _ in range(args.runs)]
    n, _, counts = results[0]
    secs = statistics.median(r[1] for r in results)
    print(f"sweep: {n:,} estimates (models x GPUs x formats x 6 contexts), median {secs:.2f} s "
          f"over {args.runs} runs = {n / secs:,.0f} estimates/s; verdicts {counts}")
    times, first = cold_start(args.runs)
    print(f"cold start `fitprobe plan llama-3.1-8b-instruct --gpu 'RTX 4090'`: median {statistics.median(times) * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}) over {args.runs} runs; "
          f"first run on a machine (catalogs validated): median {statistics.median(first) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
