"""Ranking sized plans for "what can I run here?": a score a person can recompute by hand.

    score = quality x speed factor x context factor

- quality (0-100): the model's published benchmark score when the catalog holds one, else a size
  proxy, 10 x log2(1 + B) with B the parameters in billions (MoE: sqrt(total x active), the usual
  dense-equivalent rule of thumb); times the format's retention exp(-KLD), KLD the mean KL divergence
  of its next-token distribution from 16 bit (llama.cpp's LLaMA 3 8B scoreboard,
  catalogs/data/quant_quality.json), read at the format's own bits per weight where not measured.
- speed factor, by decode tokens/s per sequence against reading speed R = 5.3 tok/s (238 words/min
  silent reading, Brysbaert 2019, at 0.75 words per token): >= 4R 1.0, >= R 0.75, >= R/5 0.4, else 0.1.
  Classes, not a curve: inside one class a more precise format always wins.
- context factor: sqrt(min(1, context / target)), target 32K tokens or --min-ctx.

A tight verdict (inside the estimate's error band) is shown, and loses ties to 'fits', but costs no
score: planners fill memory up to the band on purpose, so a penalty would make more memory score less.
Order: plans that run (fits, tight) before plans that do not, whatever the sort; then the sort key
(score by default), then fits before tight, bits per weight, context and speed. A model's row is its
best-ranked plan.
"""
from __future__ import annotations

import math
from typing import Literal

from fitprobe.estimator.fields import doc, record

READING_TPS = 238 / 60 / 0.75  # words/s of silent reading (Brysbaert 2019) / words per token (OpenAI rule)
SPEED_CLASSES: tuple[tuple[float, float, str], ...] = (
    (4 * READING_TPS, 1.0, "fast"), (READING_TPS, 0.75, "reading speed"),
    (READING_TPS / 5, 0.4, "slow"), (0.0, 0.1, "crawl"))
DEFAULT_CONTEXT_TARGET = 32768
SORTS = ("score", "quality", "speed", "context", "params", "memory")
Sort = Literal["score", "quality", "speed", "context", "params", "memory"]


@record
class QualityPoint:
    name: str
    size_gib: float = doc(gt=0, description="the quantized reference model's file size")
    kld: float = doc(ge=0, description="mean KL divergence from the 16-bit model's next-token distribution, nats/token")


@record
class QuantQuality:
    """Measured quality loss per format on one reference model (catalogs/data/quant_quality.json)."""

    schema: int
    about: str
    reference_params: int = doc(gt=0)
    source: str
    formats: list[QualityPoint]

    def bits(self, p: QualityPoint) -> float:
        return p.size_gib * (1 << 30) * 8 / self.reference_params

    def nominal_bits(self, name: str) -> float | None:
        """Bits per weight of a measured format on the reference model (None when not measured)."""
        return next((self.bits(p) for p in self.formats if p.name.lower() == name.lower()), None)

    def retention(self, name: str, bits_per_weight: float) -> tuple[float, str]:
        """(share kept, basis): measured for the format, else read off the K-quant curve at its bits."""
        for p in self.formats:
            if p.name.lower() == name.lower():
                return math.exp(-p.kld), f"{p.name} measured (KLD {p.kld:g})"
        curve = sorted(((self.bits(p), math.exp(-p.kld)) for p in self.formats
                        if p.name in ("BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K")))
        return _interpolate(curve, bits_per_weight), f"{bits_per_weight:.2f} bits/weight on the K-quant curve"


def _interpolate(curve: list[tuple[float, float]], x: float) -> float:
    if x <= curve[0][0]:
        return curve[0][1] * x / curve[0][0]  # below the lowest point: shrinks toward 0 bits
    for (x0, y0), (x1, y1) in zip(curve, curve[1:]):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return curve[-1][1]


@record
class Benchmark:
    name: str = doc(description="benchmark and setup, e.g. 'MMLU-Pro (5-shot CoT)'")
    score: float = doc(ge=0, le=100)
    source: str


def size_points(params: int, active: int | None = None) -> float:
    """The size proxy: 10 x log2(1 + billions), MoE at sqrt(total x active)."""
    billions = (math.sqrt(params * active) if active and active < params else params) / 1e9
    return min(100.0, 10 * math.log2(1 + billions))


@record
class Candidate:
    """One sized plan of one model: what the ranking reads. Quality is computed before ranking."""

    model: str
    family: str = ""
    tags: list[str] = doc(default_factory=list)
    params: int = doc(ge=0, description="language-model parameters")
    engine: str
    quant: str
    bits_per_weight: float = doc(ge=0, description="weights bytes x 8 / parameters: the precision order")
    context: int = doc(ge=0, description="tokens per sequence the plan serves")
    status: str = doc(description="fits | tight | exceeds")
    placement: str = doc(description="gpu (all on the accelerators), offload (part in system RAM) or cpu")
    total_bytes: int = doc(description="accelerator memory the plan needs")
    host_bytes: int = doc(description="system RAM the plan needs")
    margin_bytes: int = doc(description="usable minus needed on the tightest device")
    decode_tps: float | None = doc(default=None, description="tokens/s per sequence at a conversation's start")
    prefill_tps: float | None = doc(default=None, description="prompt tokens/s for a 4K-token prompt")
    quality: float = doc(ge=0, le=100, description="quality points at this format")
    quality_basis: str = ""


@record
class RankPolicy:
    context_target: int = doc(default=DEFAULT_CONTEXT_TARGET, gt=0, description="tokens at which the context factor reaches 1")
    sort: Sort = "score"


@record
class Scored:
    candidate: Candidate
    score: float = doc(description="quality x speed factor x context factor; 0 when it does not run")
    speed_factor: float
    speed_class: str
    context_factor: float
    runs: bool


def speed_class(tps: float | None) -> tuple[float, str]:
    if tps is None:
        return SPEED_CLASSES[-1][1], "unknown"
    for floor, factor, name in SPEED_CLASSES:
        if tps >= floor:
            return factor, name
    return SPEED_CLASSES[-1][1], SPEED_CLASSES[-1][2]


def score(c: Candidate, policy: RankPolicy) -> Scored:
    runs = c.status in ("fits", "tight")
    sf, sname = speed_class(c.decode_tps)
    cf = math.sqrt(min(1.0, c.context / policy.context_target)) if c.context > 0 else 0.0
    value = c.quality * sf * cf if runs else 0.0
    return Scored(candidate=c, score=round(value, 6), speed_factor=sf, speed_class=sname, context_factor=cf, runs=runs)


def _key(s: Scored, sort: str) -> tuple:
    c = s.candidate
    primary = {"score": -s.score, "quality": -c.quality, "speed": -(c.decode_tps or 0.0), "context": -c.context,
               "params": -c.params, "memory": c.total_bytes + c.host_bytes}[sort]
    return (not s.runs, primary, -s.score, c.status == "tight", -c.bits_per_weight, -c.context,
            -(c.decode_tps or 0.0), c.model, c.engine)


def rank(candidates: list[Candidate], policy: RankPolicy) -> list[Scored]:
    """Every candidate scored and ordered: runnable first, then by the policy's sort."""
    return order([score(c, policy) for c in candidates], policy.sort)


def order(scored: list[Scored], sort: str = "score") -> list[Scored]:
    """Scored plans ordered: runnable first, then by `sort` and the tie-breaks."""
    return sorted(scored, key=lambda s: _key(s, sort))


def best_per_model(ranked: list[Scored]) -> list[Scored]:
    """The first (best) plan of each model, in ranked order."""
    seen: set[str] = set()
    out = []
    for s in ranked:
        if s.candidate.model not in seen:
            seen.add(s.candidate.model)
            out.append(s)
    return out
