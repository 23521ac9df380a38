#!/usr/bin/env python3
"""The pinned llama.cpp's decode graph per model, beside the kernel count t_fixed scales with.

    .venv/bin/python scripts/graph_ops.py [MODEL ...]     # default: the models of the published decode runs

t_fixed (estimator/speed.py) is charged per step in proportion to `step_kernels`: the weight matrices and norm
vectors a step applies, 290 on Llama-2-7B. This script asks the real engine what a step runs instead: for each
model a GGUF with its real tensor inventory (fitprobe.sparse_gguf, data left sparse) is loaded by the pinned
llama-server with GGML_SCHED_DEBUG=2 and -lv 5, and the first 1-token graph it reserves is read from
ggml-backend.cpp's node listing (views are left out there: they launch nothing). Prints each model's
operations, their ratio to Llama-2-7B's beside step_kernels' ratio, and the operations by kind; exit 0.
A deadline of --timeout seconds holds per model. Nothing here calibrates.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fitprobe.catalogs.models import load_models
from fitprobe.catalogs.speed_calibration import POINTS_PATH
from fitprobe.estimator.config import spec_from_config
from fitprobe.estimator.quant import source_types
from fitprobe.estimator.spec import ModelSpec
from fitprobe.estimator.speed import step_kernels
from fitprobe.llama_tools import find_bin_dir
from fitprobe.sparse_gguf import write_sparse_gguf

REFERENCE = "llama-2-7b-hf"
_NODE = re.compile(r"node #\s*\d+ \(\s*([^)]*)\):")


def decode_graph_ops(log: str) -> collections.Counter:
    """Operations of the first 1-token graph llama.cpp reserves, by kind, from GGML_SCHED_DEBUG=2's listing."""
    lines = log.splitlines()
    start = next((i for i, line in enumerate(lines) if "n_tokens =    1" in line), None)
    ops: collections.Counter = collections.Counter()
    if start is None:
        return ops
    for line in lines[start + 1:]:
        if "graph_reserve" in line:
            break
        m = _NODE.search(line)
        if m:
            ops[m.group(1).strip()] += 1
    return ops


def measure(server: Path, spec: ModelSpec, workdir: Path, timeout_s: float) -> collections.Counter:
    """The decode graph's operations of llama-server loading `spec`'s GGUF, killed once it listens (or at the
    deadline)."""
    gguf, log_path = workdir / f"{spec.name}.gguf", workdir / f"{spec.name}.log"
    write_sparse_gguf(spec, gguf, source_types(spec))
    env = dict(os.environ, GGML_SCHED_DEBUG="2")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([str(server), "-m", str(gguf), "-c", "512", "-b", "512", "-ub", "512", "-np", "1",
                                 "-t", "1", "-lv", "5", "--no-warmup", "--port", "0"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                time.sleep(1)
                if "listening" in log_path.read_text(errors="replace"):
                    break
        finally:
            proc.kill()
            proc.wait()
    ops = decode_graph_ops(log_path.read_text(errors="replace"))
    gguf.unlink()
    return ops


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per model (default 300)")
    args = ap.parse_args(argv)
    bin_dir = find_bin_dir()
    if bin_dir is None:
        print("graph_ops: no pinned llama.cpp build (scripts/build_llama_cpp.sh)", file=sys.stderr)
        return 2
    models = args.models or sorted({p["model"] for p in json.loads(POINTS_PATH.read_text())["points"]
                                    if p["kind"] == "decode"})
    names = [REFERENCE] + [m for m in models if m != REFERENCE]
    entries = {e.name: e for e in load_models()}
    unknown = [n for n in names if n not in entries]
    if unknown:
        print(f"graph_ops: not in the bundled catalog: {', '.join(unknown)}", file=sys.stderr)
        return 2
    specs = {n: spec_from_config(entries[n].config, name=n, hf_id=entries[n].hf_id) for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        counts = {n: measure(bin_dir / "llama-server", specs[n], Path(tmp), args.timeout) for n in names}
    ref_ops = sum(counts[REFERENCE].values())
    ref_kernels = step_kernels(specs[REFERENCE])
    print(f"{'model':<36}{'ops':>6}{'ops ratio':>10}{'step_kernels ratio':>20}  by kind")
    for n in names:
        total = sum(counts[n].values())
        if not total:
            print(f"{n:<36}{'-':>6}  (no 1-token graph in the log)")
            continue
        kernels = step_kernels(specs[n])
        kinds = " ".join(f"{k}={v}" for k, v in counts[n].most_common())
        print(f"{n:<36}{total:>6}{total / ref_ops:>10.2f}{kernels / ref_kernels:>20.2f}  {kinds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
