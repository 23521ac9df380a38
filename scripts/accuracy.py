#!/usr/bin/env python3
"""Estimate vs measurement, per component, over catalogs/data/measured_runs.json.

Prints one line per compared component (measured, estimated, signed error), then the median and
p90 absolute error per component. `--write-band` stores the p90 error per component,
all engines and per engine family, in catalogs/data/error_band.json, which the verdict uses for 'tight'.

    python scripts/accuracy.py [--write-band]
"""
from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from datetime import date

from fitprobe.catalogs import data_path
from fitprobe.estimator.fields import replace
from fitprobe.catalogs.gpus import find_gpu
from fitprobe.catalogs.models import find_model
from fitprobe.catalogs.quants import quant_table
from fitprobe.catalogs.resolve import native_format
from fitprobe.estimator.buffers import (llama_cpp_compute_bytes, vllm_activation_bytes, vllm_batch_defaults,
                                        vllm_mxfp4_pad_factor, vllm_overhead_bytes)
from fitprobe.estimator.config import spec_from_config
from fitprobe.estimator.hardware import Device, Hardware
from fitprobe.estimator.kv import kv_cache
from fitprobe.estimator.memory import estimate
from fitprobe.estimator.quant import weight_bytes
from fitprobe.estimator.settings import RunSettings

MIB, GIB, GB = 1 << 20, 1 << 30, 10**9
QUANT_ALIASES = {"MXFP4_MOE": "MXFP4", "F16": "BF16"}


def _fmt(name: str | None):
    if not name:
        return None
    return quant_table().find(QUANT_ALIASES.get(name.upper(), name))


def _file_bytes(m: dict) -> float | None:
    if m.get("file_size_bytes"):
        return m["file_size_bytes"]
    if m.get("file_size_gib"):
        return m["file_size_gib"] * GIB
    if m.get("file_size_gb"):
        return m["file_size_gb"] * GB
    return None


def compare_run(run: dict) -> list[tuple[str, float, float]]:
    """(component, measured bytes, estimated bytes) for everything this run measured."""
    entry = find_model(run["model"])
    if entry is None:
        return []
    config = entry.config
    if run.get("checkpoint_quantization"):  # the run loaded a pre-quantized checkpoint of the bundled model
        q = {k: v for k, v in run["checkpoint_quantization"].items() if k != "source"}
        config = {**config, "quantization_config": q}
    spec = spec_from_config(config, name=entry.name)
    s, m = run.get("settings") or {}, run["measured"]
    fmt = _fmt(run.get("quant"))
    out: list[tuple[str, float, float]] = []
    if run["kind"] == "gguf-file" and fmt is not None and _file_bytes(m):
        out.append(("gguf_file", _file_bytes(m), weight_bytes(spec, fmt, quant_table()).total))
    if run["kind"] == "llama.cpp-log" and s.get("n_ctx"):
        np_ = s.get("n_seq_max") or 1
        unified = s.get("kv_unified")
        ctx = s["n_ctx"] if unified or np_ == 1 else s["n_ctx"] // np_
        st = RunSettings(context=ctx if not unified else s["n_ctx"] // np_ if np_ > 1 else ctx,
                         batch=np_, kv_cache_dtype=s.get("type_k") or "f16", ubatch=s.get("n_ubatch") or 512,
                         flash_attention=bool(s.get("flash_attn")))
        if unified and np_ > 1:  # one stream of n_ctx cells shared by all sequences
            st = replace(st, context=s["n_ctx"], batch=1)
        kv = kv_cache(spec, st)
        attn = kv.full + kv.windowed + kv.latent + kv.indexer
        if m.get("kv_cache_mib") is not None:
            out.append(("kv_cache", m["kv_cache_mib"] * MIB, attn))
        if m.get("recurrent_state_mib") is not None:
            rec = kv_cache(spec, replace(st, batch=np_)).recurrent
            out.append(("recurrent_state", m["recurrent_state_mib"] * MIB, rec))
        if fmt is not None and (m.get("model_buffer_gpu_mib") is not None or m.get("model_buffer_cpu_mib") is not None):
            gpu = Hardware(devices=[Device(name="gpu", memory_bytes=1 << 50)])
            ngl = s.get("n_gpu_layers")
            mem = estimate(spec, fmt, quant_table(), replace(st, gpu_layers=ngl), gpu)
            if m.get("model_buffer_gpu_mib") is not None:
                out.append(("model_buffer", m["model_buffer_gpu_mib"] * MIB, mem.weights_bytes))
            if m.get("model_buffer_cpu_mib") is not None:
                out.append(("model_buffer_cpu", m["model_buffer_cpu_mib"] * MIB, mem.host_weights_bytes))
        if m.get("compute_buffer_mib") is not None and (s.get("n_gpu_layers") is None or s.get("n_gpu_layers", 0) > 0):
            out.append(("compute_buffer", m["compute_buffer_mib"] * MIB,
                        llama_cpp_compute_bytes(spec, st, kv.cells_full)))
    if run["kind"] == "vllm-log":
        native = quant_table().find(native_format(spec) if run.get("quant") in (None, "MXFP4", "BF16") else run["quant"])
        tp = s.get("tensor_parallel_size") or 1
        w = weight_bytes(spec, native, quant_table()) if native is not None else None
        est_weights = None
        if w is not None:
            padded = sum(w.experts_per_layer) * (vllm_mxfp4_pad_factor(spec, tp) - 1)
            est_weights = (w.total + w.vision + padded) / tp
        if m.get("weights_gib") and est_weights:
            out.append(("vllm_weights", m["weights_gib"] * GIB, est_weights))
        total = m.get("total_gpu_memory_gib")
        entry = find_gpu(re.sub(r"^NVIDIA\s+|\s*\(x\d+\)$", "", run.get("gpu") or ""))  # "NVIDIA H100 (x4)" -> "H100"
        if not total:  # not in the excerpt: the CUDA-visible total of the catalog's card (nvidia-smi Total - Reserved)
            total = entry.cuda_total_mib * MIB / GIB if entry and entry.cuda_total_mib else None
        # vLLM >= 0.21 counts its CUDA graphs in the budget; every run here predates it
        graphs = False
        batched, seqs = vllm_batch_defaults(int((total or 0) * GIB), run.get("gpu") or "")
        if s.get("max_model_len") and s["max_model_len"] < 32768:
            batched = max(batched, s["max_model_len"])  # no chunked prefill below 32K: one full prompt
        overhead = vllm_overhead_bytes(tp, int((total or 0) * GIB), nvlink=bool(entry and entry.nvlink),
                                       cuda_graphs=graphs)
        if m.get("non_torch_memory_gib") is not None and total:
            out.append(("vllm_non_torch", m["non_torch_memory_gib"] * GIB, overhead))
        activation = m.get("activation_peak_gib")
        if activation is None and m.get("peak_torch_memory_gib") and m.get("weights_gib"):
            activation = m["peak_torch_memory_gib"] - m["weights_gib"]  # V0 logs the peak with the weights in it
        if activation is not None:
            out.append(("vllm_activation", activation * GIB, vllm_activation_bytes(spec, tp, batched, seqs)))
        weights = m["weights_gib"] * GIB if m.get("weights_gib") else est_weights
        if m.get("kv_cache_gib") is not None and total and weights and s.get("gpu_memory_utilization"):
            act = vllm_activation_bytes(spec, tp, batched, seqs) + overhead
            budget = total * GIB * s["gpu_memory_utilization"] - weights - act
            out.append(("vllm_kv_budget", m["kv_cache_gib"] * GIB, budget))
            # what vLLM kept for activations, non-torch memory (and graphs): the buffer estimate itself
            kept = total * GIB * s["gpu_memory_utilization"] - weights - m["kv_cache_gib"] * GIB
            out.append(("vllm_overhead", kept, act))
    return out


def _pct(values: list[float], q: float) -> float:
    """The q-quantile by nearest rank (the ceil(q*n)-th smallest value): never below the data's own
    q-quantile, so with fewer than 10 comparisons the p90 is the worst error seen, not an interpolation
    between the two worst."""
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values), max(1, math.ceil(q * len(values)))) - 1]


# the components each band covers (see error_band.json "source"); the engine family of a run's kind
BAND = {"weights": ("vllm_weights", "model_buffer", "model_buffer_cpu"), "kv_cache": ("kv_cache", "recurrent_state"),
        "buffers": ("compute_buffer", "vllm_overhead")}
FAMILY = {"llama.cpp-log": "llama.cpp", "gguf-file": "llama.cpp", "vllm-log": "vllm"}
FLOOR = 0.005  # 0.5 %, the KV target


def bands(errors: dict[str, dict[str, list[float]]]) -> tuple[dict, dict, dict]:
    """(all-engine band, per-engine bands, per-engine counts): the p90 |error| of each band component;
    an engine family with no run for a component takes the all-engine figure."""
    def p90(values: list[float]) -> float:
        return round(max(_pct(values, 0.9), FLOOR), 4)

    pooled = {c: [e for fam in errors.values() for n in names for e in fam.get(n, [])] for c, names in BAND.items()}
    overall = {c: p90(v) for c, v in pooled.items()}
    per_engine, counts = {}, {}
    for fam, comps in sorted(errors.items()):
        values = {c: [e for n in names for e in comps.get(n, [])] for c, names in BAND.items()}
        per_engine[fam] = {c: p90(v) if v else overall[c] for c, v in values.items()}
        counts[fam] = {c: len(v) for c, v in values.items()}
    return overall, per_engine, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-band", action="store_true", help="store the p90 errors as the verdict's bands")
    args = parser.parse_args(argv)
    runs = json.loads(data_path("measured_runs.json").read_text())["runs"]
    errors: dict[str, dict[str, list[float]]] = {}  # engine family -> component -> |error|
    skipped = []
    print(f"{'run':<52}{'component':<17}{'measured':>12}{'estimated':>12}{'error':>9}")
    for run in runs:
        rows = compare_run(run)
        if not rows:
            skipped.append(run["id"])
        fam = errors.setdefault(FAMILY[run["kind"]], {})
        for comp, measured, est in rows:
            err = (est - measured) / abs(measured) if measured else float("nan")
            fam.setdefault(comp, []).append(abs(err))
            print(f"{run['id'][:51]:<52}{comp:<17}{measured / MIB:>10.1f}Mi{est / MIB:>10.1f}Mi{err:>+9.2%}")
    print()
    print(f"{'engine':<11}{'component':<17}{'n':>4}{'median |err|':>14}{'p90 |err|':>11}")
    for fam, comps in sorted(errors.items()):
        for comp, errs in sorted(comps.items()):
            print(f"{fam:<11}{comp:<17}{len(errs):>4}{statistics.median(errs):>14.2%}{_pct(errs, 0.9):>11.2%}")
    totals = [e for fam in errors.values() for c in ("gguf_file", "vllm_weights", "model_buffer", "kv_cache",
                                                      "recurrent_state") for e in fam.get(c, [])]
    print(f"\nmemory total (weights + cache components): n={len(totals)}, median {statistics.median(totals):.2%}, "
          f"p90 {_pct(totals, 0.9):.2%}")
    overall, per_engine, counts = bands(errors)
    print("\nband (p90, floor 0.5 %): " + ", ".join(f"{c} {v:.2%}" for c, v in overall.items()))
    for fam, band in per_engine.items():
        print(f"  {fam}: " + ", ".join(f"{c} {v:.2%} (n={counts[fam][c]})" for c, v in band.items()))
    if skipped:
        print(f"skipped (model not bundled or nothing comparable): {', '.join(skipped)}")
    if args.write_band:
        path = data_path("error_band.json")
        path.write_text(json.dumps({
            "schema": 3,
            "p90_abs_error": overall,
            "engines": per_engine,
            "n": counts,
            "source": "p90 absolute error per component of scripts/accuracy.py over catalogs/data/measured_runs.json "
                      "(weights: the weight buffers vLLM and llama.cpp load, not GGUF file sizes; kv_cache: KV and "
                      "recurrent state; buffers: llama.cpp compute buffers and vLLM's activation + non-torch reserve, "
                      "each relative to its own size); engines: the same over each engine family's own runs "
                      "(llama.cpp: llama.cpp/Ollama logs of GGUF files; vllm: vLLM logs of checkpoints), a component "
                      "without runs there taking the all-engine figure; n: the comparisons behind each; floor 0.5 %",
            "measured_on": date.today().isoformat(), "runs": len(runs),
        }, indent=2) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
