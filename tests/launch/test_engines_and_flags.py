"""Which engines are shown, MLX's wired limit, and every generated flag against engine_flags.json."""
import copy

import pytest

from fitprobe.catalogs import engine_flags
from fitprobe.catalogs.engine_flags import check_flags, load_engine_flags
from fitprobe.catalogs.models import load_models
from fitprobe.estimator.launch import engines_for, mlx, plan_all

from planhelpers import flag, make_input

DEVICES = [("RTX 3060", 1), ("RTX 4090", 1), ("H100 SXM", 1), ("H100 SXM", 8), ("M4 Max 128GB", 1), ("cpu", 1)]


def test_engines_follow_hardware_and_engine_option():
    assert engines_for(make_input("qwen3-8b", "M4 Max 128GB").hw) == ["llama.cpp", "ollama", "mlx"]
    assert engines_for(make_input("qwen3-8b", "cpu").hw) == ["llama.cpp", "ollama"]
    assert engines_for(make_input("qwen3-8b", "RTX 4090").hw) == ["llama.cpp", "ollama", "vllm", "sglang"]
    assert engines_for(make_input("qwen3-8b", "RTX 4090").hw, "vllm") == ["vllm"]


def test_vllm_and_sglang_are_not_offered_on_gpus_older_than_they_run_on():
    """vLLM needs compute capability 7.0 (V100 yes, P40 no), SGLang 7.5 (T4 yes, V100 no)."""
    assert engines_for(make_input("qwen3-8b", "Tesla P40").hw) == ["llama.cpp", "ollama"]
    assert engines_for(make_input("qwen3-8b", "V100 SXM2 32GB").hw) == ["llama.cpp", "ollama", "vllm"]
    assert engines_for(make_input("qwen3-8b", "T4").hw) == ["llama.cpp", "ollama", "vllm", "sglang"]


def test_mlx_raises_the_wired_limit_when_that_blocks_the_fit():
    p = mlx.plan(make_input("qwen3-235b-a22b", "M4 Max 128GB", quant="Q3_K_M", ctx=32768, engine="mlx"))
    assert p.fits and p.setup[0].startswith("sudo sysctl iogpu.wired_limit_mb=")
    assert "mlx_lm.convert" in p.setup[1] and flag(p, "--model").value.endswith("-3bit")


def test_every_catalog_source_is_recorded():
    for name, doc in load_engine_flags().items():
        assert doc.version and doc.source.startswith("https://"), name


@pytest.mark.parametrize("gpu,count", DEVICES)
def test_all_bundled_models_get_documented_flags(gpu, count):
    for entry in load_models():
        inp = make_input(entry.name, gpu, count)
        for engine, p in plan_all(inp, engines_for(inp.hw)).items():
            assert check_flags(engine, p.flags) == [], (entry.name, gpu, engine)
            assert all(f.reason for f in p.flags)
            if p.command:
                assert engine != "llama.cpp" or p.command.splitlines()[-1].startswith("llama-server")


def test_a_renamed_flag_fails(monkeypatch):
    docs = load_engine_flags()
    renamed = copy.deepcopy(docs)
    renamed["llama.cpp"].flags = [f for f in renamed["llama.cpp"].flags if "--n-cpu-moe" not in f.names]
    monkeypatch.setattr(engine_flags, "load_engine_flags", lambda: renamed)
    p = plan_all(make_input("qwen3-30b-a3b", "RTX 3060", quant="Q8_0", ctx=16384), ["llama.cpp"])["llama.cpp"]
    problems = check_flags("llama.cpp", p.flags)
    assert problems and "--n-cpu-moe" in problems[0]
