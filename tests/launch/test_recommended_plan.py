"""The recommended deployment: one plan whose command, verdict, memory and speed agree, found by a
search that finds the placements that exist (issue: "One answer a user can act on")."""
import json

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from fitprobe.cli import main
from fitprobe.estimator.fields import replace
from fitprobe.estimator.launch import llama_cpp
from fitprobe.estimator.launch.common import size

from planhelpers import flag, make_input

GIB = 1 << 30


def run_json(*args):
    result = CliRunner().invoke(main, [*args, "--json"])
    return result.exit_code, json.loads(result.output)


def test_partial_offload_found_when_ram_cannot_hold_the_whole_model():
    # 70B Q4_K_M is 39.6 GiB: with 32 GiB of RAM the old search tried -ngl 0 first and gave up
    code, o = run_json("plan", "llama-3.3-70b-instruct", "--gpu", "RTX 4090", "--ram-gib", "32")
    assert code == 0 and o["recommended"]["status"] != "exceeds"
    assert 30 < o["recommended"]["gpu_layers"] < 81
    assert o["asked"]["verdict"]["status"] == "exceeds"
    assert f"-ngl {o['recommended']['gpu_layers']}" in o["recommended"]["command"]
    assert any(c.startswith("-ngl") for c in o["recommended"]["changes"])
    # the top of the output describes that command: its settings, memory and speed
    assert o["settings"]["gpu_layers"] == o["recommended"]["gpu_layers"]
    assert o["memory"]["host_weights_bytes"] > 10 * GIB
    assert o["speed"]["decode_tps"] == o["launch"]["llama.cpp"]["speed"]["decode_tps"]
    assert round(o["speed"]["decode_tps"], 2) == o["recommended"]["decode_tps"]


def test_headline_speed_is_the_printed_commands_speed():
    code, o = run_json("plan", "gpt-oss-120b", "--gpu", "RTX 3090", "--ram-gib", "64")
    r = o["recommended"]
    assert code == 0 and r["cpu_moe_layers"] > 0 and f"--n-cpu-moe {r['cpu_moe_layers']}" in r["command"]
    assert o["speed"]["decode_tps"] < 80  # experts read from RAM: not the all-on-GPU figure (~170)
    assert o["speed"]["cpu_bytes_per_token"] > 0


def test_vllm_without_quant_sizes_the_checkpoint_it_loads():
    code, o = run_json("plan", "deepseek-r1", "--gpu", "H200", "--gpus", "8", "--engine", "vllm")
    assert o["settings"]["quant"] == o["recommended"]["quant"] == o["launch"]["vllm"]["quant"] == "FP8"
    assert o["asked"] is None  # the request ran as asked: nothing to contrast
    assert o["memory"]["weights_bytes"] > 600 * GIB  # FP8 weights, not a Q4_K_M GGUF (~395 GiB)


def test_layer_split_is_uneven_when_that_fits_and_pins_the_sized_memory():
    inp = make_input("llama-3.3-70b-instruct", "RTX 4090", 2, ctx=32768, kv="f16", ram_gib=64)
    p = llama_cpp.plan(inp)
    split = [int(x) for x in flag(p, "--tensor-split").value.split(",")]
    assert sum(split) == p.gpu_layers
    assert [d.layers for d in p.sized.mem.per_device] == [split[0], split[1] - 1]
    for d in p.sized.mem.per_device:
        assert d.total_bytes <= d.usable_bytes or p.gpu_layers < 81


def test_expert_offload_rebalances_the_split_across_gpus():
    # --n-cpu-moe moves the experts of the first blocks, which sit on GPU 0: the split gives GPU 0 more blocks
    p = llama_cpp.plan(make_input("gpt-oss-120b", "RTX 4090", 2, ram_gib=64))
    assert p.fits and p.cpu_moe_layers > 0
    split = [int(x) for x in flag(p, "--tensor-split").value.split(",")]
    assert split[0] > split[1]
    assert all(d.total_bytes <= d.usable_bytes for d in p.sized.mem.per_device)


def test_no_useless_tiny_context():
    # a card that holds the model only at ~2K tokens: the old planner printed --ctx-size 256 and called it TIGHT
    inp = make_input("llama-3.1-8b-instruct", "RTX 4090", ctx=2048, ram_gib=None)
    need = size(inp, inp.fmt, replace(inp.settings, context=2048, kv_cache_dtype="q8_0")).mem.total_bytes
    p = _plan_status("llama-3.1-8b-instruct", "RTX 4090", 1, 8192, None, memory=(need + 64 * 2**20) / 0.95 / GIB)
    assert not p.fits and p.context == 8192
    tiny = next(n for n in p.notes if n.startswith("only "))
    assert 2048 <= int(tiny.split()[1].replace(",", "")) < 4096


def test_ctx_suffixes_and_max():
    code, o = run_json("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--ctx", "32k")
    assert o["settings"]["context"] == 32768
    code, o = run_json("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--ctx", "max")
    r = o["recommended"]
    assert code == 0 and r["status"] != "exceeds" and r["gpu_layers"] == 33  # longest context without offload
    assert 32768 < r["context"] <= 131072 and r["context"] == r["max_context"]
    code, o = run_json("plan", "llama-3.1-8b-instruct", "--gpu", "H100 SXM", "--ctx", "max")
    assert o["recommended"]["context"] == 131072  # the model's maximum when it fits


def test_every_plan_states_its_longest_context():
    code, o = run_json("plan", "qwen3-8b", "--gpu", "RTX 4090")
    lp = o["launch"]["llama.cpp"]
    assert lp["max_context"] >= lp["context"]
    # one step (256 tokens) more than the longest does not fit
    inp = make_input("qwen3-8b", "RTX 4090")
    p = llama_cpp.plan(inp)
    if p.max_context < inp.spec.max_context:
        assert not size(inp, inp.fmt, replace(p.settings, context=p.max_context + 256)).ok


def _plan_status(model, gpu, count, ctx, ram, memory=None):
    inp = make_input(model, gpu, count, ctx=ctx, ram_gib=ram)
    if memory:
        inp.hw = replace(inp.hw, devices=[replace(d, memory_bytes=int(memory * GIB)) for d in inp.hw.devices])
        inp.sizer.hw = inp.hw
    return llama_cpp.plan(inp)


def test_property_cases_are_not_vacuous():
    # the monotonicity properties below see fitting plans of every kind: all on GPU, -ngl, --n-cpu-moe
    assert _plan_status("llama-3.3-70b-instruct", "RTX 4090", 1, 8192, 32).gpu_layers < 81
    assert _plan_status("gpt-oss-120b", "RTX 4090", 1, 8192, 96).cpu_moe_layers > 0
    assert _plan_status("qwen3-30b-a3b", "RTX 4090", 2, 8192, 16).fits


MODELS = ["llama-3.3-70b-instruct", "gpt-oss-120b", "qwen3-30b-a3b", "mixtral-8x7b-v0.1"]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MODELS), st.integers(1, 2), st.sampled_from([4096, 8192, 16384]), st.integers(16, 96),
       st.integers(1, 48))
def test_more_ram_never_turns_a_fitting_plan_into_a_failing_one(model, count, ctx, ram, extra):
    a = _plan_status(model, "RTX 4090", count, ctx, ram)
    b = _plan_status(model, "RTX 4090", count, ctx, ram + extra)
    if a.fits and a.context == ctx:
        assert b.fits and b.context == ctx
        if a.speed and b.speed:
            assert b.speed.decode_tps >= a.speed.decode_tps * 0.999


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from([4096, 8192, 16384]), st.integers(12, 40), st.integers(1, 24))
def test_more_vram_never_turns_a_fitting_plan_into_a_failing_one(model, ctx, mem, extra):
    a = _plan_status(model, "RTX 4090", 1, ctx, 64, memory=mem)
    b = _plan_status(model, "RTX 4090", 1, ctx, 64, memory=mem + extra)
    if a.fits and a.context == ctx:
        assert b.fits and b.context == ctx


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(MODELS), st.integers(1, 2), st.sampled_from([8192, 16384, 32768]), st.integers(16, 96))
def test_shorter_context_never_turns_a_fitting_plan_into_a_failing_one(model, count, ctx, ram):
    a = _plan_status(model, "RTX 4090", count, ctx, ram)
    b = _plan_status(model, "RTX 4090", count, ctx // 2, ram)
    if a.fits:
        assert b.fits


def test_the_fastest_fitting_offload_is_chosen():
    inp = make_input("qwen3-30b-a3b", "RTX 3060", quant="Q8_0", ctx=16384)
    from fitprobe.estimator.launch import plan_all
    chosen = plan_all(inp, ["llama.cpp"])["llama.cpp"]
    # every other placement that fits at this context is slower
    from fitprobe.estimator.speed import estimate_speed
    w = inp.sizer.weights(inp.fmt)[0]
    for ngl in range(0, 50, 7):
        st_ = replace(chosen.settings, cpu_moe_layers=0, gpu_layers=ngl, tensor_split=None)
        s = size(inp, inp.fmt, st_)
        if s.ok:
            assert chosen.fits
            assert estimate_speed(inp.spec, w, st_, inp.hw, s.mem, calibration=inp.calibration).decode_tps <= chosen.speed.decode_tps


def test_yarn_documented_by_the_model_card_extends_the_context_with_each_engines_flags():
    code, o = run_json("plan", "qwen3-8b", "--gpu", "H100 SXM", "--ctx", "128k")
    llama = o["launch"]["llama.cpp"]
    assert llama["context"] == 131072 and "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768" in llama["command"]
    vllm = o["launch"]["vllm"]
    assert vllm["context"] == 131072 and '"rope_type":"yarn"' in vllm["command"] and "--hf-overrides" in vllm["command"]
    assert "--json-model-override-args" in o["launch"]["sglang"]["command"]
    # Ollama cannot switch YaRN on from its environment: it stays at the trained window, and says why
    ollama = o["launch"]["ollama"]
    assert ollama["context"] == 40960 and any("YaRN" in n for n in ollama["notes"])
    # inside the trained window no YaRN flag is printed
    code, o = run_json("plan", "qwen3-8b", "--gpu", "H100 SXM", "--ctx", "32k")
    assert "--rope-scaling" not in o["launch"]["llama.cpp"]["command"]
    # past YaRN's own window the context is capped there
    code, o = run_json("plan", "qwen3-8b", "--gpu", "H100 SXM", "--ctx", "256k")
    assert o["launch"]["llama.cpp"]["context"] == 131072


def test_yarn_from_a_config_that_leaves_the_window_unextended():
    from fitprobe.estimator.config import spec_from_config
    from fitprobe.catalogs.models import find_model

    cfg = dict(find_model("qwen3-8b").config)
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert spec_from_config(cfg, name="q").yarn.max_context == 131072
    # DeepSeek's config already has the extended window as max_position_embeddings: nothing to add
    ds = spec_from_config(find_model("deepseek-v3").config, name="d")
    assert ds.yarn is None and ds.max_context == 163840


def test_the_issues_ram_sweep_gives_one_kind_of_plan():
    # gpt-oss-120b on 2x RTX 4090 used to flip between "3x RTX 4090", --n-cpu-moe 23 and -ngl 28 as RAM went 48->62->64
    plans = [_plan_status("gpt-oss-120b", "RTX 4090", 2, 8192, ram) for ram in (48, 62, 64)]
    assert all(p.fits for p in plans)
    assert len({(p.cpu_moe_layers, p.gpu_layers, tuple(p.tensor_split)) for p in plans}) == 1
