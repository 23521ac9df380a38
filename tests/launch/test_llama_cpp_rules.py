"""llama.cpp / Ollama flag choice: full offload, KV quantization, partial offload, MoE expert offload, RPC."""
import pytest

from fitprobe.estimator.fields import replace
from fitprobe.estimator.launch import llama_cpp, ollama
from fitprobe.estimator.speed import estimate_speed

from planhelpers import flag, make_input


def test_fits_everything_on_gpu_with_context_as_asked():
    p = llama_cpp.plan(make_input("llama-3.1-8b-instruct", "RTX 4090", ctx=8192))
    assert p.fits and p.context == 8192
    assert flag(p, "-ngl").value == "33"  # 32 blocks + output layer
    assert flag(p, "--ctx-size").value == "8192" and flag(p, "--parallel").value == "1"
    assert flag(p, "-ctk") is None and flag(p, "--n-cpu-moe") is None
    assert all(f.reason for f in p.flags)


def test_kv_q8_only_when_kv_pressure_decides_fit():
    tight = llama_cpp.plan(make_input("llama-3.1-8b-instruct", "RTX 3060", ctx=65536))
    assert tight.fits and tight.context == 65536
    assert flag(tight, "-ctk").value == "q8_0" and flag(tight, "-ctv").value == "q8_0"
    assert "KV pressure" in flag(tight, "-ctk").reason
    assert flag(tight, "-ngl").value == "33"  # KV quantization was enough: no offload
    roomy = llama_cpp.plan(make_input("llama-3.1-8b-instruct", "RTX 3060", ctx=8192))
    assert flag(roomy, "-ctk") is None


def test_explicit_kv_type_is_kept():
    p = llama_cpp.plan(make_input("llama-3.1-8b-instruct", "RTX 3060", ctx=65536, kv="f16"))
    assert flag(p, "-ctk") is None
    assert p.gpu_layers < 33  # fits by offloading layers instead


def test_dense_partial_offload_picks_largest_layer_count_that_fits():
    inp = make_input("llama-3.1-70b-instruct", "RTX 4090", ctx=8192)
    p = llama_cpp.plan(inp)
    assert p.fits and 1 < p.gpu_layers < 81
    assert flag(p, "--n-cpu-moe") is None
    one_more = replace(inp.settings, engine="llama.cpp", gpu_layers=p.gpu_layers + 1)
    _, verdict, _ = inp.sizer.size(inp.fmt, one_more)
    # the largest that keeps the estimate's error band free: one more layer is tight or does not fit
    assert p.status == "fits" and verdict.status != "fits"
    assert "RAM" in flag(p, "-ngl").reason


def test_moe_keeps_experts_in_ram_when_that_beats_partial_offload():
    inp = make_input("qwen3-30b-a3b", "RTX 3060", quant="Q8_0", ctx=16384)
    p = llama_cpp.plan(inp)
    assert p.fits and p.cpu_moe_layers > 0
    assert flag(p, "-ngl").value == "49"  # every block's attention stays on the GPU
    assert flag(p, "--n-cpu-moe").value == str(p.cpu_moe_layers)
    w, _ = inp.sizer.weights(inp.fmt)
    moe = llama_cpp.cpu_read_per_token(inp, w, ngl=None, n_cpu_moe=p.cpu_moe_layers)
    assert moe > 0
    # the reason compares both levers by speed, and the faster one was chosen
    reason = flag(p, "--n-cpu-moe").reason
    chosen, other = (float(x.split(" tokens/s")[0]) for x in reason.split("~")[1:3])
    assert "-ngl" in reason and chosen > other
    # fewer experts in RAM would not fit on the GPU
    _, verdict, _ = inp.sizer.size(inp.fmt, replace(p.settings, cpu_moe_layers=p.cpu_moe_layers - 1))
    assert verdict.status in ("exceeds", "tight")  # tight: inside the error band, which the planner avoids


def test_multi_gpu_split_is_the_one_sized():
    p = llama_cpp.plan(make_input("llama-3.1-70b-instruct", "RTX 4090", 2, ctx=8192))
    split = [int(x) for x in flag(p, "--tensor-split").value.split(",")]
    assert sum(split) == 81  # 80 blocks + the output layer, as layer counts
    assert [d.layers for d in p.sized.mem.per_device] == [split[0], split[1] - 1]  # the split it was sized on
    shares = [d.total_bytes / d.usable_bytes for d in p.sized.mem.per_device]
    assert max(shares) <= 1 and max(shares) - min(shares) < 0.03  # balanced: no device left overflowing


def test_a_second_node_joins_only_when_the_first_is_not_enough():
    """Other nodes' GPUs run through ggml-rpc-server (every token crosses the network): a model that one
    node's GPUs hold runs there, its split naming only that node's devices."""
    inp16 = make_input("llama-3.1-8b-instruct", "RTX 3060", 16, quant="Q4_K_M", ctx=8192)
    small = llama_cpp.plan(inp16)
    assert small.nodes == 1 and not small.setup and all(f.flag != "--rpc" for f in small.flags)
    split = [int(x) for x in flag(small, "--tensor-split").value.split(",")]
    assert len(split) == 8 and sum(split) == 33
    assert [d.layers for d in small.sized.mem.per_device[8:]] == [0] * 8
    assert all(d.total_bytes == 0 for d in small.sized.mem.per_device[8:])
    inp8 = make_input("llama-3.1-8b-instruct", "RTX 3060", 8, quant="Q4_K_M", ctx=8192)
    one = llama_cpp.plan(inp8)

    def decode(inp, p):
        w = inp.sizer.weights(inp.table.find(p.quant))[0]
        return estimate_speed(inp.spec, w, p.settings, inp.hw, p.sized.mem, calibration=inp.calibration).decode_tps

    assert decode(inp16, small) == pytest.approx(decode(inp8, one))  # the empty node costs nothing
    big = llama_cpp.plan(make_input("llama-3.1-405b", "RTX 4090", 16, quant="Q4_K_M", ctx=4096))
    assert big.fits and big.nodes == 2 and flag(big, "--rpc").value == "node1:50052"
    assert any(s.startswith("ggml-rpc-server -H 0.0.0.0 -p 50052") for s in big.setup)


def test_cpu_only_runs_every_layer_on_cpu():
    p = llama_cpp.plan(make_input("llama-3.1-8b-instruct", "cpu", ctx=8192))
    assert p.fits and flag(p, "-ngl").value == "0" and p.total_bytes == 0


def test_shorter_context_when_ram_is_the_limit():
    p = llama_cpp.plan(make_input("llama-3.1-8b-instruct", "cpu", ctx=131072, ram_gib=16, kv="f16"))
    assert p.fits and 4096 <= p.context < 131072 and p.context % 256 == 0
    assert "largest context" in flag(p, "--ctx-size").reason


def test_parallel_sequences_multiply_the_total_context():
    p = llama_cpp.plan(make_input("llama-3.1-8b-instruct", "RTX 4090", ctx=8192, batch=4))
    assert flag(p, "--ctx-size").value == str(4 * 8192) and flag(p, "--parallel").value == "4"


def test_ollama_environment_and_kv_type():
    p = ollama.plan(make_input("llama-3.1-8b-instruct", "RTX 3060", ctx=65536))
    assert p.env["OLLAMA_CONTEXT_LENGTH"] == "65536" and p.env["OLLAMA_KV_CACHE_TYPE"] == "q8_0"
    assert p.env["OLLAMA_FLASH_ATTENTION"] == "1"
    assert "ollama serve" in p.command and "ollama run" in p.command
