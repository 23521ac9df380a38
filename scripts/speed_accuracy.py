"""Speed model vs published benchmarks: fit, in-sample error and leave-one-source-out error.

    .venv/bin/python scripts/speed_accuracy.py           # table + median / p90 absolute errors
    .venv/bin/python scripts/speed_accuracy.py --write   # refit and write the constants into the JSON

The fit (FORMULAS §4) minimises Σ|log(estimate / measured)| by coordinate descent over: per backend
group η, t_fixed, t_moe (latency of the expert kernels), ε (MFU of the decode matrix-vector kernels), prefill
MFU, m½ and κ (the prefill rate lost to few tokens per matmul and per routed expert), π (the share of the empty
columns of llama.cpp's MMQ expert tiles a prompt pays), α (the attention's rate over a deep
context relative to the matmuls'), batched-decode MFU and
the layer-split pipeline share ρ; on CUDA the t_fixed of runs without CUDA graphs (the run's build and GPU
say which) and that of graph builds from before 2026 (a plan pays the recent builds'); per backend the prefill MFU
of builds before 2026 relative to the recent ones' (a plan pays the recent one); per backend the decode bandwidth
share a build gave up per year of its age (a plan pays the newest runs' one); one factor for recurrent /
gated-delta-net models. It is hierarchical: the backend constants are first fitted on the points of every GPU
backend together (the prior), then each backend's on its own points
plus PRIOR_WEIGHT × its log distance from the prior, so a backend that one or two sources measure stays near
what all backends show instead of following one publication to a bound; a backend without points takes
the prior. Under the backend, each chip's bandwidth and compute share (device_factors) is fitted the same way: drawn
towards 1 by PRIOR_WEIGHT × its points per source, so a chip one source measured moves as one point would.
Per quant kernel family φ (decode) and ψ (prefill) relative to the K-quants; one prefill factor for power-shared SoC
GPUs (DGX Spark, Strix Halo) and one for Apple GPUs that multiply on Neural Accelerators (M5 and later); for CPUs
η_cpu, per core class (x86, ARM, Apple) GB/s and GFLOPS per thread per GHz of its clock, and the share of a prompt
that does not split over the threads (Amdahl). Devices with no TFLOPS figure
and no Apple shader rate get an effective rate measured on their own prefill points. Leave-one-source-out refits
everything without the points of one source (one PR, one issue, one benchmark page) and predicts them: how the model
does on a publication it has not seen. Points it cannot predict then (no compute figure left for the device) are
counted apart. Points are used as published: a source never calibrates its own prediction, no point gets its own
factor, and the points left out are listed with the reason in speed_points.json's `excluded`.
`--write` also stores each backend's held-out median and p90 (`held_out`), which every plan shows beside its speed.
"""
from __future__ import annotations

import argparse
import copy
import json
import multiprocessing
import os
import statistics
import sys
from math import exp, log

from fitprobe.catalogs.speed_calibration import (PATH, DeviceFactor, DeviceRate, Point, SpeedCalibration, load_calibration,
                                                 load_points, point_inputs)
from fitprobe.estimator.fields import asdict, replace
from fitprobe.estimator.speed import (CUDA_GRAPHS_MIN_CC, CpuRates, Efficiency, HeldOutError, QuantRates,
                                      apple_gpu_tensor, backend_key, chip_key, cpu_prefill_seconds, decode_parts,
                                      decode_terms, integer_dot_share, overlaps_launches, prefill_seconds,
                                      prefill_terms, quant_family, split_boundaries)

# Bounds keep the fit physical: η ≤ 0.95 of peak; t_fixed within FORMULAS §4.1's ranges (≤ 6 ms);
# MFU ≤ 1.2 of the catalog's dense FP16 figure (AMD's dual-issue figures make > 1 impossible, NVIDIA
# consumer cards' FP16-accumulate rate is 2× the catalogued FP32-accumulate one).
# ε ≥ 0.01: below it even a 4-bit 8B model on a 100 TFLOPS card would be compute bound at batch 1.
# An M5-class GPU's matmuls reach at most 4× its shader rate (A19's matrix FP16 / SIMD FP32 per core, tzakharko).
BOUNDS = {"bandwidth": (0.15, 0.95), "fixed_ms": (0.0, 6.0), "moe_ms": (0.0, 6.0), "compute": (0.03, 1.2),
          "decode_compute": (0.01, 1.0), "batch_compute": (0.03, 1.2), "q_bandwidth": (0.4, 1.6), "q_compute": (0.2, 3.0),
          "cpu_bandwidth": (0.2, 0.95), "soc_compute": (0.1, 1.0), "gbs_per_ghz": (0.3, 12.0), "gflops_per_ghz": (0.5, 100.0),
          "half_tokens": (0.0, 256.0), "expert_compute": (0.1, 1.5), "attention_compute": (0.1, 1.5),
          "recurrent_factor": (0.2, 1.0), "chip_bandwidth": (0.25, 2.0), "chip_compute": (0.1, 3.0), "earlier_compute": (0.3, 2.0),
          "bandwidth_drift": (-0.3, 0.5), "pdl_fixed": (0.2, 1.0), "serial_share": (0.0, 0.1),
          "apple_tensor_compute": (1.0, 4.0)}


# FORMULAS §4.1 [estimate]: t_fixed ≈ 0.3–1 ms on CUDA with graphs, 2–3 ms on Metal. llama.cpp's CUDA
# graphs came in May 2024 and several calibration builds predate them (Jan/May 2024), and t_fixed also
# carries the per-block kernels that read no weights (norms, RoPE, softmax): CUDA and Metal get the top
# of those ranges, 3 ms per Llama-2-7B step (290 kernels); elsewhere up to 6 ms (BOUNDS).
FIXED_MAX = {"llama.cpp/cuda": 3.0, "llama.cpp/metal": 3.0}
# Without multi-device prefill points the pipeline overlap is unknown: none counted (the layer split
# runs the devices one after another, FORMULAS §4.5; the published multi-GPU runs reach 0.05-0.15).
PIPELINE_PRIOR = 0.0
# Hierarchical fit: a backend's constants pay PRIOR_WEIGHT × |log(θ / θ_prior)| on top of Σ|log error|.
# Under Laplace errors that weight is b / τ: b, a point's typical log error once its backend is known
# (in-sample median ≈ 0.05–0.09), over τ, the typical log spread of backends around the prior (η from 0.6 to
# 0.93 around 0.9, t_fixed 2.4–3.6 ms: ≈ 0.2–0.3). Set from those two spreads, not searched for.
PRIOR_WEIGHT = 0.3


# llama.cpp's CUDA step overhead kept falling through 2025-26: small kernels fused (rms_norm with its mul, PR 14800
# merged 2025-07-21; adds with rms_norm, PR 15631; the MoE top-k; muls, PR 21665, Apr 2026; rms_norm + mul + rope,
# PR 26767, Aug 2026) and, on Hopper and newer, kernels overlapping their launches (PDL, PR 22522, May 2026). The
# runs from builds of the pinned build's year fit the t_fixed a plan pays; the graph builds before fit their own
# (earlier_fixed_ms), so they still calibrate η and the rest. Held out, a boundary at the first fusions (2025-08)
# did worse than this one (decode 11.7/32.9 % against 10.7/29.2 %, median/p90) and than none (11.1/30.9 %).
RECENT_SINCE = "2026-01"
# Decode kernels kept gaining build after build on every backend (HIP: RDNA4's own MMVQ table, PR 19478, Feb 2026,
# +10 % tg128 on an R9700), and the sources show it as a slope, not a step: on HIP the runs of May-Oct 2025 builds
# decode 8-20 % below the fit, those of 2026 builds 4-11 % above it. Each backend's decode bandwidth share falls by
# a fitted `bandwidth_drift` per year of build age before the newest runs' month, which is what a plan is priced at;
# so does its ALU rate (a chip whose decode is compute bound gained too: Vulkan on the RTX 5090, Apple's M1 chips).
# Held out (679 points) that gave decode 9.70/25.53 -> 9.24/25.46 %, prefill 14.27/42.63 -> 14.28/43.50 %.
# Held out, a step at RECENT_SINCE instead (Metal x0.92, HIP x0.89, Vulkan x0.94) gave decode 9.2/24.0 %.
DRIFT_ANCHOR = "2026-09"
# llama.cpp's programmatic dependent launch on Hopper and newer (PR 22522, still in review on 2026-05-20): the
# calibration's runs on such GPUs are of March 2026 builds before it (PR 21086, DGX Spark's Nov 2025 page) and of
# June 2026 builds on (PR 24216, PR 26767, issue 28196). The later ones fit the share of t_fixed such a card keeps;
# it comes out at 2.6 times the saving of PR 22522's own A/B (gpt-oss-20b tg128 on an RTX PRO 6000: 0.36 ms a
# step, 0.94 ms priced), so it also holds what these cards' steps lost beyond PDL in those months.
PDL_SINCE = "2026-06"


def build_age(date: str | None) -> float:
    """Years between a run's build and DRIFT_ANCHOR (0 for later or undated runs: 2025+ PR builds)."""
    if date is None:
        return 0.0
    y, m = map(int, date.split("-"))
    ay, am = map(int, DRIFT_ANCHOR.split("-"))
    return max(0.0, (ay - y) + (am - m) / 12)


def ran_recent_build(p: Point, key: str) -> bool:
    """Whether a published run's build is of the pinned build's era (only CUDA builds are told apart, graph and
    eager ones alike). A point without a date is a 2025+ PR build: counted recent."""
    return key != "llama.cpp/cuda" or p.date is None or p.date >= RECENT_SINCE


def ran_cuda_graphs(p: Point, devices) -> bool:
    """Whether a published CUDA run's build replayed decode steps as CUDA graphs. They came in May 2024 for
    Ampere and newer (llama.cpp PR 6766; on master by PR 7302, 2024-05-15); Volta and Turing joined in July
    2026 (PR 25749, opened 2026-07-16: the gate the pinned build has); Pascal never. A point without a date
    is a 2025+ PR build."""
    cc = min((float(d.compute_capability) for d in devices if d.compute_capability), default=None)
    if cc is None:
        return True
    if p.date is None:
        return cc >= CUDA_GRAPHS_MIN_CC
    return (cc >= 8.0 and p.date >= "2024-05") or (cc >= CUDA_GRAPHS_MIN_CC and p.date >= "2026-07")


class Case:
    """One point with everything the estimator derives from its sizing, computed once."""

    def __init__(self, p: Point):
        spec, w, st, hw, mem = point_inputs(p)
        self.p, self.devices, self.threads, self.ram_bw = p, hw.devices, hw.cpu_threads, hw.ram_bandwidth_gbs
        self.ghz, self.arch = hw.cpu_ghz, hw.cpu_arch
        ref = hw.devices[0] if hw.devices else None
        self.key = backend_key(p.engine, ref, p.backend)
        self.family = quant_family(st.quant)
        self.dot_share = [integer_dot_share(self.key, d, st.quant) for d in hw.devices]
        self.recurrent = bool(spec.recurrent_layers) and p.engine == "llama.cpp"
        self.graphs = self.key != "llama.cpp/cuda" or ran_cuda_graphs(p, hw.devices)
        self.recent = ran_recent_build(p, self.key)
        self.pdl = overlaps_launches(self.key, self.devices) and (p.date is None or p.date >= PDL_SINCE)
        self.earlier = p.date is not None and p.date < RECENT_SINCE
        self.age = build_age(p.date)
        self.chip = chip_key(ref) if ref else None
        if ref and ref.unified_memory:
            self.ram_bw = ref.bandwidth_gbs
        if p.kind == "decode":
            self.terms = decode_terms(spec, w, st, hw, mem, outputs=p.outputs)
        else:
            self.terms = prefill_terms(spec, w, st, hw, mem, tokens=p.tokens, depth=p.depth, n_batch=p.n_batch,
                                       backend=p.backend)

    @property
    def rated(self) -> bool:
        """Whether the run's device has a compute figure of its own (catalogued TFLOPS, Apple's shader rate); the
        others get one measured on their own prefill runs."""
        return bool(self.devices) and bool(self.devices[0].fp16_tflops or self.devices[0].kind == "apple")

    @property
    def soc(self) -> bool:
        return any(d.unified_memory and d.kind != "apple" for d in self.devices)

    def estimate(self, cal: SpeedCalibration) -> float | None:
        arch = cal.recurrent_factor if self.recurrent else 1.0
        eff = cal.efficiency(self.key)
        if not self.recent and self.graphs and self.key in cal.earlier_fixed_ms:
            eff = replace(eff, fixed_ms=cal.earlier_fixed_ms[self.key])
        if not self.recent and not self.graphs and self.key in cal.earlier_eager_fixed_ms:
            eff = replace(eff, eager_fixed_ms=cal.earlier_eager_fixed_ms[self.key])
        q = cal.quant_rates(self.family)
        tf = [cal.device_tflops(d, self.key) for d in self.devices]
        bw = [cal.device_bandwidth(d, self.key) for d in self.devices]
        if self.p.kind == "decode":
            g = cal.bandwidth_drift.get(self.key)
            kept = exp(-g * self.age) if g and self.age else 1.0  # what an older build's decode kernels reached
            bw = [b * kept for b in bw]
            tflops = (sum(tf) if self.terms.parallel else min(tf)) if self.devices and all(tf) else None
            if not self.devices and self.threads:
                tflops = cal.cpu.prefill_gflops(self.threads, self.ghz, self.arch) / 1e3
            dot = [t and t * share * kept for t, share in zip(tf, self.dot_share)]
            parts = decode_parts(self.terms, self.devices, eff, q, cal.cpu, ram_bw_gbs=self.ram_bw,
                                 threads=self.threads, tflops=tflops, cpu_ghz=self.ghz, cpu_arch=self.arch,
                                 arch_factor=arch, device_tflops=dot,
                                 device_bandwidth=bw, graphs=self.graphs, pdl=self.pdl)
            return self.p.batch * 1e3 / sum(parts.values())
        if not self.devices:
            return self.p.tokens / cpu_prefill_seconds(self.terms, cal.cpu, self.threads, self.ghz, self.arch, arch)
        if not all(tf):
            return None
        own = None  # a rate measured on the runs of its builds' era: their MFU is in it
        if self.earlier and not self.rated:
            own = next((r.tflops for r in cal.device_rates
                        if r.earlier and r.gpu == self.p.gpu and r.backend == self.key), None)
        if own is not None:
            tf = [own / eff.compute] * len(self.devices)
        elif self.earlier and self.key in cal.earlier_compute:
            eff = replace(eff, compute=eff.compute * cal.earlier_compute[self.key])
        return self.p.tokens / prefill_seconds(self.terms, self.devices, tf, eff, q, arch_factor=arch,
                                               device_bandwidth=bw)


def _score(cases, cal) -> float:
    total = 0.0
    for c in cases:
        e = c.estimate(cal)
        if e:
            total += abs(log(e / c.p.tps))
    return total


def device_rates(cases: list[Case], cal: SpeedCalibration) -> list[DeviceRate]:
    """Effective TFLOPS = prefill FLOPs / measured time, median per device, where no figure exists. A device with
    runs on both sides of RECENT_SINCE gets a rate per side (the R9700's HIP runs of Dec 2025 prefill at half the
    FLOPs/s of 2026's): a plan pays the recent one, as it pays the recent builds' MFU on a rated card."""
    by: dict[tuple[str, str, bool], list[tuple[float, str]]] = {}
    for c in cases:
        if c.p.kind != "prefill" or not c.devices or c.rated:
            continue
        rate = sum(c.terms.chunk_flops) * c.p.tps / c.p.tokens / 1e12 / len(c.devices)
        by.setdefault((c.p.gpu, c.key, c.earlier), []).append((rate, c.p.id))
    split = {(g, b) for g, b, earlier in by if earlier and (g, b, False) in by}
    return [DeviceRate(gpu=g, backend=b, tflops=round(statistics.median(r for r, _ in v), 3),
                       from_points=[i for _, i in v], earlier=earlier and (g, b) in split)
            for (g, b, earlier), v in sorted(by.items())]


def _descend(get, put, score, lo, hi, rounds=3, steps=13) -> None:
    """Coordinate step on one parameter: a log grid around its value, narrowing each round."""
    span = 2.0
    for _ in range(rounds):
        v0 = max(get(), lo + 1e-6)
        best, best_s = get(), score()
        for i in range(steps):
            v = min(hi, max(lo, v0 * exp(log(span) * (2 * i / (steps - 1) - 1)))) if v0 > 0 else lo + (hi - lo) * i / steps
            put(v)
            s = score()
            if s < best_s - 1e-12:
                best, best_s = v, s
        put(best)
        span = span ** 0.5


def _descend_linear(get, put, score, lo, hi, steps=25) -> None:
    """A linear grid over [lo, hi], then a grid five times finer within one step of its best."""
    best, best_s = get(), score()
    step = (hi - lo) / steps
    for i in range(steps + 1):
        put(lo + step * i)
        s = score()
        if s < best_s - 1e-12:
            best, best_s = get(), s
    centre = best
    for i in range(-5, 6):
        put(min(hi, max(lo, centre + step * i / 5)))
        s = score()
        if s < best_s - 1e-12:
            best, best_s = get(), s
    put(best)


def _deviation(eff: Efficiency, prior: Efficiency | None) -> float:
    """How far a backend's constants sit from the cross-backend prior, in log units (times: of t + 1 ms)."""
    if prior is None:
        return 0.0
    d = sum(abs(log(getattr(eff, n) / getattr(prior, n)))
            for n in ("bandwidth", "compute", "batch_compute", "decode_compute", "expert_compute", "attention_compute"))
    d += abs(log((eff.half_tokens + 8) / (prior.half_tokens + 8)))  # tokens: 8, the narrowest matmul tile
    return d + sum(abs(log((getattr(eff, n) + 1) / (getattr(prior, n) + 1)))
                   for n in ("fixed_ms", "moe_ms", "tile_padding"))


def _fit_group(keys: list[str], g: list[Case], cal: SpeedCalibration, prior: Efficiency | None, top: float) -> None:
    """One backend's constants (or, with several keys, the prior shared by all of them) on its points.

    With a prior, each candidate pays PRIOR_WEIGHT × its log distance from the prior: a backend with
    many points moves where they say, one with a source or two stays near what every backend shows."""
    def get_eff() -> Efficiency:
        return cal.backends[keys[0]]

    def param(name):
        return (lambda: getattr(get_eff(), name),
                lambda v: [cal.backends.__setitem__(k, replace(cal.backends[k], **{name: v})) for k in keys])

    def scorer(cases):
        return lambda: _score(cases, cal) + PRIOR_WEIGHT * _deviation(get_eff(), prior)

    dec = [c for c in g if c.p.kind == "decode"]
    one = [c for c in dec if c.p.batch == 1]
    moe = [c for c in one if any(c.terms.device_expert)]
    eager = [c for c in one if not c.graphs]
    pdl = [c for c in one if c.pdl]
    pre = [c for c in g if c.p.kind == "prefill"]
    pre_moe = [c for c in pre if c.terms.expert_fraction]
    pre_tiled = [c for c in pre_moe if c.terms.chunk_expert_tiles]
    # α where the attention is a tenth of the prompt's FLOPs or more (a deep context, a long prompt)
    pre_deep = [c for c in pre if sum(c.terms.chunk_attention_flops) >= 0.1 * sum(c.terms.chunk_flops)]
    bat = [c for c in dec if c.p.batch > 1]
    if prior is not None:  # what the backend's points cannot tell is the prior's
        unseen = {"bandwidth": not one, "fixed_ms": not one, "decode_compute": not one, "moe_ms": not moe,
                  "compute": not pre, "batch_compute": not bat,
                  "half_tokens": not pre, "expert_compute": not pre_moe, "attention_compute": not pre_deep,
                  "tile_padding": not pre_tiled}
        for k in keys:
            cal.backends[k] = replace(cal.backends[k], **{n: getattr(prior, n) for n, u in unseen.items() if u})
    def best_on(grid, best=None, best_s=None):
        """The (η, t_fixed) pair of grid that fits the batch-1 decode runs best, or best if none beats best_s."""
        for e, f in grid:
            for k in keys:
                cal.backends[k] = replace(cal.backends[k], bandwidth=e, fixed_ms=f)
            s = scorer(one)()
            if best_s is None or s < best_s:
                best, best_s = (e, f), s
        return best, best_s

    for _ in range(2 if one else 0):  # η and t_fixed on a grid, then ε; twice, as the ε floor moves the grid's best
        lo, hi = BOUNDS["bandwidth"]
        best, best_s = best_on([(lo + 0.025 * i, 0.2 * j) for i in range(int((hi - lo) / 0.025) + 1)
                                for j in range(int(top / 0.2) + 1)])
        best, _ = best_on([(min(hi, max(lo, best[0] + 0.005 * i)), min(top, max(0.0, best[1] + 0.05 * j)))
                           for i in range(-5, 6) for j in range(-4, 5)], best, best_s)  # finer, around the best
        for k in keys:
            cal.backends[k] = replace(cal.backends[k], bandwidth=best[0], fixed_ms=best[1])
        get, put = param("decode_compute")
        _descend_linear(lambda: log(get()), lambda v: put(exp(v)), scorer(one), *map(log, BOUNDS["decode_compute"]),
                        steps=30)
        if pdl and len(keys) == 1:
            get, put = param("pdl_fixed")
            put(get() or 1.0)
            _descend_linear(get, put, scorer(pdl), *BOUNDS["pdl_fixed"], steps=40)
    if eager and len(keys) == 1:  # CUDA builds or GPUs without graphs: their own t_fixed, graphs' one from the rest
        get, put = param("eager_fixed_ms")  # on the recent runs: those before 2026 fit their own below
        put(get() if get() is not None else get_eff().fixed_ms)
        _descend_linear(get, put, scorer([c for c in eager if c.recent] or eager), *BOUNDS["fixed_ms"], steps=30)
    for graphed, earlier_ms in ((True, cal.earlier_fixed_ms), (False, cal.earlier_eager_fixed_ms)):
        earlier = [c for c in one if not c.recent and c.graphs == graphed]
        if earlier and len(keys) == 1:  # builds before 2026: their own t_fixed, the recent ones' from the rest
            key = keys[0]
            earlier_ms.setdefault(key, get_eff().fixed_ms if graphed else get_eff().eager_fixed_ms)
            _descend_linear(lambda m=earlier_ms: m[key], lambda v, m=earlier_ms: m.__setitem__(key, v),
                            scorer(earlier), 0.0, top, steps=30)
    if moe:
        _descend_linear(*param("moe_ms"), scorer(moe), *BOUNDS["moe_ms"], steps=30)
    if pre:
        _descend(*param("compute"), scorer(pre), *BOUNDS["compute"])
        _descend_linear(*param("half_tokens"), scorer(pre), *BOUNDS["half_tokens"], steps=32)
        if pre_moe:
            _descend(*param("expert_compute"), scorer(pre_moe), *BOUNDS["expert_compute"])
        if pre_tiled:
            _descend_linear(*param("tile_padding"), scorer(pre_moe), 0.0, 1.0, steps=20)
            _descend(*param("expert_compute"), scorer(pre_moe), *BOUNDS["expert_compute"])
        if pre_deep:
            _descend(*param("attention_compute"), scorer(pre_deep), *BOUNDS["attention_compute"])
        _descend(*param("compute"), scorer(pre), *BOUNDS["compute"])
    if bat:
        _descend(*param("batch_compute"), scorer(bat), *BOUNDS["batch_compute"])
    multi = [c for c in pre if len(c.devices) > 1 and c.terms.chunks_per_batch > 1]
    if multi:
        _descend_linear(*param("pipeline"), scorer(multi), 0.0, 1.0, steps=20)


# A format family's φ and ψ hold for every model in that format on every engine: one publication's runs cannot tell
# the format from the rest of their setup, so a family measured by fewer publications stays at the K-quants' 1.0.
# (tt-inference-server #356's DeepSeek-R1 AWQ on 8×H100, once the only int4 decode runs, took φ to its 0.4 floor,
# and every AWQ/GPTQ plan on vLLM then read its 4-bit weights no faster than BF16 ones; Marlin, the kernel vLLM runs
# them in, is built to keep the ~4× of reading 4 bits instead of 16 up to batch 16-32, IST-DASLab/marlin README.)
FAMILY_MIN_SOURCES = 2


def _publications(cases: list[Case]) -> int:
    """The independent measurements among runs: their sources."""
    return len({c.p.source for c in cases})


def _pull(cases: list[Case]) -> float:
    """How hard a factor the runs set is drawn towards 1: PRIOR_WEIGHT × points per source (a source's points share
    its build and machine, so one publication moves the factor as far as one point would)."""
    return PRIOR_WEIGHT * len(cases) / _publications(cases)


def _fit_chips(cases: list[Case], cal: SpeedCalibration) -> None:
    """Each chip's bandwidth share (decode) and compute share (prefill) relative to its backend. A chip pays
    PRIOR_WEIGHT × (its points per source) × |log factor|: its sources, not its points, are the independent
    measurements (one publication's points share its build and machine), so a chip one source measured
    moves as far as one point would."""
    chips: dict[tuple[str, str], list[Case]] = {}
    for c in cases:
        if c.devices and c.chip:
            chips.setdefault((c.chip, c.key), []).append(c)
    index = {(f.chip, f.backend): i for i, f in enumerate(cal.device_factors)}

    def param(chip, key, name, n, n_src):
        def get():
            i = index.get((chip, key))
            return getattr(cal.device_factors[i], name) if i is not None else 1.0

        def put(v):
            i = index.get((chip, key))
            if i is None:
                index[(chip, key)] = i = len(cal.device_factors)
                cal.device_factors.append(DeviceFactor(chip=chip, backend=key, points=n, sources=n_src))
            cal.device_factors[i] = replace(cal.device_factors[i], **{name: v})
        return get, put

    for (chip, key), cs in sorted(chips.items()):
        dec = [c for c in cs if c.p.kind == "decode"]
        pre = [c for c in cs if c.p.kind == "prefill" and c.rated]
        n_src = _publications(cs)
        for sub, name in ((dec, "bandwidth"), (pre, "compute")):
            if not sub:
                continue
            weight = _pull(sub)
            get, put = param(chip, key, name, len(cs), n_src)
            lo, hi = BOUNDS[f"chip_{name}"]
            if name == "bandwidth":  # a chip cannot stream more than its peak: η · factor ≤ 1
                hi = min(hi, 1.0 / cal.efficiency(key).bandwidth)
                put(min(get(), hi))
            _descend(get, put, lambda sub=sub, get=get, w=weight: _score(sub, cal) + w * abs(log(get())), lo, hi)


def _fit_eras(cases: list[Case], cal: SpeedCalibration) -> None:
    """Each backend's prefill MFU on builds before RECENT_SINCE relative to its own, drawn towards 1 as a chip's
    share is (PRIOR_WEIGHT × points per source), on the devices with a catalogued rate (a measured one is the
    runs' own). llama.cpp's Vulkan backends share their shaders but not their paths (coopmat2 on NVIDIA only, tile
    sizes per vendor): one factor each, not one for all (NVIDIA's older builds fit 0.94 of today's MFU, AMD's 0.71;
    held out on the 647 points of Dec 2026 the Vulkan runs' mean |log error| went 0.209 → 0.186 in prefill and
    0.122 → 0.117 in decode)."""
    groups: dict[str, list[Case]] = {}
    for c in cases:
        if c.earlier and c.p.kind == "prefill" and c.rated:
            groups.setdefault(c.key, []).append(c)
    for key, g in sorted(groups.items()):
        weight = _pull(g)

        def get(key=key):
            return cal.earlier_compute.get(key, 1.0)

        def put(v, key=key):
            cal.earlier_compute[key] = v
        _descend(get, put, lambda g=g, w=weight: _score(g, cal) + w * abs(log(get())), *BOUNDS["earlier_compute"])


def _fit_drift(cases: list[Case], cal: SpeedCalibration) -> None:
    """Each backend's decode bandwidth share lost per year of build age, drawn towards 0 as a chip's share is
    towards 1 (PRIOR_WEIGHT × points per source × |drift · 1 year|); each Vulkan vendor its own, as in _fit_eras."""
    groups: dict[str, list[Case]] = {}
    for c in cases:
        if c.p.kind == "decode" and c.devices:
            groups.setdefault(c.key, []).append(c)
    for key, g in sorted(groups.items()):
        if not any(c.age for c in g):
            continue
        weight = _pull(g)

        def get(key=key):
            return cal.bandwidth_drift.get(key, 0.0)

        def put(v, key=key):
            cal.bandwidth_drift[key] = v
        _descend_linear(get, put, lambda g=g, w=weight: _score(g, cal) + w * abs(get()), *BOUNDS["bandwidth_drift"],
                        steps=32)


def split_pairs(cases: list[Case]) -> list[tuple[Case, Case]]:
    """Runs of one publication that differ only in how many devices a layer split spreads the model over."""
    same = {}
    for c in cases:
        if c.p.kind == "decode" and c.p.batch == 1 and c.devices and not c.terms.parallel:
            same.setdefault((c.p.source, c.p.model, c.p.quant, c.p.gpu, c.p.depth, c.key), []).append(c)
    return [(a, b) for g in same.values() for a in g for b in g
            if split_boundaries(a.terms) < split_boundaries(b.terms)]


def split_ms(cases: list[Case]) -> float:
    """t_split, measured rather than fitted: the median over split_pairs of the step time each extra device
    boundary adds. Fitted with the other constants it absorbs their residuals (0.9 ms); the pairs cancel them."""
    costs = [(1e3 / b.p.tps - 1e3 / a.p.tps) / (split_boundaries(b.terms) - split_boundaries(a.terms))
             for a, b in split_pairs(cases)]
    return max(0.0, statistics.median(costs)) if costs else 0.0


def fit(cases: list[Case], base: SpeedCalibration, sweeps: int = 3) -> SpeedCalibration:
    cal = copy.deepcopy(base)
    cal.device_rates = []
    cal.device_factors = []
    cal.earlier_fixed_ms = {}
    cal.earlier_eager_fixed_ms = {}
    cal.earlier_compute = {}
    cal.bandwidth_drift = {}
    groups: dict[str, list[Case]] = {}
    for c in cases:
        groups.setdefault(c.key, []).append(c)
    start = Efficiency(bandwidth=0.7, compute=0.5, batch_compute=0.5, fixed_ms=1.0, pipeline=PIPELINE_PRIOR,
                       split_ms=split_ms(cases))
    keys = [k for k, g in groups.items() if k != "llama.cpp/cpu" and any(c.p.kind == "decode" for c in g)]
    cal.backends = {k: start for k in keys}
    families = sorted({c.family for c in cases if c.family != "k" and c.devices})
    cal.quant_families = {f: QuantRates() for f in families}
    cal.cpu = CpuRates(bandwidth=0.65, gbs_per_ghz=3.0, gflops_per_ghz=15.0)
    cal.soc_compute = 1.0
    cal.apple_tensor_compute = 1.0  # the shader rate, where the descent starts
    cal.recurrent_factor = 0.5  # FORMULAS §4.1 [estimate]: where the descent starts
    cal.device_rates = device_rates(cases, cal)
    gpu_cases = [c for k in keys for c in groups[k]]

    def family_param(fam, name):
        return (lambda: getattr(cal.quant_families[fam], name),
                lambda v: cal.quant_families.__setitem__(fam, replace(cal.quant_families[fam], **{name: v})))

    def top_param(name):
        return (lambda: getattr(cal, name), lambda v: setattr(cal, name, v))

    def cpu_param(name):
        return (lambda: getattr(cal.cpu, name), lambda v: setattr(cal, "cpu", replace(cal.cpu, **{name: v})))

    prior = start
    for sweep in range(sweeps):
        # the prior: one set of constants for every GPU backend, fitted on all their points together
        fitted = dict(cal.backends)
        cal.backends = {k: prior for k in keys}
        _fit_group(keys, gpu_cases, cal, None, BOUNDS["fixed_ms"][1])
        prior = cal.backends[keys[0]]
        # a backend starts from the prior: what its points cannot tell stays there (ρ: none without multi-GPU runs)
        cal.backends = fitted if sweep else {k: replace(prior, pipeline=PIPELINE_PRIOR) for k in keys}
        for key in keys:
            _fit_group([key], groups[key], cal, prior, FIXED_MAX.get(key, BOUNDS["fixed_ms"][1]))
        for fam in families:
            fc = [c for c in cases if c.family == fam and c.devices]
            fd = [c for c in fc if c.p.kind == "decode"]
            if _publications(fd) >= FAMILY_MIN_SOURCES:
                _descend(*family_param(fam, "bandwidth"), lambda fd=fd: _score(fd, cal), *BOUNDS["q_bandwidth"])
            # ψ on discrete cards with a compute figure of their own (SoC points would fold the SoC factor into it;
            # on a measured rate ψ and the rate trade against each other), drawn towards 1 as a chip's share is
            pre_fc = [c for c in fc if c.p.kind == "prefill" and not c.soc and c.rated]
            if _publications(pre_fc) >= FAMILY_MIN_SOURCES:
                get, put = family_param(fam, "compute")
                w = _pull(pre_fc)
                _descend(get, put, lambda pf=pre_fc, w=w, get=get: _score(pf, cal) + w * abs(log(get())),
                         *BOUNDS["q_compute"])
        # the Neural Accelerators' share before the chips': it is what every M5-class chip has in common
        tensor = [c for c in cases if c.p.kind == "prefill" and c.devices and apple_gpu_tensor(c.devices[0])]
        if tensor:
            _descend(*top_param("apple_tensor_compute"), lambda: _score(tensor, cal), *BOUNDS["apple_tensor_compute"])
        _fit_eras(gpu_cases, cal)
        _fit_drift(gpu_cases, cal)
        _fit_chips(gpu_cases, cal)
        rec = [c for c in gpu_cases if c.recurrent]
        if rec:
            _descend(*top_param("recurrent_factor"), lambda: _score(rec, cal), *BOUNDS["recurrent_factor"])
        soc = [c for c in cases if c.soc and c.p.kind == "prefill"]
        if soc:
            _descend(*top_param("soc_compute"), lambda: _score(soc, cal), *BOUNDS["soc_compute"])
        cpu = [c for c in cases if not c.devices]
        if cpu:
            cd = [c for c in cpu if c.p.kind == "decode"]
            cp = [c for c in cpu if c.p.kind == "prefill"]
            _descend(*cpu_param("bandwidth"), lambda: _score(cd, cal), *BOUNDS["cpu_bandwidth"])
            x86 = [c for c in cpu if c.arch in (None, "x86_64")]  # each core class fitted on its own runs
            arm = [c for c in cpu if c.arch == "arm64"]
            apple = [c for c in cpu if c.arch == "apple"]
            for name, group in (("gbs_per_ghz", x86), ("arm_gbs_per_ghz", arm), ("apple_gbs_per_ghz", apple)):
                runs = [c for c in group if c.p.kind == "decode"]
                if runs:
                    if getattr(cal.cpu, name) is None:  # a class starts from the x86 figure
                        cal.cpu = replace(cal.cpu, **{name: cal.cpu.gbs_per_ghz})
                    _descend(*cpu_param(name), lambda runs=runs: _score(runs, cal), *BOUNDS["gbs_per_ghz"])
            for name, group in (("gflops_per_ghz", x86), ("arm_gflops_per_ghz", arm), ("apple_gflops_per_ghz", apple)):
                runs = [c for c in group if c.p.kind == "prefill"]
                if runs:
                    if getattr(cal.cpu, name) is None:
                        cal.cpu = replace(cal.cpu, **{name: cal.cpu.gflops_per_ghz})
                    _descend(*cpu_param(name), lambda runs=runs: _score(runs, cal), *BOUNDS["gflops_per_ghz"])
            if len({c.threads for c in cp}) > 1:  # Amdahl's serial share: what the thread counts tell apart
                _descend_linear(*cpu_param("serial_share"), lambda: _score(cp, cal), *BOUNDS["serial_share"])
    cal.prior = replace(prior, calibrated=True, basis=f"fitted on the {len(gpu_cases)} GPU points of every backend together")
    for key, g in groups.items():
        if key in cal.backends:
            n = {k: sum(1 for c in g if c.p.kind == k) for k in ("decode", "prefill")}
            cal.backends[key] = replace(cal.backends[key], calibrated=True,
                                        basis=f"fitted on {n['decode']} decode and {n['prefill']} prefill points "
                                              f"from {_publications(g)} sources" + _recent_basis(key, g, cal))
    if cpu:
        cal.cpu = replace(cal.cpu, calibrated=True, basis=f"fitted on {len(cpu)} CPU-only points "
                                                           f"from {_publications(cpu)} sources")
    return cal


def _recent_basis(key: str, g: list[Case], cal: SpeedCalibration) -> str:
    """Where a plan's t_fixed comes from when the backend's older builds fit their own."""
    if key not in cal.earlier_fixed_ms:
        return ""
    recent = [c for c in g if c.p.kind == "decode" and c.p.batch == 1 and c.recent and c.graphs]
    pdl = [c for c in recent if c.pdl]
    return (f"; t_fixed from the {len(recent)} batch-1 decode runs of builds since {RECENT_SINCE} "
            f"({_publications(recent)} sources; earlier builds: {cal.earlier_fixed_ms[key]:.1f} ms)"
            + (f", ×{cal.backends[key].pdl_fixed:.2f} of it on Hopper and newer since {PDL_SINCE} ({len(pdl)} runs, "
               f"{_publications(pdl)} sources)" if pdl and cal.backends[key].pdl_fixed is not None else ""))


def _rounded(cal: SpeedCalibration) -> SpeedCalibration:
    r = lambda x: round(x, 3)  # noqa: E731
    cal.backends = {k: replace(v, bandwidth=r(v.bandwidth), compute=r(v.compute), batch_compute=r(v.batch_compute),
                               fixed_ms=r(v.fixed_ms), moe_ms=r(v.moe_ms), split_ms=r(v.split_ms),
                               decode_compute=r(v.decode_compute),
                               pipeline=r(v.pipeline), half_tokens=r(v.half_tokens),
                               expert_compute=r(v.expert_compute), attention_compute=r(v.attention_compute),
                               tile_padding=r(v.tile_padding),
                               eager_fixed_ms=None if v.eager_fixed_ms is None else r(v.eager_fixed_ms),
                               pdl_fixed=None if v.pdl_fixed is None else r(v.pdl_fixed))
                    for k, v in cal.backends.items()}
    cal.prior = replace(cal.prior, **{n: r(getattr(cal.prior, n)) for n in
                                      ("bandwidth", "compute", "batch_compute", "decode_compute", "fixed_ms", "moe_ms",
                                       "split_ms",
                                       "pipeline", "half_tokens", "expert_compute", "attention_compute",
                                       "tile_padding")})
    cal.quant_families = {k: QuantRates(bandwidth=r(v.bandwidth), compute=r(v.compute))
                          for k, v in cal.quant_families.items()}
    cal.earlier_fixed_ms = {k: r(v) for k, v in cal.earlier_fixed_ms.items()}
    cal.earlier_eager_fixed_ms = {k: r(v) for k, v in cal.earlier_eager_fixed_ms.items()}
    cal.earlier_compute = {k: r(v) for k, v in cal.earlier_compute.items()}
    cal.bandwidth_drift = {k: r(v) for k, v in cal.bandwidth_drift.items()}
    cal.soc_compute = r(cal.soc_compute)
    cal.apple_tensor_compute = r(cal.apple_tensor_compute)
    cal.device_factors = [replace(f, bandwidth=r(f.bandwidth), compute=r(f.compute)) for f in cal.device_factors]
    cal.recurrent_factor = r(cal.recurrent_factor)
    cal.cpu = replace(cal.cpu, **{n: r(getattr(cal.cpu, n)) for n in
                                  ("bandwidth", "gbs_per_ghz", "gflops_per_ghz", "arm_gbs_per_ghz", "arm_gflops_per_ghz",
                                   "apple_gbs_per_ghz", "apple_gflops_per_ghz")
                                  if getattr(cal.cpu, n) is not None}, serial_share=round(cal.cpu.serial_share, 4))
    return cal


def _p90(errs: list[float]) -> float:
    e = sorted(errs)
    return e[min(len(e) - 1, int(round(0.9 * (len(e) - 1))))]


def _stats(errs: list[float]) -> str:
    if not errs:
        return "n=0"
    errs = [abs(e) for e in errs]
    return f"median {statistics.median(errs):.2%}, p90 {_p90(errs):.2%} (n={len(errs)})"


def _overall(errs: list[float], target_p90: float) -> str:
    """`_stats` of signed errors, with what moves before a median or p90 does: the mean |log error| and the runs
    above the issue's p90 target and how many `_p90` lets be above it."""
    if not errs:
        return "n=0"
    above = sum(abs(e) > target_p90 for e in errs)
    return (f"{_stats(errs)}, mean |log error| {statistics.mean(abs(log(1 + e)) for e in errs):.4f}, "
            f"{above} above {target_p90:.0%} ({len(errs) - 1 - round(0.9 * (len(errs) - 1))} allowed)")


_LOSO: tuple[list[Case], SpeedCalibration | None] = ([], None)


def _held_out(src: str) -> list[tuple[str, float | None]]:
    """Refit without one source's points and predict them (runs in a forked worker)."""
    cases, base = _LOSO
    rest_cal = fit([c for c in cases if c.p.source != src], base)
    return [(c.p.id, c.estimate(rest_cal)) for c in cases if c.p.source == src]


def leave_one_source_out(cases: list[Case], base: SpeedCalibration, jobs: int) -> dict[str, float | None]:
    """Each source's points predicted by a fit on every other source; sources refit side by side."""
    global _LOSO
    _LOSO = (cases, base)
    sources = sorted({c.p.source for c in cases})
    if jobs > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            results = pool.map(_held_out, sources, chunksize=1)
    else:
        results = [_held_out(s) for s in sources]
    return {pid: est for part in results for pid, est in part}


# Issue 15's held-out targets for the p90 of |error|: decode 20 %, prefill 35 % (medians 8 % and 15 %).
P90_TARGET = {"decode": 0.20, "prefill": 0.35}
HELD_OUT_MIN_RUNS = 3  # fewer held-out runs give no band a plan could show


def held_out_groups(cases: list[Case], loso: dict[str, float | None]) -> dict[tuple[str, str], list[tuple[float, str]]]:
    """Per (backend, kind): each held-out prediction's |error| with the run's source."""
    by: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for c in cases:
        if loso.get(c.p.id):
            by.setdefault((c.key, c.p.kind), []).append((abs(loso[c.p.id] / c.p.tps - 1), c.p.source))
    return dict(sorted(by.items()))


def held_out_errors(groups: dict[tuple[str, str], list[tuple[float, str]]]) -> dict[str, dict[str, HeldOutError]]:
    """The bands a plan shows: median and p90 per backend and kind, where enough runs from several sources exist."""
    out: dict[str, dict[str, HeldOutError]] = {}
    for (key, kind), v in groups.items():
        e, sources = [x for x, _ in v], {src for _, src in v}
        if len(e) < HELD_OUT_MIN_RUNS or len(sources) < 2:
            continue  # one run, or one publication's, is no band
        out.setdefault(key, {})[kind] = HeldOutError(backend=key, median=round(statistics.median(e), 3),
                                                     p90=round(_p90(e), 3), points=len(e), sources=len(sources))
    return out


def _write(cal: SpeedCalibration, held_out: dict[str, dict[str, HeldOutError]] | None) -> None:
    """The fitted constants into speed_calibration.json; the held-out errors only from a run that measured them
    (--no-loso keeps the last ones)."""
    raw = json.loads(PATH.read_text())
    raw["backends"] = {k: asdict(v) for k, v in sorted(cal.backends.items())}
    raw["prior"] = asdict(cal.prior)
    raw["quant_families"] = {k: asdict(v) for k, v in sorted(cal.quant_families.items())}
    raw["cpu"] = asdict(cal.cpu)
    raw["device_rates"] = [asdict(r) for r in cal.device_rates]
    raw["device_factors"] = [asdict(f) for f in sorted(cal.device_factors, key=lambda f: (f.backend, f.chip))]
    raw["soc_compute"] = cal.soc_compute
    raw["apple_tensor_compute"] = cal.apple_tensor_compute
    raw["recurrent_factor"] = cal.recurrent_factor
    raw["earlier_fixed_ms"] = dict(sorted(cal.earlier_fixed_ms.items()))
    raw["earlier_eager_fixed_ms"] = dict(sorted(cal.earlier_eager_fixed_ms.items()))
    raw["earlier_compute"] = dict(sorted(cal.earlier_compute.items()))
    raw["bandwidth_drift"] = dict(sorted(cal.bandwidth_drift.items()))
    if held_out is not None:
        raw["held_out"] = {k: {kind: asdict(e) for kind, e in v.items()} for k, v in held_out.items()}
    PATH.write_text(json.dumps(raw, indent=1, ensure_ascii=False) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="refit and write the fitted constants into the JSON")
    ap.add_argument("--no-loso", action="store_true", help="skip the leave-one-source-out refits")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="refits run side by side (default: CPUs)")
    args = ap.parse_args(argv)
    base = load_calibration()
    cases = [Case(p) for p in load_points().points]
    cal = _rounded(fit(cases, base))
    defines = {i for r in cal.device_rates for i in r.from_points}
    loso = {} if args.no_loso else leave_one_source_out(cases, base, args.jobs)
    groups = held_out_groups(cases, loso)
    if args.write:
        _write(cal, held_out_errors(groups) if loso else None)
    errs = {"decode": [], "prefill": []}
    loso_errs = {"decode": [], "prefill": []}
    unpredicted = []
    print(f"{'point':<36}{'kind':<8}{'backend':<18}{'published':>10}{'estimate':>10}{'error':>8}{'LOSO':>10}{'err':>8}")
    for c in cases:
        est = c.estimate(cal)
        err = est / c.p.tps - 1 if est else None
        if err is not None and c.p.id not in defines:
            errs[c.p.kind].append(err)
        lo = loso.get(c.p.id)
        lo_err = lo / c.p.tps - 1 if lo else None
        if lo_err is not None:
            loso_errs[c.p.kind].append(lo_err)
        elif not args.no_loso:
            unpredicted.append(c.p.id)
        shown = "(rate)" if c.p.id in defines else (f"{err:+.0%}" if err is not None else "-")
        print(f"{c.p.id:<36}{c.p.kind:<8}{c.key:<18}{c.p.tps:>10.1f}{(est or 0):>10.1f}{shown:>8}"
              f"{(lo or 0):>10.1f}{(f'{lo_err:+.0%}' if lo_err is not None else '-'):>8}")
    print()
    for k, v in [("prior", cal.prior), *sorted(cal.backends.items())]:
        print(f"{k:<18} η {v.bandwidth:.3f}  t_fixed {v.fixed_ms:.2f} ms  t_moe {v.moe_ms:.2f} ms  "
              f"t_split {v.split_ms:.2f} ms  "
              f"ε {v.decode_compute:.3f}  "
              + (f"eager t_fixed {v.eager_fixed_ms:.2f} ms  " if v.eager_fixed_ms is not None else "")
              + (f"PDL t_fixed ×{v.pdl_fixed:.2f}  " if v.pdl_fixed is not None else "")
              + (f"before 2026 {cal.earlier_fixed_ms[k]:.2f} ms  " if k in cal.earlier_fixed_ms else "")
              + (f"eager before 2026 {cal.earlier_eager_fixed_ms[k]:.2f} ms  "
                 if k in cal.earlier_eager_fixed_ms else "")
              + (f"MFU before {RECENT_SINCE} ×{cal.earlier_compute[k]:.2f}  " if k in cal.earlier_compute else "") +
              f"MFU {v.compute:.3f}  m½ {v.half_tokens:.0f}  κ {v.expert_compute:.2f}  π {v.tile_padding:.2f}  "
              f"α {v.attention_compute:.2f}  "
              f"batch MFU {v.batch_compute:.3f}  ρ {v.pipeline:.2f}  ({v.basis})")
    for k, q in sorted(cal.quant_families.items()):
        print(f"quant {k:<8} φ {q.bandwidth:.3f}  ψ {q.compute:.3f}")
    c = cal.cpu
    print(f"cpu: η {c.bandwidth:.3f}; per thread per GHz: x86 {c.gbs_per_ghz:.2f} GB/s, {c.gflops_per_ghz:.1f} GFLOPS; "
          f"arm64 {c.thread_gbs(1, 'arm64'):.2f} GB/s, {c.thread_gflops(1, 'arm64'):.1f} GFLOPS; "
          f"apple {c.thread_gbs(1, 'apple'):.2f} GB/s, {c.thread_gflops(1, 'apple'):.1f} GFLOPS; "
          f"prefill serial share {c.serial_share:.4f}")
    for k, v in sorted(cal.bandwidth_drift.items()):
        print(f"decode bandwidth drift {k:<20} {v:+.3f} per year before {DRIFT_ANCHOR}")
    print(f"SoC GPU (DGX Spark, Strix Halo) prefill MFU factor {cal.soc_compute:.3f}")
    print(f"Apple GPU with Neural Accelerators (M5 and later): prefill ×{cal.apple_tensor_compute:.3f} its shader rate")
    print(f"recurrent / gated-delta-net models on llama.cpp: {cal.recurrent_factor:.3f}x")
    for f in sorted(cal.device_factors, key=lambda f: (f.backend, f.chip)):
        print(f"chip {f.chip:<24} {f.backend:<22} bandwidth ×{f.bandwidth:.3f}  compute ×{f.compute:.3f}  "
              f"({f.points} points, {f.sources} sources)")
    for r in cal.device_rates:
        print(f"{r.gpu:<26} measured {r.tflops:.2f} effective TFLOPS ({r.backend}, {len(r.from_points)} points"
              + (f", builds before {RECENT_SINCE})" if r.earlier else ")"))
    print()
    print(f"points {len(cases)} from {_publications(cases)} sources")
    for kind in ("decode", "prefill"):
        print(f"{kind:<8} in-sample: {_overall(errs[kind], P90_TARGET[kind])}")
        if not args.no_loso:
            print(f"{kind:<8} leave-one-source-out: {_overall(loso_errs[kind], P90_TARGET[kind])}")
    for (key, kind), v in groups.items():
        print(f"  {key:<18} {kind:<8} leave-one-source-out: {_stats([x for x, _ in v])}")
    if unpredicted:
        print(f"not predictable with their source held out ({len(unpredicted)}): {', '.join(unpredicted)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
