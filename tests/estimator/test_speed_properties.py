"""Speed model invariants (hypothesis): more bandwidth or compute never slows a plan down, moving work to
system RAM never speeds it up, and the calibration only ever enters as data passed in."""
from functools import lru_cache

from hypothesis import given, settings
from hypothesis import strategies as st

from fitprobe.catalogs.gpus import find_gpu
from fitprobe.catalogs.quants import quant_table
from fitprobe.catalogs.resolve import resolve
from fitprobe.catalogs.speed_calibration import load_calibration
from fitprobe.estimator.fields import replace
from fitprobe.estimator.hardware import Hardware
from fitprobe.estimator.memory import estimate
from fitprobe.estimator.quant import weight_bytes
from fitprobe.estimator.settings import RunSettings
from fitprobe.estimator.speed import estimate_speed

MODELS = ("llama-3.1-8b-instruct", "qwen3-30b-a3b", "gpt-oss-20b")
GPUS = ("RTX 4090", "RTX 3090", "RX 7900 XTX", "M4 Max 128GB", "DGX Spark", "Ryzen AI Max+ 395 128GB")
CAL = load_calibration()


@lru_cache(maxsize=None)
def _model(name):
    spec = resolve(name).spec
    table = quant_table()
    fmt = table.find("Q4_K_M")
    return spec, fmt, table, weight_bytes(spec, fmt, table)


def _speed(name, device, *, count=1, ram_bw=None, threads=None, **kw):
    spec, fmt, table, w = _model(name)
    cpu_moe = kw.pop("cpu_moe_layers", 0)
    s = RunSettings(quant="Q4_K_M", context=4096, cpu_moe_layers=cpu_moe, **kw)
    hw = Hardware(devices=[device] * count, system_ram_bytes=256 << 30, ram_bandwidth_gbs=ram_bw, cpu_threads=threads)
    return estimate_speed(spec, w, s, hw, estimate(spec, fmt, table, s, hw, weights=w), calibration=CAL)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(GPUS), st.floats(1.05, 4.0))
def test_more_bandwidth_is_never_slower(name, gpu, factor):
    dev = find_gpu(gpu).device()
    faster = replace(dev, bandwidth_gbs=dev.bandwidth_gbs * factor)
    a, b = _speed(name, dev), _speed(name, faster)
    assert b.decode_tps >= a.decode_tps
    assert (b.prefill_tps or 0) >= (a.prefill_tps or 0)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from([g for g in GPUS if not g.startswith("M4")]), st.floats(1.05, 4.0))
def test_more_tflops_never_slows_prefill_or_decode(name, gpu, factor):
    dev = find_gpu(gpu).device()
    faster = replace(dev, fp16_tflops=dev.fp16_tflops * factor,  # llama.cpp's CUDA matmuls run at the INT8 rate
                     int8_tops=dev.int8_tops * factor if dev.int8_tops else None)
    a, b = _speed(name, dev), _speed(name, faster)
    assert b.prefill_tps >= a.prefill_tps
    assert b.decode_tps >= a.decode_tps  # batch 1 decode is reads or, on slow ALUs, matrix-vector work


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(GPUS), st.floats(1.05, 4.0))
def test_lower_decode_mfu_is_never_faster(name, gpu, factor):
    dev = find_gpu(gpu).device()
    slow = replace(CAL, backends={k: replace(v, decode_compute=v.decode_compute / factor)
                                  for k, v in CAL.backends.items()})
    spec, fmt, table, w = _model(name)
    s = RunSettings(quant="Q4_K_M", context=4096)
    hw = Hardware(devices=[dev])
    mem = estimate(spec, fmt, table, s, hw, weights=w)
    assert estimate_speed(spec, w, s, hw, mem, calibration=slow).decode_tps <= \
        estimate_speed(spec, w, s, hw, mem, calibration=CAL).decode_tps * (1 + 1e-9)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MODELS), st.integers(0, 24), st.integers(1, 24))
def test_more_layers_on_the_cpu_is_never_faster(name, fewer_off, more):
    dev = find_gpu("RTX 4090").device()
    n = _model(name)[0].n_layers
    on_gpu = max(0, n - fewer_off)
    a = _speed(name, dev, gpu_layers=on_gpu, ram_bw=89.6, threads=16)
    b = _speed(name, dev, gpu_layers=max(0, on_gpu - more), ram_bw=89.6, threads=16)
    assert b.decode_tps <= a.decode_tps * (1 + 1e-9)
    assert b.cpu_bytes_per_token >= a.cpu_bytes_per_token


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(("qwen3-30b-a3b", "gpt-oss-20b")), st.integers(0, 20), st.integers(1, 20))
def test_more_experts_in_ram_is_never_faster(name, base, more):
    dev = find_gpu("RTX 4090").device()
    a = _speed(name, dev, cpu_moe_layers=base, ram_bw=89.6, threads=16)
    b = _speed(name, dev, cpu_moe_layers=base + more, ram_bw=89.6, threads=16)
    assert b.decode_tps <= a.decode_tps * (1 + 1e-9)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(MODELS), st.integers(1, 32), st.integers(1, 32), st.floats(20, 400))
def test_cpu_only_more_cores_or_ram_bandwidth_is_never_slower(name, threads, extra, ram_bw):
    spec, fmt, table, w = _model(name)
    s = RunSettings(quant="Q4_K_M", context=4096)

    def cpu(t, bw):
        hw = Hardware(devices=[], system_ram_bytes=256 << 30, ram_bandwidth_gbs=bw, cpu_threads=t)
        return estimate_speed(spec, w, s, hw, estimate(spec, fmt, table, s, hw, weights=w), calibration=CAL)

    base = cpu(threads, ram_bw)
    assert cpu(threads + extra, ram_bw).decode_tps >= base.decode_tps
    assert cpu(threads, ram_bw * 1.5).decode_tps >= base.decode_tps
    assert cpu(threads + extra, ram_bw).prefill_tps >= base.prefill_tps


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(MODELS), st.integers(2, 4))
def test_layer_split_never_beats_one_card_at_decode(name, count):
    dev = find_gpu("RTX 3090").device()
    assert _speed(name, dev, count=count).decode_tps <= _speed(name, dev).decode_tps * (1 + 1e-9)


def test_the_calibration_is_what_is_passed_in():
    dev = find_gpu("RTX 4090").device()
    slow = replace(CAL, backends={k: replace(v, bandwidth=v.bandwidth / 2) for k, v in CAL.backends.items()})
    spec, fmt, table, w = _model("llama-3.1-8b-instruct")
    s = RunSettings(quant="Q4_K_M", context=4096)
    hw = Hardware(devices=[dev])
    mem = estimate(spec, fmt, table, s, hw, weights=w)
    assert estimate_speed(spec, w, s, hw, mem, calibration=slow).decode_tps < \
        estimate_speed(spec, w, s, hw, mem, calibration=CAL).decode_tps


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(["RTX 4090", "RX 7900 XTX"]),
       st.sampled_from([16, 64, 128, 256, 512, 1024]))
def test_a_larger_micro_batch_never_slows_prefill(name, gpu, ubatch):
    """Bigger micro-batches reuse each weight tile over more tokens (and each expert sees more of them)."""
    dev = find_gpu(gpu).device()
    small, large = _speed(name, dev, ubatch=ubatch), _speed(name, dev, ubatch=ubatch * 2)
    assert large.prefill_tps >= small.prefill_tps * (1 - 1e-9)
