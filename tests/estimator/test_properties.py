"""Invariants (hypothesis): memory grows with context and sequences; fewer bits never cost more."""
from hypothesis import given, settings
from hypothesis import strategies as st

from fitprobe.catalogs.models import find_model
from fitprobe.catalogs.quants import quant_table
from fitprobe.estimator.config import spec_from_config
from fitprobe.estimator.hardware import Device, Hardware
from fitprobe.estimator.kv import kv_cache
from fitprobe.estimator.memory import estimate
from fitprobe.estimator.settings import RunSettings
from fitprobe.estimator.verdict import judge

NAMES = ["llama-3.1-8b-instruct", "gemma-2-9b-it", "gpt-oss-20b", "deepseek-v3", "qwen3-next-80b-a3b-thinking",
         "nemotron-3-nano-30b-a3b", "mixtral-8x7b-v0.1"]
SPECS = {n: spec_from_config(find_model(n).config, name=n) for n in NAMES}
TABLE = quant_table()
GIB = 1 << 30
models = st.sampled_from(NAMES)
engines = st.sampled_from(["llama.cpp", "vllm", "sglang", "ollama"])
contexts = st.integers(min_value=1, max_value=262_144)


@settings(max_examples=60, deadline=None)
@given(models, engines, contexts, contexts, st.integers(1, 8))
def test_kv_monotone_in_context(name, engine, a, b, batch):
    lo, hi = sorted((a, b))
    kv = "auto" if engine in ("vllm", "sglang") else "f16"
    small = kv_cache(SPECS[name], RunSettings(engine=engine, context=lo, batch=batch, kv_cache_dtype=kv)).total
    large = kv_cache(SPECS[name], RunSettings(engine=engine, context=hi, batch=batch, kv_cache_dtype=kv)).total
    assert small <= large


@settings(max_examples=40, deadline=None)
@given(models, contexts, st.integers(1, 7))
def test_kv_monotone_in_sequences(name, ctx, batch):
    one = kv_cache(SPECS[name], RunSettings(context=ctx, batch=batch)).total
    more = kv_cache(SPECS[name], RunSettings(context=ctx, batch=batch + 1)).total
    assert one <= more


@settings(max_examples=40, deadline=None)
@given(models, contexts)
def test_quantized_kv_never_larger(name, ctx):
    sizes = [kv_cache(SPECS[name], RunSettings(context=ctx, kv_cache_dtype=t)).total for t in ("f16", "q8_0", "q4_0")]
    assert sizes == sorted(sizes, reverse=True)


@settings(max_examples=30, deadline=None)
@given(models)
def test_k_quant_ladder(name):
    spec = SPECS[name]
    from fitprobe.estimator.quant import weight_bytes
    ladder = ["BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K"]
    sizes = [weight_bytes(spec, TABLE.find(q), TABLE).total for q in ladder]
    assert sizes == sorted(sizes, reverse=True)


@settings(max_examples=50, deadline=None)
@given(models, st.integers(1, 131_072), st.floats(8, 200), st.integers(0, 100))
def test_breakdown_adds_up_and_verdict_is_consistent(name, ctx, gib, ngl):
    spec = SPECS[name]
    hw = Hardware(devices=[Device(name="gpu", memory_bytes=int(gib * GIB))], system_ram_bytes=512 * GIB)
    st_ = RunSettings(context=ctx, gpu_layers=ngl)
    mem = estimate(spec, TABLE.find("Q4_K_M"), TABLE, st_, hw)
    assert mem.total_bytes == mem.weights_bytes + mem.kv_cache_bytes + mem.buffers_bytes
    assert mem.total_bytes == sum(d.total_bytes for d in mem.per_device)
    duplicate = mem.weights_bytes > 0 and spec.tied_embeddings  # output head duplicated on the GPU
    embd = mem.host_weights_bytes if ngl > spec.n_layers else None
    if not duplicate:
        assert mem.weights_bytes + mem.host_weights_bytes == mem.model_file_bytes
    elif embd is not None:
        assert mem.weights_bytes + mem.host_weights_bytes > mem.model_file_bytes
    v = judge(mem, hw, error_band=0.05)
    if v.status == "exceeds":
        assert v.margin_bytes < 0
    else:
        assert v.margin_bytes >= 0


@settings(max_examples=30, deadline=None)
@given(models, st.integers(1, 65_536))
def test_more_memory_never_hurts(name, ctx):
    spec, fmt = SPECS[name], TABLE.find("Q4_K_M")
    order = {"exceeds": 0, "tight": 1, "fits": 2}
    last = -1
    for gib in (8, 16, 24, 48, 80, 141, 192, 288, 640):
        hw = Hardware(devices=[Device(name="gpu", memory_bytes=gib * GIB)])
        status = judge(estimate(spec, fmt, TABLE, RunSettings(context=ctx), hw), hw, error_band=0.05).status
        assert order[status] >= last
        last = order[status]
