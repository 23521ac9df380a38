#!/usr/bin/env python3
"""The CPU speed model against the real llama.cpp on this machine.

    .venv/bin/python scripts/cpu_speed_check.py --bench /path/to/llama-bench [--models ...] [--threads N]
        [--ram-bw GBS] [--reps 3] [--quant Q4_K_M]

For each model, a GGUF with the model's real tensor inventory and quantization mix is written
(fitprobe.sparse_gguf: the header and a zero-filled data region; the kernels' speed does not depend on the
weights' values) and run by llama-bench: pp512 and tg128 at -t N, -lm none (no mmap) so that every weight is read
into RAM as a downloaded model would be. The same runs are estimated the way scripts/speed_accuracy.py
estimates a published CPU point (its `Case`, with the fitted constants of speed_calibration.json): N
threads and the RAM bandwidth `fitprobe probe --bench` measures here (or --ram-bw). Prints both and the
error; exit 0. The clock is the probe's (--cpu-ghz overrides). Nothing here calibrates: a machine's own runs are not a public source.

llama-bench must be a speed build: Release, -O3, GGML_NATIVE=ON (the tests' build in
scripts/build_llama_cpp.sh is -O1 and portable, for the rules only), e.g.
    cmake -S llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON && \\
    cmake --build build --target llama-bench
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from speed_accuracy import Case

from fitprobe.catalogs.quants import quant_table
from fitprobe.catalogs.resolve import resolve
from fitprobe.catalogs.speed_calibration import Point, load_calibration
from fitprobe.estimator.quant import tensor_types
from fitprobe.sparse_gguf import write_sparse_gguf

MODELS = ("llama-3.2-1b-instruct", "llama-3.2-3b-instruct", "llama-3.1-8b-instruct")
GIB = 1 << 30


def run_bench(bench: str, gguf: Path, threads: int, reps: int, timeout: float) -> dict[str, float]:
    """llama-bench's mean tokens/s of pp512 and tg128 ({'prefill': .., 'decode': ..})."""
    cmd = [bench, "-m", str(gguf), "-t", str(threads), "-p", "512", "-n", "128", "-r", str(reps), "-lm", "none",
           "-o", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout
    rows = json.loads(out)
    return {("prefill" if r["n_prompt"] else "decode"): r["avg_ts"] for r in rows}


def estimate(model: str, quant: str, kind: str, tps: float, threads: int, ram_bw: float, file_gib: float,
             ghz: float | None, arch: str | None) -> float:
    tokens = 512 if kind == "prefill" else 128
    p = Point(id=f"here-{model}-{kind}", model=model, quant=quant, file_gib=file_gib, engine="llama.cpp",
              backend="cpu", backend_label="this machine", kind=kind, tps=tps, tokens=tokens, threads=threads,
              ram_bw_gbs=ram_bw, cpu_ghz=ghz, cpu_arch=arch or "x86_64", source="this machine")
    return Case(p).estimate(load_calibration())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="a native -O3 llama-bench")
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--quant", default="Q4_K_M")
    ap.add_argument("--threads", type=int, default=None, help="default: the probe's physical cores")
    ap.add_argument("--ram-bw", type=float, default=None, help="GB/s (default: measured as probe --bench does)")
    ap.add_argument("--cpu-ghz", type=float, default=None, help="default: the probe's reading")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one llama-bench run may take")
    args = ap.parse_args(argv)

    from fitprobe.probe.cpu import read_cpu
    from fitprobe.probe.membw import measure_copy_bandwidth
    from fitprobe.probe.to_hardware import core_class

    cpu = read_cpu()
    threads = args.threads or cpu.physical_cores or cpu.logical_cores or os.cpu_count()
    if args.ram_bw:
        ram_bw, how = args.ram_bw, "--ram-bw"
    else:
        ram_bw, how = measure_copy_bandwidth()
    print(f"CPU: {cpu.model} ({cpu.physical_cores} cores / {cpu.logical_cores} threads; flags {' '.join(cpu.flags)})")
    ghz = args.cpu_ghz or cpu.max_ghz
    arch = core_class(cpu)
    print(f"threads {threads} at {ghz or 'an unknown'} GHz ({arch}); RAM bandwidth {ram_bw:.1f} GB/s ({how})")
    print(f"{'model':<26}{'kind':<9}{'llama-bench':>12}{'fitprobe':>10}{'error':>8}")
    table = quant_table()
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            spec = resolve(model).spec
            fmt = table.find(args.quant)
            gguf = Path(tmp) / f"{model}.gguf"
            size = write_sparse_gguf(spec, gguf, tensor_types(spec, fmt))
            measured = run_bench(args.bench, gguf, threads, args.reps, args.timeout)
            gguf.unlink()
            for kind in ("decode", "prefill"):
                est = estimate(model, fmt.name, kind, measured[kind], threads, ram_bw, size / GIB, ghz, arch)
                err = est / measured[kind] - 1
                errors.append(abs(err))
                print(f"{model:<26}{kind:<9}{measured[kind]:>12.2f}{est:>10.2f}{err:>+8.0%}")
    print(f"median |error| {statistics.median(errors):.0%} over {len(errors)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
