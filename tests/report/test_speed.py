"""Speed model: the formula on hand-checkable cases, placement, TP, batching, calibration accuracy."""
import re
import statistics
from math import exp

import pytest

from fitprobe.estimator.fields import replace
from fitprobe.catalogs.gpus import find_gpu, load_gpus
from fitprobe.catalogs.quants import quant_table
from fitprobe.catalogs.resolve import resolve
from fitprobe.catalogs.speed_calibration import load_calibration, load_points, point_inputs, tensor_rate
from fitprobe.estimator.hardware import Hardware
from fitprobe.estimator.memory import estimate
from fitprobe.estimator.quant import weight_bytes
from fitprobe.estimator.settings import RunSettings
from fitprobe.i18n import say
from fitprobe.estimator.speed import DEFAULT_CPU_GHZ, backend_key, estimate_speed, matmul_params, quant_family

CAL = load_calibration()


def _run(model, gpu, n=1, **st):
    spec = resolve(model).spec
    table = quant_table()
    settings = RunSettings(**st)
    fmt = table.find(settings.quant)
    w = weight_bytes(spec, fmt, table)
    hw = Hardware(devices=[find_gpu(gpu).device()] * n) if gpu else Hardware(devices=[], system_ram_bytes=64 << 30)
    mem = estimate(spec, fmt, table, settings, hw, weights=w)
    return spec, w, settings, hw, mem, estimate_speed(spec, w, settings, hw, mem, calibration=CAL)


def test_decode_is_bytes_over_bandwidth_plus_fixed():
    spec, w, st, hw, mem, s = _run("llama-3.1-8b-instruct", "RTX 4090", context=4096)
    eff = s.efficiency
    read = sum(w.per_layer) + w.output + mem.kv.total  # dense: every block, the head and the KV
    assert s.bytes_per_token == pytest.approx(read, rel=1e-6)
    chip = CAL.device_bandwidth(hw.devices[0], s.backend)  # the RTX 4090's measured share on CUDA
    t_ms = read / (1008e9 * eff.bandwidth * chip) * 1e3 + eff.fixed_ms
    assert s.decode_tps == pytest.approx(1e3 / t_ms, rel=1e-6)
    assert s.bound == "GPU bandwidth" and s.cpu_bytes_per_token == 0


def test_a_tied_head_is_read_every_step():
    # Llama-3.2-3B ties its output head to token_embd: llama.cpp loads that matrix again as the output layer
    # (TENSOR_DUPLICATED) and reads all 128256 x 3072 of it per token. In a GGUF `w.output` holds only the output
    # norm, so the head's bytes are token_embd's; the speed had counted the norm alone (-0.3 GB per step).
    spec, w, st, hw, mem, s = _run("llama-3.2-3b-instruct", "RTX 4090", context=4096)
    assert spec.tied_embeddings and w.token_embd > 100 * w.output
    assert s.bytes_per_token == pytest.approx(sum(w.per_layer) + w.output + w.token_embd + mem.kv.total, rel=1e-6)


def test_a_step_without_logits_skips_the_head_and_what_follows_the_output_rows():
    """llama-bench's pp512 at -ub 1 times decode steps that need no logits: llama.cpp keeps only the output rows
    after the last block's attention (src/models/llama.cpp), so that block's FFN and the output layer go unread;
    Gemma 4 keeps every row to its output norm (src/models/gemma4.cpp), so only its head goes unread."""
    from fitprobe.estimator.speed import decode_terms
    from fitprobe.estimator.tensors import inventory

    spec, w, st, hw, mem, _ = _run("llama-3.1-8b-instruct", "RTX 4090", context=4096)
    full = decode_terms(spec, w, st, hw, mem)
    bare = decode_terms(spec, w, st, hw, mem, outputs=False)
    last = [t for t in inventory(spec) if t.layer == spec.n_layers - 1 and t.quantizable]
    ffn = sum(t.n for t in last if "ffn_" in t.name) / sum(t.n for t in last)
    assert 0.75 < ffn < 0.85  # 3 x 4096 x 14336 of the block's 218M weights
    skipped = w.output + w.per_layer[-1] * ffn
    assert sum(full.device_dense) - sum(bare.device_dense) == pytest.approx(skipped, rel=1e-6)
    assert sum(bare.device_params) < sum(full.device_params)

    spec, w, st, hw, mem, _ = _run("gemma-4-26b-a4b-it", "RTX 4090", context=4096)
    full = decode_terms(spec, w, st, hw, mem)
    bare = decode_terms(spec, w, st, hw, mem, outputs=False)
    assert sum(full.device_dense) - sum(bare.device_dense) == pytest.approx(w.output + w.token_embd, rel=1e-6)
    assert bare.device_expert == full.device_expert


def test_a_chip_reads_and_computes_at_its_measured_share():
    """A chip's factor scales its backend's η in decode and its MFU in prefill, says so in a note, and every
    Mac carrying one Apple chip shares that chip's factor."""
    import copy

    from fitprobe.catalogs.speed_calibration import DeviceFactor
    from fitprobe.estimator.speed import chip_key

    cal = copy.deepcopy(CAL)
    cal.device_factors = [DeviceFactor(chip="rtx-4090", backend="llama.cpp/cuda", bandwidth=0.5, compute=0.25,
                                       points=3, sources=2)]
    spec, w, st, hw, mem, _ = _run("llama-3.1-8b-instruct", "RTX 4090", context=4096)
    half = estimate_speed(spec, w, st, hw, mem, calibration=cal)
    cal.device_factors = []
    plain = estimate_speed(spec, w, st, hw, mem, calibration=cal)
    assert half.gpu_ms == pytest.approx(2 * plain.gpu_ms, rel=1e-9) and half.overhead_ms == plain.overhead_ms
    assert half.prefill_tps < plain.prefill_tps / 3  # compute bound at 512-token micro-batches: ~4x slower
    assert any("RTX 4090 on llama.cpp/cuda: 0.50" in n and "(runs: 3, sources: 2)" in n for n in half.notes)
    assert not any("as measured on this chip" in n for n in plain.notes)
    from fitprobe.catalogs.gpus import load_gpus

    macs = [e.device() for e in load_gpus() if e.key in ("apple-m2-ultra-64gb", "mac-studio-m2-ultra-192gb")]
    assert len(macs) == 2
    assert {chip_key(d) for d in macs} == {"Apple M2 Ultra"}


def test_prefill_and_ttft_from_compute():
    spec, w, st, hw, mem, s = _run("llama-3.1-8b-instruct", "RTX 4090", context=8192)
    assert s.ttft_ms == pytest.approx(s.prompt_tokens / s.prefill_tps * 1e3)
    n_active, _ = matmul_params(spec)
    # the first micro-batch (no depth) alone is at least 2·N·512 FLOPs at MFU × peak
    floor = 2 * n_active * 4096 / (165.2e12 * s.efficiency.compute) * 1e3
    assert s.ttft_ms > floor


def test_llama_cpp_cuda_prefill_is_priced_on_the_int8_tensor_rate():
    """llama.cpp's quantized CUDA matmuls run on the INT8 tensor cores (MMQ), where an A100 (624 TOPS) is slower than
    an RTX 4090 (660.6), although its FP32-accumulate FP16 figure (312) is 1.9x the 4090's (165.2). An RTX A5000
    (GA102 pro, 222.2 TOPS) was planned at 2.2x its published gpt-oss-20b prefill. vLLM's BF16 GEMMs keep the FP16
    figure."""
    def prefill(gpu, engine):
        return _run("llama-3.1-8b-instruct", gpu, context=8192, engine=engine)[-1].prefill_tps

    a100, rtx4090 = find_gpu("A100 SXM4 80GB").device(), find_gpu("RTX 4090").device()
    ratio = prefill("A100 SXM4 80GB", "llama.cpp") / prefill("RTX 4090", "llama.cpp")
    assert ratio == pytest.approx(a100.int8_tops / rtx4090.int8_tops, rel=0.15)  # was ~1.9
    # a GeForce card's figure is as before (its fitted chip factor aside)
    assert tensor_rate(rtx4090, "llama.cpp/cuda") == pytest.approx(rtx4090.fp16_tflops, rel=1e-3)
    assert prefill("A100 SXM4 80GB", "vllm") > 1.5 * prefill("RTX 4090", "vllm")


def test_moe_reads_only_active_experts_and_batch_touches_more():
    *_, s1 = _run("qwen3-30b-a3b", "H100 SXM", quant="Q4_K_M", context=4096)
    spec, w, *_ = _run("qwen3-30b-a3b", "H100 SXM", quant="Q4_K_M", context=4096)
    experts = sum(w.experts_per_layer)
    assert s1.bytes_per_token < w.total - experts * (1 - 8 / 128) + 1e9
    *_, s8 = _run("qwen3-30b-a3b", "H100 SXM", quant="Q4_K_M", context=4096, batch=8)
    touched = 1 - (1 - 8 / 128) ** 8
    assert s8.bytes_per_token > s1.bytes_per_token
    assert s8.aggregate_tps > s1.aggregate_tps and s8.decode_tps < s1.decode_tps
    assert s8.aggregate_tps == pytest.approx(8 * s8.decode_tps)
    assert touched < 1


def test_partial_offload_adds_cpu_time():
    *_, full = _run("llama-3.1-8b-instruct", "RTX 4090", context=4096)
    *_, part = _run("llama-3.1-8b-instruct", "RTX 4090", context=4096, gpu_layers=17)
    assert part.cpu_bytes_per_token > 0 and part.cpu_ms > 0
    assert part.decode_tps < full.decode_tps / 2  # a RAM-resident half dominates (FORMULAS §4.4)
    assert any("RAM bandwidth unknown" in n for n in part.notes)


def test_expert_offload_moves_only_active_expert_bytes():
    spec, w, st, hw, mem, gpu_only = _run("gpt-oss-20b", "RTX 4090", quant="MXFP4", context=4096)
    s = estimate_speed(spec, w, st, hw, mem, cpu_expert_layers=spec.n_layers, calibration=CAL)
    moved = sum(w.experts_per_layer) * spec.moe.n_experts_used / spec.moe.n_experts
    assert s.cpu_bytes_per_token == pytest.approx(moved, rel=1e-6)
    assert s.decode_tps < gpu_only.decode_tps


def test_tensor_parallel_nvlink_beats_pcie():
    spec, w, st, _, _, _ = _run("llama-3.1-70b-instruct", "H100 SXM", 2, quant="FP8", engine="vllm", kv_cache_dtype="auto")
    table = quant_table()
    nv = find_gpu("H100 SXM").device()
    pcie = replace(nv, nvlink=False)
    out = {}
    for name, dev in (("nvlink", nv), ("pcie", pcie)):
        hw = Hardware(devices=[dev] * 2)
        mem = estimate(spec, table.find("FP8"), table, st, hw, weights=w)
        out[name] = estimate_speed(spec, w, st, hw, mem, calibration=CAL)
    assert out["nvlink"].decode_tps > out["pcie"].decode_tps
    assert out["pcie"].overhead_ms - out["nvlink"].overhead_ms == pytest.approx(2 * 80 * (100 - 20) / 1e3)
    hw1 = Hardware(devices=[nv])
    single = estimate_speed(spec, w, st, hw1, estimate(spec, table.find("FP8"), table, st, hw1, weights=w), calibration=CAL)
    assert out["nvlink"].gpu_ms == pytest.approx(single.gpu_ms / 2, rel=0.02)


def test_cpu_only_and_backend_keys():
    *_, s = _run("qwen3-0.6b", None, context=2048)
    assert s.backend == "llama.cpp/cpu" and s.prefill_tps is None  # no core count: no prefill
    assert any("core count unknown" in n for n in s.notes)
    assert backend_key("mlx", find_gpu("M4 Max 128GB").device()) == "mlx/metal"
    assert backend_key("llama.cpp", find_gpu("M2 Ultra 192GB").device()) == "llama.cpp/metal"
    assert backend_key("llama.cpp", find_gpu("RX 7900 XTX").device()) == "llama.cpp/hip"
    # Vulkan is one backend with a kernel path per vendor (coopmat2 on NVIDIA, coopmat on RDNA3, neither on Arc)
    assert backend_key("llama.cpp", find_gpu("RX 7900 XTX").device(), "vulkan") == "llama.cpp/vulkan-amd"
    assert backend_key("llama.cpp", find_gpu("RTX 4090").device(), "vulkan") == "llama.cpp/vulkan-nvidia"
    assert backend_key("llama.cpp", find_gpu("Arc A770").device(), "vulkan") == "llama.cpp/vulkan-intel"
    assert backend_key("llama.cpp", find_gpu("Arc A770").device()) == "llama.cpp/sycl"
    assert backend_key("ollama", find_gpu("RTX 4090").device()) == "llama.cpp/cuda"


def _cpu(threads, ram_bw, model="llama-3.1-8b-instruct", ghz=None, arch=None, calibration=CAL):
    spec = resolve(model).spec
    table = quant_table()
    st = RunSettings(context=2048)
    fmt = table.find(st.quant)
    w = weight_bytes(spec, fmt, table)
    hw = Hardware(devices=[], system_ram_bytes=64 << 30, ram_bandwidth_gbs=ram_bw, cpu_threads=threads, cpu_ghz=ghz,
                  cpu_arch=arch)
    return estimate_speed(spec, w, st, hw, estimate(spec, fmt, table, st, hw, weights=w), calibration=calibration)


def test_cpu_decode_is_capped_by_cores_and_by_ram():
    cpu = load_calibration().cpu
    two, many = _cpu(2, 89.6), _cpu(32, 89.6)
    assert two.decode_tps < many.decode_tps  # two cores cannot stream a dual-channel DDR5 system
    per_thread = cpu.gbs_per_ghz * DEFAULT_CPU_GHZ  # no clock given: the stated assumption
    assert two.cpu_ms == pytest.approx(two.bytes_per_token / (2 * per_thread * 1e9) * 1e3, rel=1e-6)
    assert many.cpu_ms == pytest.approx(many.bytes_per_token / (89.6 * cpu.bandwidth * 1e9) * 1e3, rel=1e-6)
    assert _cpu(32, 180).decode_tps > many.decode_tps
    s = cpu.serial_share  # 16× the threads, less Amdahl's serial share
    assert two.prefill_tps and many.prefill_tps == pytest.approx(16 * two.prefill_tps * (1 + s) / (1 + 31 * s),
                                                                 rel=1e-6)
    assert any("CPU clock unknown" in say(n) for n in two.notes)
    # the README's 2-vCPU VM (2.45 GHz EPYC): an 8B Q4_K_M (4.9 GB read per token) decodes at a few tokens/s,
    # not ~10. The published 2-thread x86 runs stream ~2.5 GB/s per thread per GHz (i5-4278U, i3-1315U).
    vm = _cpu(2, 89.6, ghz=2.445, arch="x86_64")
    assert 1.5 < vm.decode_tps < 3.5 and not any("CPU clock unknown" in say(n) for n in vm.notes)
    assert vm.bound == "CPU cores" and many.bound == "system RAM bandwidth"  # which of the two caps binds


def test_cpu_rates_follow_the_core_clock_and_the_instruction_set():
    """One core's dot products are compute-bound: where the cores (not the RAM) limit decode, and always in
    prefill, the rate scales with the clock; ARM cores run llama.cpp's NEON kernels at their own per-clock rate."""
    cpu = load_calibration().cpu
    slow, fast = _cpu(2, 400, ghz=2.0), _cpu(2, 400, ghz=4.0)
    assert fast.decode_tps > slow.decode_tps and fast.cpu_ms == pytest.approx(slow.cpu_ms / 2, rel=1e-6)
    assert fast.prefill_tps == pytest.approx(2 * slow.prefill_tps, rel=1e-6)
    arm, apple = _cpu(2, 400, ghz=2.0, arch="arm64"), _cpu(2, 400, ghz=2.0, arch="apple")
    assert cpu.arm_gbs_per_ghz and cpu.arm_gflops_per_ghz and cpu.apple_gbs_per_ghz  # fitted on published runs
    assert arm.cpu_ms == pytest.approx(slow.cpu_ms * cpu.gbs_per_ghz / cpu.arm_gbs_per_ghz, rel=1e-6)
    assert arm.prefill_tps == pytest.approx(slow.prefill_tps * cpu.arm_gflops_per_ghz / cpu.gflops_per_ghz, rel=1e-6)
    assert apple.cpu_ms == pytest.approx(slow.cpu_ms * cpu.gbs_per_ghz / cpu.apple_gbs_per_ghz, rel=1e-6)
    # a class without its own figure takes the nearest one's: apple -> arm64 -> x86_64
    bare = replace(cpu, apple_gbs_per_ghz=None, arm_gbs_per_ghz=None)
    assert bare.thread_gbs(2.0, "apple") == bare.thread_gbs(2.0, "arm64") == cpu.gbs_per_ghz * 2.0
    assert replace(cpu, apple_gbs_per_ghz=None).thread_gbs(3.0, "apple") == cpu.arm_gbs_per_ghz * 3.0
    # enough cores and clock: the RAM is the ceiling, and the clock no longer matters
    assert _cpu(64, 50, ghz=3.0).decode_tps == pytest.approx(_cpu(64, 50, ghz=5.0).decode_tps, rel=1e-9)


def test_cpu_prefill_threads_keep_a_serial_share():
    """ggml-cpu ends every graph node in a barrier across the threads, so a prompt does not split perfectly: n threads
    reach n / (1 + s·(n − 1)) of one thread's rate. The published thread sweeps (Graviton3 t4…t32, Grace, Graviton4)
    fit s; linear scaling priced PR 8908's 64-thread Threadripper prompt at 2.2× its measured rate."""
    cpu = load_calibration().cpu
    assert 0.002 < cpu.serial_share < 0.05  # fitted on the thread sweeps, not the bound
    one = cpu.thread_gflops(3.0, "arm64")
    for n in (1, 4, 32, 64):
        assert cpu.prefill_gflops(n, 3.0, "arm64") == pytest.approx(n * one / (1 + cpu.serial_share * (n - 1)))
    assert cpu.prefill_gflops(1, 3.0) == cpu.thread_gflops(3.0)
    # per thread, 32 threads reach well under 8 threads' rate; without the share they would scale linearly
    assert cpu.prefill_gflops(32, 3.0) / 32 < 0.9 * cpu.prefill_gflops(8, 3.0) / 8
    linear = replace(cpu, serial_share=0.0)
    assert linear.prefill_gflops(32, 3.0) == pytest.approx(4 * linear.prefill_gflops(8, 3.0))
    # a plan's prompt on 32 threads: the prefill rate is the Amdahl rate, decode does not use it
    many, flat = _cpu(32, 89.6, ghz=3.0), _cpu(32, 89.6, ghz=3.0, calibration=replace(CAL, cpu=linear))
    assert many.prefill_tps == pytest.approx(flat.prefill_tps / (1 + 31 * cpu.serial_share), rel=1e-6)
    assert many.decode_tps == pytest.approx(flat.decode_tps, rel=1e-9)


def test_atom_line_cores_do_half_an_x86_cores_work_per_clock():
    """An Intel N100's Gracemont cores run llama.cpp's AVX2 dot products on 128-bit datapaths, two halves each: a
    4-core N100 mini PC (one DDR5-4800 channel) is core-bound at half the x86 rate, as normiebench #38's N100 decoded
    Llama-3.1-8B Q4_K_M at 3.0 tok/s (an x86 core of the same clock would give the RAM's ~5)."""
    from fitprobe.estimator.speed import ATOM_VECTOR_SHARE

    cpu = load_calibration().cpu
    assert ATOM_VECTOR_SHARE == 0.5
    assert cpu.thread_gbs(3.4, "atom") == pytest.approx(cpu.thread_gbs(3.4, "x86_64") / 2)
    assert cpu.thread_gflops(3.4, "atom") == pytest.approx(cpu.thread_gflops(3.4) / 2)
    n100, x86 = _cpu(4, 38.4, ghz=3.4, arch="atom"), _cpu(4, 38.4, ghz=3.4, arch="x86_64")
    assert n100.bound == "CPU cores" and x86.bound == "system RAM bandwidth"
    assert n100.prefill_tps == pytest.approx(x86.prefill_tps / 2, rel=1e-6)
    assert 2.5 < n100.decode_tps < 3.8 < 4.5 < x86.decode_tps
    assert any("Atom-line" in say(n) for n in n100.notes) and not any("Atom-line" in say(n) for n in x86.notes)


def test_layer_split_prefill_does_not_add_the_gpus_tflops():
    spec, w, st, hw, mem, one = _run("llama-3.1-8b-instruct", "RTX 4090", context=8192)
    spec, w, st, hw2, mem2, _ = _run("llama-3.1-8b-instruct", "RTX 4090", 2, context=8192)
    single = estimate_speed(spec, w, st, hw, mem, prompt_tokens=512, calibration=CAL)
    pair = estimate_speed(spec, w, st, hw2, mem2, prompt_tokens=512, calibration=CAL)
    assert pair.prefill_tps == pytest.approx(single.prefill_tps, rel=0.03)  # one micro-batch: one after another
    long_one = estimate_speed(spec, w, st, hw, mem, prompt_tokens=4096, calibration=CAL)
    long_two = estimate_speed(spec, w, st, hw2, mem2, prompt_tokens=4096, calibration=CAL)
    eff = long_two.efficiency
    ideal = 4 * 2 / (4 + 2 - 1)  # 4 micro-batches of one n_batch over 2 devices
    assert long_two.prefill_tps == pytest.approx(long_one.prefill_tps * (1 + eff.pipeline * (ideal - 1)), rel=0.03)
    assert long_two.prefill_tps < 2 * long_one.prefill_tps
    assert any("layer split" in n for n in long_two.notes)


def test_a_layer_split_step_waits_at_each_device_boundary():
    """llama.cpp's layer split hands the hidden state from one device to the next every decode step, and the next
    device waits for the copy before its first kernel: each boundary costs t_split (measured on publications that ran
    one model on 1 and on 2-4 GPUs). Tensor parallel (vLLM) pays all-reduces instead; a device the split leaves
    empty is no boundary."""
    from fitprobe.estimator.speed import ALLREDUCE_US, DecodeTerms, split_boundaries

    cuda = CAL.backends["llama.cpp/cuda"]
    assert 0.1 <= cuda.split_ms <= 0.5 and CAL.prior.split_ms == cuda.split_ms
    speeds = {n: _run("llama-3.1-8b-instruct", "RTX 4090", n, quant="Q4_K_M", context=4096)[-1] for n in (1, 2, 4)}
    for n in (2, 4):
        assert speeds[n].overhead_ms == pytest.approx(speeds[1].overhead_ms + (n - 1) * cuda.split_ms)
        assert speeds[n].gpu_ms == pytest.approx(speeds[1].gpu_ms)  # the same reads, one device after another
    assert speeds[1].decode_tps > speeds[2].decode_tps > speeds[4].decode_tps
    tp = _run("llama-3.1-8b-instruct", "H100 SXM", 2, engine="vllm", quant="BF16", context=4096)[-1]
    one = _run("llama-3.1-8b-instruct", "H100 SXM", 1, engine="vllm", quant="BF16", context=4096)[-1]
    layers = resolve("llama-3.1-8b-instruct").spec.n_layers
    assert tp.overhead_ms == pytest.approx(one.overhead_ms + 2 * layers * ALLREDUCE_US["nvlink"] / 1e3)
    terms = DecodeTerms(device_dense=[1.0, 0.0, 2.0], device_expert=[0.0, 0.0, 0.0], device_params=[1.0, 0.0, 2.0],
                        cpu_bytes=0.0, flops_per_token=1.0, n_layers=2, n_kernels=10, batch=1, parallel=False)
    assert split_boundaries(terms) == 1


def test_t_split_is_the_median_of_the_published_one_and_many_device_pairs():
    """t_split is measured, not fitted: fitted with η and t_fixed it took up their residuals (0.9 ms a boundary);
    a publication's runs of one model on 1 and N GPUs cancel them. The pairs are XiongjieDai's 1/2/4x RTX 3090 and
    4090 runs (May 2024) and PR 4766's 1/3x Tesla P40 (Jan 2024)."""
    from tests.scripthelpers import load_script

    sa = load_script("speed_accuracy")
    points = load_points().points
    key = lambda p: (p.source, p.model, p.quant, p.gpu)  # noqa: E731
    shared = {k for k in map(key, points) if sum(key(q) == k for q in points if q.kind == "decode") > 1}
    cases = [sa.Case(p) for p in points if p.kind == "decode" and key(p) in shared]
    pairs = sa.split_pairs(cases)
    assert {a.p.source for a, _ in pairs} == {"https://github.com/XiongjieDai/GPU-Benchmarks-on-LLM-Inference",
                                             "https://github.com/ggml-org/llama.cpp/pull/4766"}
    assert all(key(a.p) == key(b.p) and a.p.count < b.p.count for a, b in pairs)
    by_hand = statistics.median((1e3 / b.p.tps - 1e3 / a.p.tps) / (b.p.count - a.p.count)
                                for a, b in pairs)
    assert sa.split_ms(cases) == pytest.approx(by_hand) and by_hand > 0
    assert CAL.prior.split_ms == pytest.approx(by_hand, abs=5e-4)  # what --write rounded


def test_a_binned_apple_chip_computes_at_its_cores_share():
    """An M4 Max is sold with 32 or 40 GPU cores (36 GB: 32) and an M3 Max with 30 or 40; the shader figure is the
    40-core bin's, so the smaller bin prefills at its share of it (it was priced at the full bin's rate, and the
    36 GB M4 Max's published prompts then pulled the whole chip's factor down)."""
    for small, full, share in (("M4 Max 36GB", "M4 Max 128GB", 32 / 40), ("M3 Max 36GB", "M3 Max 64GB", 30 / 40)):
        a, b = find_gpu(small).device(), find_gpu(full).device()
        assert CAL.device_tflops(a, "llama.cpp/metal") == pytest.approx(share * CAL.device_tflops(b, "llama.cpp/metal"))
    m1 = find_gpu("M1 Max 64GB").device()  # its bin is not in the catalog: the chip's figure as published
    assert m1.gpu_cores is None and CAL.device_tflops(m1, "llama.cpp/metal") > 0


def test_apple_max_chips_get_prefill_and_ttft():
    for gpu in ("M3 Max 64GB", "M4 Max 128GB", "MacBook Pro M4 Max 128GB"):
        *_, s = _run("llama-3.1-8b-instruct", gpu, context=4096)
        assert s.prefill_tps and s.ttft_ms, gpu
    *_, m3 = _run("llama-3.1-8b-instruct", "M3 Max 64GB", context=4096)
    *_, m4 = _run("llama-3.1-8b-instruct", "M4 Max 128GB", context=4096)
    assert m4.prefill_tps > m3.prefill_tps  # 18.4 vs 14.2 shader TFLOPS (huggingface.js hardware.ts)


def test_quant_family_and_unknown_backend():
    assert [quant_family(q) for q in ("BF16", "Q8_0", "Q4_0", "Q4_K_M", "UD-Q4_K_XL", "IQ2_XXS", "MXFP4", "AWQ")] == \
        ["f16", "q8_0", "legacy", "k", "k", "iq", "mxfp4", "int4"]
    spec, w, st, hw, mem, _ = _run("qwen3-0.6b", "RTX 4090", context=2048)
    with pytest.raises(ValueError, match="unknown backend"):
        estimate_speed(spec, w, st, hw, mem, backend="opencl", calibration=CAL)
    vk = estimate_speed(spec, w, st, hw, mem, backend="vulkan", calibration=CAL)
    assert vk.backend == "llama.cpp/vulkan-nvidia"


def test_a_format_family_one_publication_measured_keeps_the_k_quants_rates():
    """φ and ψ apply to every model in a format on every engine: one publication's runs cannot tell the format from
    the rest of their setup (tt-inference-server's DeepSeek-R1 AWQ over 8 H100s, once the only int4 decode runs,
    took φ to its 0.4 floor; the i-quants' prefill is one V100 table's)."""
    cal, runs = load_calibration(), load_points()
    sources: dict[str, set[str]] = {}
    for p in runs.points:
        if p.gpu:
            sources.setdefault(quant_family(p.quant), set()).add(p.source)
    single = [f for f, s in sources.items() if len(s) == 1]
    assert "iq" in single and "int4" not in single
    for fam in single:
        q = cal.quant_rates(fam)
        assert (q.bandwidth, q.compute) == (1.0, 1.0), fam


def test_vllm_reads_4bit_awq_weights_faster_than_bf16_ones():
    # Marlin keeps most of the 4x of reading 4-bit weights at batch 1 (IST-DASLab/marlin README: near-ideal up to
    # batch 16-32); a fit that priced AWQ's bytes 2.5x slower had Llama-3.1-8B AWQ no faster than BF16 on a 4090
    runs = {}
    for quant in ("BF16", "AWQ"):
        *_, speed = _run("llama-3.1-8b-instruct", "RTX 4090", quant=quant, engine="vllm", context=2048,
                          kv_cache_dtype="auto")
        runs[quant] = speed.decode_tps
    assert runs["AWQ"] >= 1.6 * runs["BF16"]


def test_calibration_points_have_sources_and_accuracy_target():
    cal, runs = load_calibration(), load_points()
    assert len(runs.points) >= 120 and all(p.source.startswith("https://") for p in runs.points)
    assert len({p.source for p in runs.points}) >= 25
    for p in runs.points:  # a run's month is its build's: printed by the source, or inferred and said how
        assert p.date is None or re.fullmatch(r"20\d\d-(0[1-9]|1[0-2])", p.date), p.id
        assert not p.date_note or p.date, p.id
    assert all(e["what"] and e["why"] for e in runs.excluded)
    defines = {i for r in cal.device_rates for i in r.from_points}
    errors = {"decode": [], "prefill": []}
    for p in runs.points:
        if p.id in defines:
            continue  # these define the device's measured rate
        spec, w, st, hw, mem = point_inputs(p)
        s = estimate_speed(spec, w, st, hw, mem, prompt_tokens=p.tokens, prompt_depth=p.depth, calibration=cal,
                           backend=p.backend if p.engine == "llama.cpp" else None, n_batch=p.n_batch)
        est = s.aggregate_tps if p.kind == "decode" else s.prefill_tps
        if est is None:
            continue  # no compute figure for the device until a refit measures one (the script counts these apart)
        errors[p.kind].append(abs(est / p.tps - 1))
    # in-sample medians of the bundled fit on 584 points / 121 sources as a plan computes them: 7.1 % and 8.7 %
    # (scripts/speed_accuracy.py prints 4.4 % for decode: it prices CUDA graph builds from before 2026 at their own
    # t_fixed and older builds' decode at their drifted bandwidth share, a plan at the newest builds'); a refit
    # that fits its own points worse than 8 % / 15 % fails here
    assert statistics.median(errors["decode"]) <= 0.08
    assert statistics.median(errors["prefill"]) <= 0.15


def test_vllm_dense_single_stream_is_in_the_published_range():
    # vLLM's own serving numbers put Llama-3.1-8B BF16 at ~75 tok/s on one A100 40GB at concurrency 1
    # (johnmusgrave.com/p/vllm-throughput-latency-sweep-on, in the calibration); an H100 SXM has 2.15x the
    # bandwidth. Calibrating on an --enforce-eager run had put the H100 figure at ~65 tok/s.
    *_, a100 = _run("llama-3.1-8b-instruct", "A100 SXM4 40GB", quant="BF16", engine="vllm", context=2048,
                    kv_cache_dtype="auto")
    *_, h100 = _run("llama-3.1-8b-instruct", "H100 SXM", quant="BF16", engine="vllm", context=2048,
                    kv_cache_dtype="auto")
    assert 60 <= a100.decode_tps <= 90
    assert 100 <= h100.decode_tps <= 160


def test_soc_gpus_prefill_at_the_fitted_share_of_their_catalog_peak():
    cal = load_calibration()
    spark, strix = find_gpu("DGX Spark").device(), find_gpu("Ryzen AI Max+ 395 128GB").device()
    for dev, key in ((spark, "llama.cpp/cuda"), (strix, "llama.cpp/hip")):
        chip = cal.device_factor(dev, key)  # and the chip's own measured share, where it has one
        assert cal.device_tflops(dev, key) == pytest.approx(dev.fp16_tflops * cal.soc_compute
                                                            * (chip.compute if chip else 1.0))
    assert cal.soc_compute < 1  # power-shared SoCs reach less of their peak than discrete cards
    card = find_gpu("RTX 4090").device()
    own = cal.device_factor(card, "llama.cpp/cuda").compute
    assert cal.device_tflops(card, "llama.cpp/cuda") == pytest.approx(card.int8_tops / 4 * own)  # its MMQ rate


def test_apple_gpus_with_neural_accelerators_prefill_at_the_fitted_multiple_of_their_shader_rate():
    """The pinned build's Metal backend multiplies on the M5's GPU Neural Accelerators and on no earlier chip's: the
    same prompt on an M5 is priced at `apple_tensor_compute` × the shader rate, an M4 or M3 at the shader rate."""
    from fitprobe.estimator.speed import apple_gpu_tensor

    cal = load_calibration()
    rate = {c.chip: c.tflops for c in cal.apple_compute}
    assert 1 < cal.apple_tensor_compute <= 4  # fitted on the M5 runs; 4 is A19's matrix / SIMD ratio per core
    for name, chip, tensor in (("Apple M5 16GB", "Apple M5", True), ("MacBook Pro M5 Max 128GB", "Apple M5 Max", True),
                               ("Apple M4 Max 48GB", "Apple M4 Max", False),
                               ("Apple M3 Pro 36GB", "Apple M3 Pro", False)):
        dev = find_gpu(name).device()
        assert apple_gpu_tensor(dev) is tensor, name
        own = cal.device_factor(dev, "llama.cpp/metal")
        expected = rate[chip] * (cal.apple_tensor_compute if tensor else 1.0) * (own.compute if own else 1.0)
        assert cal.device_tflops(dev, "llama.cpp/metal") == pytest.approx(expected), name
    assert not apple_gpu_tensor(find_gpu("RTX 4090").device())


def test_moe_expert_kernels_add_their_latency_dense_models_do_not():
    from fitprobe.estimator.speed import decode_parts, decode_terms

    cal = load_calibration()
    eff = replace(cal.efficiency("llama.cpp/cuda"), moe_ms=3.2)
    none = replace(eff, moe_ms=0.0)
    for model, quant, moe in (("qwen3-30b-a3b", "Q4_K_M", True), ("llama-3.1-8b-instruct", "Q4_K_M", False)):
        spec, w, st, hw, mem, _ = _run(model, "RTX 4090", quant=quant, context=4096)
        t = decode_terms(spec, w, st, hw, mem)
        args = dict(ram_bw_gbs=None, threads=None, tflops=None)
        with_latency = decode_parts(t, hw.devices, eff, cal.quant_rates("k"), cal.cpu, **args)["GPU bandwidth"]
        without = decode_parts(t, hw.devices, none, cal.quant_rates("k"), cal.cpu, **args)["GPU bandwidth"]
        if moe:  # 48 MoE blocks x 3.2 ms / 32 = 4.8 ms of expert-kernel latency on top of the reads
            assert with_latency == pytest.approx(without + 4.8)
        else:
            assert with_latency == without


def test_slow_alus_make_decode_compute_bound():
    # an M1 Max (10.4 shader TFLOPS for 400 GB/s) decodes a 70B Q4_K_M at 4.3 tok/s (XiongjieDai, in the
    # calibration), under half its bandwidth roofline: the matrix-vector work, not the reads, sets the pace
    from fitprobe.estimator.speed import decode_parts, decode_terms

    cal = load_calibration()
    eff = cal.efficiency("llama.cpp/metal")
    spec, w, st, hw, mem, _ = _run("llama-3.1-8b-instruct", "RTX 4090", quant="Q4_K_M", context=4096)
    t = decode_terms(spec, w, st, hw, mem)
    args = dict(ram_bw_gbs=None, threads=None, tflops=None)
    reads = decode_parts(t, hw.devices, eff, cal.quant_rates("k"), cal.cpu, **args)["GPU bandwidth"]
    slow = decode_parts(t, hw.devices, eff, cal.quant_rates("k"), cal.cpu, device_tflops=[1.0], **args)
    fast = decode_parts(t, hw.devices, eff, cal.quant_rates("k"), cal.cpu, device_tflops=[1e4], **args)
    assert fast["GPU bandwidth"] == reads
    assert slow["GPU bandwidth"] == pytest.approx(2 * t.device_params[0] / (1e12 * eff.decode_compute) * 1e3)
    assert slow["GPU bandwidth"] > reads
    n_all = matmul_params(spec)[1]
    assert t.device_params[0] == pytest.approx(n_all, rel=0.02)  # a dense model reads every weight once


def test_a_backend_without_points_takes_the_cross_backend_prior():
    cal = load_calibration()
    assert cal.prior is not None and cal.prior.calibrated
    cann = cal.efficiency("llama.cpp/cann")
    assert not cann.calibrated and cann.bandwidth == cal.prior.bandwidth and "prior" in cann.basis
    mlx = cal.efficiency("mlx/metal")  # same Apple GPU as llama.cpp's Metal backend
    assert not mlx.calibrated and mlx.bandwidth == cal.backends["llama.cpp/metal"].bandwidth


def test_moe_prefill_pays_for_few_tokens_per_expert():
    """A routed expert's matmuls see ubatch·k/E tokens: 512·8/128 = 32 on Qwen3-30B-A3B, so its micro-batches
    cost (32 + m½)/32 / κ of their FLOPs (JohannesGaessler's -ub tables, PR 15525/22298, show the loss). Where
    llama.cpp's MMQ runs them (CUDA/HIP) an expert computes whole tiles: on an H100 one 128-wide tile for its ~32
    tokens, of which it pays π of the 96 empty columns and m½ per tile."""
    from fitprobe.estimator.speed import prefill_terms, routed_params, tile_flops

    spec, w, st, hw, mem, s = _run("qwen3-30b-a3b", "H100 SXM", quant="Q4_K_M", context=8192)
    eff = s.efficiency
    assert eff.half_tokens > 0 and 0 < eff.expert_compute <= 1.5 and 0 <= eff.tile_padding <= 1
    t = prefill_terms(spec, w, st, hw, mem, tokens=512, depth=0)
    routed = 2 * routed_params(spec) * 512
    assert t.chunk_expert_flops == [pytest.approx(routed)] and t.expert_fraction == 8 / 128
    dense = t.chunk_flops[0] - routed
    reached = 1 - (1 - 8 / 128) ** 512  # every expert, to 14 digits
    by_hand = dense * (512 + eff.half_tokens) / 512 + routed * (32 + eff.half_tokens * reached) / 32 / eff.expert_compute
    assert tile_flops(t.chunk_flops[0], routed, 512, 8 / 128, eff) == pytest.approx(by_hand)
    width, tiles = t.chunk_expert_tiles[0]
    assert width == 128 and tiles == pytest.approx(1.0)
    padded = dense * (512 + eff.half_tokens) / 512 + routed * (
        32 + eff.tile_padding * (128 * reached - 32) + eff.half_tokens * reached) / 32 / eff.expert_compute
    assert tile_flops(t.chunk_flops[0], routed, 512, 8 / 128, eff, expert_tiles=(width, tiles)) == pytest.approx(padded)
    # the same micro-batch shrink costs a 128-expert MoE far more than a dense model
    loss = {}
    for model in ("qwen3-30b-a3b", "llama-3.1-8b-instruct"):
        *_, big = _run(model, "H100 SXM", quant="Q4_K_M", context=8192, ubatch=2048)
        *_, small = _run(model, "H100 SXM", quant="Q4_K_M", context=8192, ubatch=128)
        loss[model] = big.prefill_tps / small.prefill_tps
    assert loss["qwen3-30b-a3b"] > loss["llama-3.1-8b-instruct"] > 1


def test_deep_context_prefill_pays_the_attention_at_its_own_rate():
    """QKᵀ and PV over a deep context run in flash-attention kernels, not the weight matmuls: their FLOPs cost 1/α
    (ggerganov's M2 Ultra bench file: pp2048 at d32768 runs at 0.18-0.44x of d0 on Metal, Gemma-3's sliding
    window at 0.73x, slower than the FLOPs say)."""
    from fitprobe.estimator.speed import prefill_terms, tile_flops

    spec, w, st, hw, mem, s = _run("llama-3.1-8b-instruct", "H100 SXM", quant="Q4_K_M", context=40960)
    eff = s.efficiency
    assert 0 < eff.attention_compute <= 1.5
    deep = prefill_terms(spec, w, st, hw, mem, tokens=512, depth=32768)
    shallow = prefill_terms(spec, w, st, hw, mem, tokens=512, depth=0)
    attn = deep.chunk_attention_flops[0]
    assert attn > shallow.chunk_attention_flops[0] > 0
    assert deep.chunk_flops[0] - attn == pytest.approx(shallow.chunk_flops[0] - shallow.chunk_attention_flops[0])
    full, half = replace(eff, attention_compute=1.0), replace(eff, attention_compute=0.5)
    assert tile_flops(deep.chunk_flops[0], 0.0, 512, 0.0, half, attn) == pytest.approx(
        (deep.chunk_flops[0] - attn) * (512 + eff.half_tokens) / 512 + attn / 0.5)
    # a slower attention costs a deep prompt more than a fresh one
    ratio = {d: tile_flops(t.chunk_flops[0], 0.0, 512, 0.0, half, t.chunk_attention_flops[0])
             / tile_flops(t.chunk_flops[0], 0.0, 512, 0.0, full, t.chunk_attention_flops[0])
             for d, t in (("deep", deep), ("shallow", shallow))}
    assert ratio["deep"] > 1.5 > ratio["shallow"] > 1


def test_gpus_before_volta_decode_without_cuda_graphs():
    """ggml-cuda.cu of the pinned build replays a decode step as a CUDA graph only from GGML_CUDA_CC_VOLTA
    on: a P40 (6.1) launches every kernel, which costs the eager t_fixed instead of the graph one."""
    from fitprobe.estimator.speed import cuda_graphs

    spec, w, st, hw, mem, p40 = _run("llama-2-7b-hf", "Tesla P40", quant="Q4_0", context=4096)
    assert hw.devices[0].compute_capability == "6.1" and not cuda_graphs(hw.devices[0])
    as_ampere = Hardware(devices=[replace(hw.devices[0], compute_capability="8.6")])
    graphed = estimate_speed(spec, w, st, as_ampere, mem, calibration=CAL)
    eff = p40.efficiency
    assert eff.eager_fixed_ms is not None and eff.eager_fixed_ms > eff.fixed_ms
    assert p40.overhead_ms == pytest.approx(eff.eager_fixed_ms) and graphed.overhead_ms == pytest.approx(eff.fixed_ms)
    assert p40.decode_tps < graphed.decode_tps
    assert any("CUDA graphs" in n for n in p40.notes) and not any("CUDA graphs" in n for n in graphed.notes)
    assert cuda_graphs(find_gpu("V100 SXM2 32GB").device()) and cuda_graphs(replace(hw.devices[0], compute_capability=None))


def test_a_gpu_without_dp4a_runs_the_integer_dot_products_at_its_fp32_rate():
    """Compute capability 6.0 (Tesla P100) has no dp4a: llama.cpp's MMVQ (decode) and MMQ (routed experts) run
    byte-wise multiply-adds on its FP32 lanes, half the packed-FP16 figure the catalog gives it. Its F16 weights,
    other backends and dp4a cards (6.1 on) keep their figure."""
    from fitprobe.estimator.speed import NO_DP4A_SHARE, integer_dot_share, prefill_terms

    p100, p40 = find_gpu("Tesla P100 16GB PCIe").device(), find_gpu("Tesla P40").device()
    cuda = "llama.cpp/cuda"
    assert integer_dot_share(cuda, p100, "UD-Q4_K_XL") == NO_DP4A_SHARE == 0.5
    assert integer_dot_share(cuda, p40, "Q4_K_M") == 1
    assert integer_dot_share(cuda, p100, "F16") == 1
    assert integer_dot_share("llama.cpp/vulkan", p100, "Q4_K_M") == 1
    assert integer_dot_share(cuda, replace(p100, compute_capability=None), "Q4_K_M") == 1

    spec, w, st, hw, mem, s = _run("gpt-oss-20b", "Tesla P100 16GB PCIe", quant="MXFP4", context=4096)
    dp4a = Hardware(devices=[replace(hw.devices[0], compute_capability="6.1")])
    with_dp4a = estimate_speed(spec, w, st, dp4a, mem, calibration=CAL)
    assert s.decode_tps < with_dp4a.decode_tps  # its decode is bound by the dot products' rate
    assert any("no dp4a" in n for n in s.notes) and not any("no dp4a" in n for n in with_dp4a.notes)
    fast = replace(CAL, backends={k: replace(e, decode_compute=1e3) for k, e in CAL.backends.items()})
    assert estimate_speed(spec, w, st, hw, mem, calibration=fast).decode_tps == pytest.approx(
        estimate_speed(spec, w, st, dp4a, mem, calibration=fast).decode_tps)  # only the ALU bound differs
    assert prefill_terms(spec, w, st, hw, mem, tokens=512, depth=0).expert_rate == NO_DP4A_SHARE
    assert prefill_terms(spec, w, st, dp4a, mem, tokens=512, depth=0).expert_rate == 1


def test_a_plan_pays_the_recent_builds_step_overhead():
    """llama.cpp's CUDA step overhead fell through 2025-26 (kernel fusion, PDL on Hopper+): the graph builds from
    before 2026 calibrate with their own, larger t_fixed, and a plan (the pinned build) pays the recent one.
    PR 26767's master column (Aug 2026) ran Qwen3-4B Q4_K_M tg128 at 373 t/s on an RTX 5090; one t_fixed for all
    graph builds put it at ~240, the recent builds' one for every GPU at ~298 (-20 %, with the 5090's bandwidth
    share pushed to 1.21x the backend's to make up for it); with the share of t_fixed Hopper and newer keep in the
    builds since PDL it prints about what PR 26767 measured."""
    from fitprobe.estimator.speed import REFERENCE_KERNELS, step_kernels

    cuda = CAL.backends["llama.cpp/cuda"]
    assert CAL.earlier_fixed_ms["llama.cpp/cuda"] > cuda.fixed_ms
    assert CAL.earlier_eager_fixed_ms["llama.cpp/cuda"] > cuda.eager_fixed_ms  # GPUs without graphs fused fewer too
    spec, w, st, hw, mem, s = _run("qwen3-4b", "RTX 5090", quant="Q4_K_M", context=512)  # tg128 runs at depth 0
    assert s.overhead_ms == pytest.approx(cuda.fixed_ms * cuda.pdl_fixed * step_kernels(spec) / REFERENCE_KERNELS)
    as_before = estimate_speed(spec, w, st, hw, mem, calibration=replace(CAL, backends={
        **CAL.backends, "llama.cpp/cuda": replace(cuda, fixed_ms=CAL.earlier_fixed_ms["llama.cpp/cuda"])}))
    assert as_before.decode_tps < s.decode_tps
    assert 373 * 0.85 <= s.decode_tps <= 373 * 1.15


def test_hopper_and_newer_overlap_the_kernels_of_a_decode_step():
    """The pinned build's CUDA kernels wait on the one before them inside the kernel (PDL: ggml-cuda/common.cuh,
    __CUDA_ARCH__ >= GGML_CUDA_CC_HOPPER), so a step on compute capability 9.0 and newer keeps only pdl_fixed of
    t_fixed; an Ampere or Ada card, and Vulkan on a Blackwell card, pay all of it."""
    from fitprobe.estimator.speed import cuda_pdl

    cuda = CAL.backends["llama.cpp/cuda"]
    assert cuda.pdl_fixed is not None and 0.2 <= cuda.pdl_fixed < 1
    assert all(p.pdl_fixed is None for k, p in CAL.backends.items() if k != "llama.cpp/cuda")
    spec, w, st, hw, mem, h100 = _run("llama-3.1-8b-instruct", "H100 SXM", quant="Q4_K_M", context=4096)
    dev = hw.devices[0]
    assert cuda_pdl(dev) and not cuda_pdl(replace(dev, compute_capability="8.9"))
    assert not cuda_pdl(replace(dev, compute_capability=None))
    assert not cuda_pdl(replace(dev, compute_capability="gfx1201"))
    ada = Hardware(devices=[replace(dev, compute_capability="8.9")])
    as_ada = estimate_speed(spec, w, st, ada, mem, calibration=CAL)
    assert h100.overhead_ms == pytest.approx(as_ada.overhead_ms * cuda.pdl_fixed)
    assert h100.gpu_ms == as_ada.gpu_ms and h100.decode_tps > as_ada.decode_tps
    assert any("(PDL)" in say(n) for n in h100.notes) and not any("(PDL)" in say(n) for n in as_ada.notes)
    vulkan = estimate_speed(spec, w, st, hw, mem, calibration=CAL, backend="vulkan")
    assert vulkan.overhead_ms == pytest.approx(vulkan.efficiency.fixed_ms * as_ada.overhead_ms / cuda.fixed_ms)


def test_builds_before_2026_prefill_at_their_own_share_which_a_plan_does_not_pay():
    """The fit reads the runs of 2025 builds at their own share of the MFU, one per backend and Vulkan vendor (the
    shaders are shared, their paths are not: coopmat2 runs on NVIDIA only); a plan prefills at the recent builds'
    rate."""
    assert CAL.earlier_compute["llama.cpp/vulkan-amd"] < 0.8  # RADV and AMDVLK prompts gained most through 2025
    assert CAL.earlier_compute["llama.cpp/vulkan-amd"] != CAL.earlier_compute["llama.cpp/vulkan-nvidia"]
    spec, w, st, hw, mem, _ = _run("llama-3.1-8b-instruct", "RTX 4090", quant="Q4_K_M", context=4096)
    for key in ("vulkan", "cuda"):
        plain = estimate_speed(spec, w, st, hw, mem, calibration=CAL, backend=key)
        without = estimate_speed(spec, w, st, hw, mem, calibration=replace(CAL, earlier_compute={}), backend=key)
        assert plain.prefill_tps == without.prefill_tps and plain.decode_tps == without.decode_tps


def test_older_builds_decode_at_a_drifting_share_which_a_plan_does_not_pay():
    """The fit reads each backend's older decode runs at a bandwidth share that falls with the build's age (HIP's
    2025 runs sit 8-20 % below the 2026 ones on the same chips); a plan decodes at the newest runs' η."""
    assert CAL.bandwidth_drift["llama.cpp/hip"] > 0  # older HIP builds decoded slower
    assert all(-0.3 <= v <= 0.5 for v in CAL.bandwidth_drift.values())
    spec, w, st, hw, mem, _ = _run("llama-3.1-8b-instruct", "RX 7900 XTX", quant="Q4_K_M", context=4096)
    plain = estimate_speed(spec, w, st, hw, mem, calibration=CAL)
    without = estimate_speed(spec, w, st, hw, mem, calibration=replace(CAL, bandwidth_drift={}))
    assert plain.decode_tps == without.decode_tps and plain.prefill_tps == without.prefill_tps


def test_an_older_builds_compute_bound_decode_drifts_too():
    """The drift is the decode kernels' gain, not only their reads': where a chip's decode is bound by its ALUs (an M1
    Max, Vulkan on an RTX 5090) an older build's run is read at exp(-drift · age) of today's ALU rate as well."""
    from tests.scripthelpers import load_script

    sa = load_script("speed_accuracy")
    case = sa.Case(next(p for p in load_points().points if p.id == "x-m1max-8b-q4km-tg"))  # May 2024 build
    assert case.age > 2 and CAL.bandwidth_drift[case.key] > 0
    alu_bound = replace(CAL, backends={k: replace(e, decode_compute=1e-3) for k, e in CAL.backends.items()})
    drifting, still = case.estimate(alu_bound), case.estimate(replace(alu_bound, bandwidth_drift={}))
    kept = exp(-CAL.bandwidth_drift[case.key] * case.age)
    assert drifting < still and drifting == pytest.approx(still * kept, rel=0.02)  # the step is almost all ALU time


def test_a_rate_measured_on_older_builds_prices_only_their_runs():
    """A card without a TFLOPS figure whose runs span 2026 gets a measured rate per side (the R9700's HIP runs of Dec
    2025 prefill at about half the FLOPs/s of 2026's); a plan prefills at the recent builds' rate."""
    rates = [r for r in CAL.device_rates if r.gpu == "radeon-ai-pro-r9700" and r.backend == "llama.cpp/hip"]
    older = next(r for r in rates if r.earlier)
    recent = next(r for r in rates if not r.earlier)
    assert older.tflops < recent.tflops and not set(older.from_points) & set(recent.from_points)
    spec, w, st, hw, mem, s = _run("llama-3.1-8b-instruct", "Radeon AI PRO R9700", quant="Q4_K_M", context=4096)
    assert s.backend == "llama.cpp/hip" and s.prefill_tps

    def prefill(rates):
        return estimate_speed(spec, w, st, hw, mem, calibration=replace(CAL, device_rates=rates)).prefill_tps
    assert prefill([r for r in CAL.device_rates if not r.earlier]) == s.prefill_tps
    assert prefill([replace(older, earlier=False) if r == recent else r for r in CAL.device_rates if r != older]) \
        < s.prefill_tps


def test_a_card_without_runs_of_its_own_prefills_at_a_same_die_cards_measured_rate():
    """The GTX 1080 Ti and the Tesla P40 are one die (GP102): with no published prompt of its own and no catalog
    TFLOPS, the 1080 Ti prefills at the P40's measured rate × their clocks' ratio and says so. A card with runs of its
    own keeps its rate (the RX 9070 XT under HIP since VulkanForge's runs) and falls back on its sibling's (the R9700,
    one Navi 48) only without them, as when its source is held out of the fit."""
    ti, p40 = find_gpu("GTX 1080 Ti").device(), find_gpu("Tesla P40").device()
    sibling = CAL.borrowed_rate(ti, "llama.cpp/cuda")
    assert sibling and sibling.like == "tesla-p40" and 0.9 < sibling.scale < 1
    assert CAL.device_tflops(ti, "llama.cpp/cuda") == pytest.approx(CAL.device_tflops(p40, "llama.cpp/cuda")
                                                                     * sibling.scale)
    assert CAL.borrowed_rate(p40, "llama.cpp/cuda") is None  # its own runs
    rows = {g.key: g for g in load_gpus()}
    for sib in CAL.die_siblings:  # catalog keys of one die, neither with a compute figure to price it instead
        a, b = rows[sib.gpu], rows[sib.like]
        assert a.key != b.key and (a.architecture, a.compute_capability) == (b.architecture, b.compute_capability)
        assert not a.fp16_tflops and not b.fp16_tflops and sib.basis
    xt, r9700 = find_gpu("RX 9070 XT").device(), find_gpu("Radeon AI PRO R9700").device()
    assert CAL.borrowed_rate(xt, "llama.cpp/hip") is None
    without_xt = replace(CAL, device_rates=[r for r in CAL.device_rates if r.gpu != "rx-9070-xt"])
    fallback = without_xt.borrowed_rate(xt, "llama.cpp/hip")
    assert fallback and fallback.like == "radeon-ai-pro-r9700" and 1 < fallback.scale < 1.05
    assert without_xt.device_tflops(xt, "llama.cpp/hip") == pytest.approx(
        without_xt.device_tflops(r9700, "llama.cpp/hip") * fallback.scale)
    spec, w, st, hw, mem, s = _run("llama-3.1-8b-instruct", "GTX 1080 Ti", quant="Q4_K_M", context=4096)
    assert s.backend == "llama.cpp/cuda" and s.prefill_tps and s.ttft_ms
    assert any("tesla-p40" in n and "same die" in n for n in s.notes)
    alone = estimate_speed(spec, w, st, hw, mem, calibration=replace(CAL, die_siblings=[]))
    # without a compute figure decode has no compute bound either: never slower
    assert alone.prefill_tps is None and alone.decode_tps >= s.decode_tps


def test_a_speed_carries_its_backends_held_out_error():
    """The held-out error the fit script measured per backend rides on every estimate; MLX borrows Metal's fit and
    so its error; a backend without held-out runs has none (the JSON says null, the text says nothing)."""
    *_, s = _run("llama-3.1-8b-instruct", "RTX 4090", quant="Q4_K_M", context=4096)
    cuda = CAL.held_out["llama.cpp/cuda"]
    assert s.decode_error == cuda["decode"] and s.prefill_error == cuda["prefill"]
    assert 0 < cuda["decode"].median <= cuda["decode"].p90
    mlx = CAL.held_out_error("mlx/metal", "decode")
    assert mlx == CAL.held_out["llama.cpp/metal"]["decode"] and mlx.backend == "llama.cpp/metal"  # whose runs they are
    assert CAL.held_out_error("llama.cpp/cann", "decode") is None
    runs = load_points().points
    for key, kinds in CAL.held_out.items():  # no more runs counted than the calibration has
        for kind, e in kinds.items():
            assert e.points <= sum(1 for p in runs if p.kind == kind) and e.sources <= e.points


def test_recurrent_models_run_at_the_fitted_factor():
    spec, w, st, hw, mem, s = _run("qwen3-next-80b-a3b-thinking", "H100 SXM", quant="Q4_K_M", context=4096)
    assert spec.recurrent_layers and 0 < CAL.recurrent_factor <= 1
    plain = estimate_speed(spec, w, st, hw, mem, calibration=replace(CAL, recurrent_factor=1.0))
    assert s.decode_tps < plain.decode_tps and s.prefill_tps < plain.prefill_tps
    assert any(f"{CAL.recurrent_factor:.2f}×" in n for n in s.notes)
    # on the CPU cores alone too: decode streams and prefill computes at the same factor
    cpu, plain = (_cpu(16, 300, "qwen3.5-35b-a3b", 2.8, "arm64", calibration=c)
                  for c in (CAL, replace(CAL, recurrent_factor=1.0)))
    assert cpu.backend == "llama.cpp/cpu" and resolve("qwen3.5-35b-a3b").spec.recurrent_layers
    assert cpu.prefill_tps == pytest.approx(plain.prefill_tps * CAL.recurrent_factor)
    assert cpu.decode_tps < plain.decode_tps


def test_fixed_step_time_scales_with_the_kernels_a_step_runs():
    """t_fixed is quoted for Llama-2-7B's 290 weight matrices and norms; a Gemma-4 MoE block (q/k norms, pre/post
    norms, a shared MLP beside the experts) runs about twice a Llama block's kernels and pays for them."""
    from fitprobe.estimator.speed import REFERENCE_KERNELS, step_kernels

    assert step_kernels(resolve("llama-2-7b-hf").spec) == REFERENCE_KERNELS == 290
    gemma = resolve("gemma-4-26b-a4b-it").spec
    assert step_kernels(gemma) / gemma.n_layers > 1.9 * REFERENCE_KERNELS / 32
    for model in ("llama-3.1-8b-instruct", "gemma-4-26b-a4b-it"):
        spec, *_, s = _run(model, "RTX 4090", context=4096, quant="Q4_K_M")
        assert s.overhead_ms == pytest.approx(s.efficiency.fixed_ms * step_kernels(spec) / REFERENCE_KERNELS)


def test_layer_split_pipelines_micro_batches_only_fully_offloaded_without_overrides():
    """src/llama-context.cpp (b11434) l. 432: pipeline parallelism needs every block and the output layer on the
    devices and no tensor overrides; --n-cpu-moe is one (common/arg.cpp adds tensor_buft_overrides)."""
    from fitprobe.estimator.speed import prefill_terms

    spec, w, st, hw, mem, full = _run("qwen3-30b-a3b", "RTX 3090", n=2, quant="Q4_K_M", context=8192)
    assert prefill_terms(spec, w, st, hw, mem, tokens=4096, depth=0).chunks_per_batch == 4  # 2048 / 512
    assert prefill_terms(spec, w, st, hw, mem, tokens=4096, depth=0, cpu_expert_layers=4).chunks_per_batch == 1
    # the rule, not the fit: ρ (the share of the ideal pipeline gain the benchmarks show) fits near 0 on CUDA
    cuda = CAL.backends["llama.cpp/cuda"]
    pipelined = replace(CAL, backends={**CAL.backends, "llama.cpp/cuda": replace(cuda, pipeline=0.5)})
    full = estimate_speed(spec, w, st, hw, mem, calibration=pipelined)
    overridden = estimate_speed(spec, w, st, hw, mem, calibration=pipelined, cpu_expert_layers=1)
    assert overridden.ttft_ms > full.ttft_ms  # same placement in memory: only the pipeline is gone
    spec, w, st, hw, mem, _ = _run("qwen3-30b-a3b", "RTX 3090", n=2, quant="Q4_K_M", context=8192,
                                   gpu_layers=spec.n_layers)  # the output layer stays on the CPU
    assert prefill_terms(spec, w, st, hw, mem, tokens=4096, depth=0).chunks_per_batch == 1
