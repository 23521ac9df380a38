"""Issue #14 item 4 and #10 item 4: unified memory counted once, no llama.cpp on Gaudi, CPU-only RAM."""
import json

from click.testing import CliRunner
from planhelpers import make_input

from fitprobe.app import error_band
from fitprobe.catalogs.gpus import find_gpu
from fitprobe.catalogs.quants import quant_table
from fitprobe.catalogs.resolve import resolve
from fitprobe.cli import main
from fitprobe.estimator.launch import engines_for
from fitprobe.estimator.quant import weight_bytes
from fitprobe.estimator.recommend import Candidate, Recommender
from fitprobe.estimator.settings import RunSettings

GIB = 1 << 30


def run(*args):
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _recommender(model, quant, engine="llama.cpp", ctx=8192):
    spec, table = resolve(model).spec, quant_table()
    fmt = table.find(quant)
    st = RunSettings(quant=fmt.name, context=ctx, engine=engine,
                     kv_cache_dtype="auto" if engine == "vllm" else "f16")
    weights = (weight_bytes(spec, fmt, table), "formula")
    return Recommender(spec, table, fmt, st, error_band=error_band(), weights=weights, usable_fraction=0.95)


def test_dgx_spark_usable_memory_is_its_one_pool():
    spark = find_gpu("DGX Spark").device()
    _, mem, verdict, _ = _recommender("llama-3.3-70b-instruct", "Q4_K_M").size(spark)
    assert mem.host_total_bytes > 0  # llama.cpp keeps some of it on the CPU side, in the same pool
    assert verdict.usable_bytes <= 128 * GIB * 0.95  # was 201-225 GiB: the pool counted twice
    assert verdict.required_bytes == mem.total_bytes + mem.host_total_bytes


def test_report_recommendations_never_exceed_physical_memory():
    code, out = run("report", "llama-3.3-70b-instruct", "--gpu", "RTX 4090", "--json")
    assert code in (0, 1)
    for pick in json.loads(out)["recommendations"]:
        if pick["gpu_key"] and (entry := find_gpu(pick["gpu_key"])):
            assert pick["usable_bytes"] <= entry.memory_gib * GIB * pick["count"], pick


def test_gaudi_gets_vllm_only_and_no_gguf():
    gaudi = find_gpu("Gaudi 3")
    assert gaudi.device().kind == "hpu"
    inp = make_input("llama-3.1-8b-instruct", "Gaudi 3")
    assert engines_for(inp.hw) == ["vllm"] and inp.fmt.name == "BF16" and inp.settings.engine == "vllm"
    engine, mem, verdict, _ = _recommender("llama-3.1-8b-instruct", "Q4_K_M").size(gaudi.device())
    assert engine is None and verdict is None  # no llama.cpp on Gaudi, and vLLM there loads no GGUF
    picks = _recommender("llama-3.1-8b-instruct", "Q4_K_M").picks([Candidate(key="gaudi3", device=gaudi.device())])
    assert picks == []
    engine, _, verdict, _ = _recommender("llama-3.1-8b-instruct", "BF16", engine="vllm").size(gaudi.device())
    assert engine == "vllm" and verdict.status == "fits"


def test_gaudi_cli():
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "Gaudi 3", "--json")
    data = json.loads(out)
    assert code == 0 and set(data["launch"]) == {"vllm"} and data["settings"]["engine"] == "vllm"
    assert all(r["status"] == "exceeds" for r in data["matrix"] if r["quant"].startswith("Q"))
    for args in (["--engine", "llama.cpp"], ["--engine", "ollama"], ["-q", "Q4_K_M"]):
        code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "Gaudi 3", *args)
        assert code == 2 and "Gaudi" in out and out.count("\n") == 1


def test_plan_cpu_without_ram_says_ram_is_unknown():
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "cpu")
    assert code == 2 and out.count("\n") == 1
    assert "system RAM unknown" in out and "--ram-gib" in out and "GiB of RAM" in out
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "cpu", "--ram-gib", "16", "--json")
    assert code == 0 and json.loads(out)["verdict"]["status"] == "fits"


def test_check_cpu_uses_the_probed_ram(monkeypatch):
    from fitprobe.probe import cpu

    monkeypatch.setattr(cpu, "read_ram", lambda: (8 * GIB, 6 * GIB, "procfs"))
    monkeypatch.setattr(cpu, "cgroup_memory_limit", lambda *a: (None, None))
    code, out = run("check", "llama-3.1-8b-instruct", "--gpu", "cpu", "--json")
    data = json.loads(out)
    assert code == 0 and data["hardware"]["system_ram_bytes"] == 8 * GIB and data["hardware"]["count"] == 0
    assert data["verdict"]["status"] in ("fits", "tight") and data["verdict_now"] is not None
    code, out = run("check", "llama-3.3-70b-instruct", "--gpu", "cpu", "--json")
    assert code == 1 and json.loads(out)["verdict"]["status"] == "exceeds"  # 8 GiB of RAM is too small for 70B
    monkeypatch.setattr(cpu, "cgroup_memory_limit", lambda *a: (4 * GIB, "cgroup v2"))
    code, out = run("check", "llama-3.1-8b-instruct", "--gpu", "cpu", "--json")
    assert json.loads(out)["hardware"]["system_ram_bytes"] == 4 * GIB  # the container's limit
