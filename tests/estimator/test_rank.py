"""The ranking makes sense: properties of estimator/rank.py on any candidates (hypothesis), and of
the whole pipeline (estimator/fit.py through the real planners) as memory grows."""
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from fitprobe.catalogs.model_uses import load_quant_quality
from fitprobe.estimator.fields import replace
from fitprobe.estimator.rank import (READING_TPS, Candidate, RankPolicy, best_per_model, rank, score, size_points,
                                     speed_class)

LADDER = ["BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "IQ4_XS", "Q3_K_M", "IQ3_XXS", "Q2_K", "IQ2_XXS", "IQ1_M"]
STATUSES = ["fits", "tight", "exceeds"]


def retention(name: str) -> float:
    return load_quant_quality().retention(name, 0.0)[0]


@st.composite
def candidates(draw, model=None):
    q = draw(st.sampled_from(LADDER))
    return Candidate(model=model or draw(st.sampled_from(["a", "b", "c", "d"])), params=10**9, engine="llama.cpp",
                     quant=q, bits_per_weight=16 - LADDER.index(q), context=draw(st.integers(0, 262144)),
                     status=draw(st.sampled_from(STATUSES)), placement="gpu", total_bytes=draw(st.integers(0, 10**12)),
                     host_bytes=0, margin_bytes=0, decode_tps=draw(st.one_of(st.none(), st.floats(0.01, 500))),
                     prefill_tps=None, quality=draw(st.floats(0, 100)) * retention(q))


policies = st.builds(RankPolicy, context_target=st.integers(512, 262144),
                     sort=st.sampled_from(["score", "quality", "speed", "context", "params", "memory"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(candidates(), min_size=1, max_size=30), policies)
def test_a_plan_that_does_not_fit_never_outranks_one_that_fits(cands, policy):
    ranked = rank(cands, policy)
    runs = [s.runs for s in ranked]
    assert runs == sorted(runs, reverse=True)  # every runnable plan before every other, whatever the sort
    assert all(s.score == 0 for s in ranked if not s.runs)
    rows = best_per_model(ranked)
    assert [s.runs for s in rows] == sorted((s.runs for s in rows), reverse=True)


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from(["score", "quality", "context", "params", "memory"]))
def test_higher_precision_ranks_higher_at_the_same_context_and_speed_class(data, sort):
    """Of two formats of one model that both run at the same context, the more precise one ranks higher
    (unless sorted by speed) as long as both decode in the same speed class: a class boundary is the one
    place the score trades quality for speed (docs/fit.md)."""
    hi, lo = sorted(data.draw(st.lists(st.sampled_from(LADDER), min_size=2, max_size=2, unique=True)), key=LADDER.index)
    base = data.draw(st.floats(1, 100))
    ctx = data.draw(st.integers(1, 262144))
    tps = data.draw(st.floats(0.01, 500))
    tps_lo = data.draw(st.floats(tps, 500).filter(lambda t: speed_class(t) == speed_class(tps)))
    status = data.draw(st.sampled_from(["fits", "tight"]))
    mk = lambda q, t: Candidate(model="m", params=10**9, engine="llama.cpp", quant=q,  # noqa: E731
                                bits_per_weight=16 - LADDER.index(q), context=ctx, status=status, placement="gpu",
                                total_bytes=0, host_bytes=0, margin_bytes=0, decode_tps=t, prefill_tps=None,
                                quality=base * retention(q))
    ranked = rank([mk(lo, tps_lo), mk(hi, tps)], RankPolicy(sort=sort))
    assert ranked[0].candidate.quant == hi
    assert best_per_model(ranked)[0].candidate.quant == hi


def test_sorted_by_speed_the_faster_format_leads():
    mk = lambda q, t: Candidate(model="m", params=1, engine="llama.cpp", quant=q, bits_per_weight=8,  # noqa: E731
                                context=8192, status="fits", placement="gpu", total_bytes=0, host_bytes=0,
                                margin_bytes=0, decode_tps=t, quality=50 * retention(q))
    assert rank([mk("Q8_0", 40), mk("Q4_K_M", 70)], RankPolicy(sort="speed"))[0].candidate.quant == "Q4_K_M"
    assert rank([mk("Q8_0", 40), mk("Q4_K_M", 70)], RankPolicy(sort="score"))[0].candidate.quant == "Q8_0"


@settings(max_examples=200, deadline=None)
@given(candidates(model="m"), st.integers(0, 262144), st.floats(0, 500), policies)
def test_more_context_or_speed_or_a_better_verdict_never_lowers_a_score(c, more_ctx, more_tps, policy):
    better = replace(c, context=c.context + more_ctx, decode_tps=(c.decode_tps or 0) + more_tps,
                     status={"exceeds": "tight", "tight": "fits", "fits": "fits"}[c.status])
    assert score(better, policy).score >= score(c, policy).score


def test_score_is_the_product_a_reader_can_recompute():
    c = Candidate(model="m", params=8 * 10**9, engine="llama.cpp", quant="Q4_K_M", bits_per_weight=4.9, context=8192,
                  status="tight", placement="gpu", total_bytes=0, host_bytes=0, margin_bytes=0,
                  decode_tps=READING_TPS * 2, quality=size_points(8 * 10**9) * retention("Q4_K_M"))
    s = score(c, RankPolicy(context_target=32768))
    assert s.speed_factor == 0.75 and s.speed_class == "reading speed"
    assert math.isclose(s.context_factor, 0.5)
    assert math.isclose(s.score, c.quality * 0.75 * 0.5, rel_tol=1e-6)
    assert math.isclose(size_points(8 * 10**9), 10 * math.log2(9))
    assert math.isclose(retention("Q4_K_M"), math.exp(-0.031273))


def test_retention_falls_with_every_step_down_the_ladder():
    kept = [retention(q) for q in LADDER]
    assert kept == sorted(kept, reverse=True) and kept[0] == 1.0
    quality = load_quant_quality()
    fp8 = quality.retention("FP8", 8.0)[0]
    assert retention("Q6_K") < fp8 < 1.0  # read off the curve between its measured neighbours


def test_a_published_benchmark_replaces_the_size_proxy():
    from fitprobe.catalogs.resolve import resolve
    from fitprobe.estimator.fit import ModelFacts, base_quality
    from fitprobe.estimator.rank import Benchmark

    spec = resolve("qwen3-8b").spec
    plain = ModelFacts(name="qwen3-8b", spec=spec)
    scored = ModelFacts(name="qwen3-8b", spec=spec, benchmark=Benchmark(name="X-bench", score=71.5, source="card"))
    assert base_quality(plain, plain.counts) == (size_points(plain.counts.text), "size proxy")
    assert base_quality(scored, scored.counts) == (71.5, "X-bench 71.5")


def test_use_case_tags_name_bundled_models_with_a_source():
    from fitprobe.catalogs.model_uses import USE_CASES, load_uses
    from fitprobe.catalogs.models import load_models

    names = {e.name for e in load_models()}
    uses = load_uses()
    assert set(uses) <= names
    assert all(u.tags and set(u.tags) <= set(USE_CASES) and u.source.startswith("https://") for u in uses.values())
