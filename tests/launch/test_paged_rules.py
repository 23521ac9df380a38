"""vLLM / SGLang: TP validity, PP over nodes with Ray, fp8 KV, max-model-len, quantization, offload."""
import pytest

from fitprobe.estimator.fields import replace
from fitprobe.estimator.launch import sglang, vllm
from fitprobe.estimator.launch.vllm import valid_tp

from planhelpers import flag, make_input


@pytest.mark.parametrize("tp,ok", [(1, True), (2, True), (4, True), (8, True), (3, False), (6, False), (16, True)])
def test_tp_must_divide_heads_and_fit_kv_heads_llama8b(tp, ok):
    spec = make_input("llama-3.1-8b-instruct", "H100 SXM").spec  # 32 heads, 8 KV heads
    assert valid_tp(spec, tp) is ok


def test_tp_kv_head_rule_phi4():
    spec = make_input("phi-4", "H100 SXM").spec  # 40 heads, 10 KV heads
    assert not valid_tp(spec, 8)  # 40 % 8 == 0 but 10 KV heads do not split over 8 ranks
    assert valid_tp(spec, 5) and valid_tp(spec, 10)
    p = vllm.plan(make_input("phi-4", "H100 SXM", 8, quant="BF16"))
    assert flag(p, "--tensor-parallel-size").value == "5"
    assert any("uses 5 of 8 GPUs" in n for n in p.notes)


def test_three_gpus_use_a_valid_tp():
    p = vllm.plan(make_input("qwen3-32b", "RTX 4090", 3, quant="AWQ", ctx=32768))
    assert p.tensor_parallel == 2


def test_pipeline_parallel_over_nodes_with_ray():
    p = vllm.plan(make_input("deepseek-v3", "H100 SXM", 16, quant="FP8", ctx=32768))
    assert p.fits and (p.tensor_parallel, p.pipeline_parallel, p.nodes) == (8, 2, 2)
    assert flag(p, "--pipeline-parallel-size").value == "2"
    assert flag(p, "--distributed-executor-backend").value == "ray"
    assert p.setup[0].startswith("ray start --head") and "ray start --address=" in p.setup[1]
    assert flag(p, "--enable-expert-parallel") is not None
    assert flag(p, "--quantization").value == "fp8" and "quantization_config" in flag(p, "--quantization").reason


def test_fp8_kv_only_when_it_decides_fit():
    p = vllm.plan(make_input("llama-3.1-8b-instruct", "RTX 4090", quant="BF16", ctx=65536))
    assert p.fits and p.context == 65536 and flag(p, "--kv-cache-dtype").value == "fp8"
    small = vllm.plan(make_input("llama-3.1-8b-instruct", "RTX 4090", quant="BF16", ctx=8192))
    assert flag(small, "--kv-cache-dtype") is None


def test_max_model_len_is_the_largest_that_fits():
    inp = make_input("llama-3.1-8b-instruct", "RTX 4090", quant="BF16", ctx=131072, kv="auto")
    p = vllm.plan(inp)
    assert p.fits and 4096 <= p.context < 131072 and p.context % 16 == 0
    assert flag(p, "--max-model-len").value == str(p.context)
    from fitprobe.estimator.launch.common import size
    bigger = replace(inp.settings, context=p.context + 16)
    assert not size(inp, inp.fmt, bigger).ok


def test_cpu_offload_is_the_last_resort_and_says_it_is_slow():
    p = vllm.plan(make_input("llama-3.1-70b-instruct", "H100 SXM", quant="BF16", ctx=8192, ram_gib=256))
    short = vllm.plan(make_input("llama-3.1-70b-instruct", "H100 SXM", quant="BF16", ctx=8192, ram_gib=32))
    assert not short.fits  # offloaded weights must fit in RAM too
    off = flag(p, "--cpu-offload-gb")
    assert off is not None and int(off.value) > 0 and "slow" in off.reason


def test_sglang_flags():
    p = sglang.plan(make_input("llama-3.1-8b-instruct", "H100 SXM", 2, quant="BF16", ctx=32768))
    assert flag(p, "--tp").value == "2" and flag(p, "--context-length").value == "32768"
    assert 0.5 < float(flag(p, "--mem-fraction-static").value) < 0.95
    assert p.command.startswith("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct")


def test_no_paged_engine_without_gpu():
    p = vllm.plan(make_input("llama-3.1-8b-instruct", "cpu", quant="BF16", engine="vllm"))
    assert not p.fits
