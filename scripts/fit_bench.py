#!/usr/bin/env python3
"""Benchmark of the fit ranking: N synthetic model configs x 6 contexts, estimated and ranked.

    python scripts/fit_bench.py [--models 10000] [--gpu "RTX 4090"] [--seed 0] [--catalog-runs 3]

Each synthetic config is a real bundled config.json (llama, qwen2, qwen3, qwen3_moe, mistral,
gemma2 families) with its widths, depth, heads, vocabulary and experts redrawn, parsed by the same
`spec_from_config`. Each is sized at Q4_K_M on llama.cpp at 4K..128K tokens (`Sizer.size`: weights,
KV, buffers, placement, verdict), turned into a ranking `Candidate` with its decode speed
(`estimate_speed`), and all of them are ranked by `estimator.rank.rank`. Reports estimates per
second (one estimate = one model at one context: memory, verdict and speed) and the ranking time;
then `fitprobe fit` over the bundled catalog (CPU seconds, best of --catalog-runs).
"""
from __future__ import annotations

import argparse
import copy
import random
import time

CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072)
TEMPLATES = ("llama-3.1-8b-instruct", "qwen2.5-7b-instruct", "qwen3-8b", "qwen3-30b-a3b", "mistral-7b-instruct-v0.3",
             "gemma-2-9b-it")


def synthetic_configs(n: int, seed: int) -> list[dict]:
    """n configs: a template with its shape redrawn (head_dim 64/128, GQA groups that divide the heads)."""
    from fitprobe.catalogs.models import find_model

    rng = random.Random(seed)
    templates = [find_model(name).config for name in TEMPLATES]
    out = []
    for i in range(n):
        cfg = copy.deepcopy(templates[i % len(templates)])
        head_dim = rng.choice((64, 128))
        heads = rng.choice((8, 12, 16, 24, 32, 40, 48, 64))
        kv = rng.choice([k for k in (1, 2, 4, 8, heads) if heads % k == 0])
        hidden = heads * head_dim
        cfg.update(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv,
                   num_hidden_layers=rng.randint(8, 80), intermediate_size=int(hidden * rng.uniform(2.5, 4.0)) // 256 * 256,
                   vocab_size=rng.choice((32000, 32768, 128256, 151936, 256000)),
                   max_position_embeddings=rng.choice((4096, 8192, 32768, 131072)))
        if "head_dim" in cfg:
            cfg["head_dim"] = head_dim
        if "num_experts" in cfg:
            cfg["num_experts"] = rng.choice((8, 16, 64, 128))
            cfg["num_experts_per_tok"] = rng.choice((1, 2, 4, 8))
            cfg["moe_intermediate_size"] = int(hidden * rng.uniform(0.25, 1.0)) // 128 * 128 or 128
        out.append(cfg)
    return out


def estimate_all(configs: list[dict], gpu: str):
    from fitprobe.app import catalog_hardware, error_band
    from fitprobe.catalogs.quants import quant_table
    from fitprobe.catalogs.speed_calibration import load_calibration
    from fitprobe.estimator.config import spec_from_config
    from fitprobe.estimator.plan import Sizer
    from fitprobe.estimator.rank import Candidate, RankPolicy, rank, size_points
    from fitprobe.estimator.settings import RunSettings
    from fitprobe.estimator.speed import estimate_speed
    from fitprobe.estimator.tensors import param_counts

    hw = catalog_hardware(gpu, 1, usable_fraction=0.95, ram_bytes=64 << 30)
    table, band, calibration = quant_table(), error_band(), load_calibration()
    fmt = table.find("Q4_K_M")
    start = time.perf_counter()
    candidates = []
    for i, cfg in enumerate(configs):
        spec = spec_from_config(cfg, name=f"synthetic-{i}")
        counts = param_counts(spec)
        sizer = Sizer(spec, table, hw, error_band=band)
        weights = sizer.weights(fmt)[0]
        quality = size_points(counts.text, counts.active) * 0.969
        for ctx in CONTEXTS:
            st = RunSettings(quant=fmt.name, context=ctx)
            mem, verdict, _ = sizer.size(fmt, st)
            speed = estimate_speed(spec, weights, st, hw, mem, calibration=calibration)
            candidates.append(Candidate(
                model=spec.name, params=counts.text, engine="llama.cpp", quant=fmt.name,
                bits_per_weight=weights.total * 8 / max(1, counts.text), context=ctx, status=verdict.status,
                placement="gpu", total_bytes=mem.total_bytes, host_bytes=mem.host_total_bytes,
                margin_bytes=verdict.margin_bytes, decode_tps=speed.decode_tps, prefill_tps=speed.prefill_tps,
                quality=quality))
    estimated = time.perf_counter()
    ranked = rank(candidates, RankPolicy())
    done = time.perf_counter()
    return len(candidates), estimated - start, done - estimated, ranked


def catalog_fit(gpu: str, runs: int) -> float:
    """CPU seconds of the whole bundled catalog ranked (best of `runs`), catalog already parsed."""
    from fitprobe.app import catalog_hardware
    from fitprobe.fitting import FitOptions, catalog_subjects, run_fit

    hw = catalog_hardware(gpu, 1, usable_fraction=0.95, ram_bytes=64 << 30)
    subjects = catalog_subjects()
    best = float("inf")
    for _ in range(runs):
        t = time.process_time()
        run_fit(subjects, hw, opts=FitOptions(), hardware_source="catalog", source="bundled catalog")
        best = min(best, time.process_time() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10_000)
    parser.add_argument("--gpu", default="RTX 4090")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--catalog-runs", type=int, default=3)
    args = parser.parse_args()
    configs = synthetic_configs(args.models, args.seed)
    cpu = time.process_time()
    n, t_est, t_rank, ranked = estimate_all(configs, args.gpu)
    cpu = time.process_time() - cpu
    runs = sum(s.runs for s in ranked)
    print(f"{args.models:,} synthetic configs x {len(CONTEXTS)} contexts on {args.gpu}: {n:,} estimates "
          f"in {t_est:.2f} s wall = {n / t_est:,.0f} estimates/s; ranking them took {t_rank:.3f} s; "
          f"{runs:,} run; CPU {cpu:.2f} s")
    if args.catalog_runs:
        print(f"bundled catalog ranked by `fit` on {args.gpu}: {catalog_fit(args.gpu, args.catalog_runs):.2f} CPU s "
              f"(best of {args.catalog_runs})")


if __name__ == "__main__":
    main()
