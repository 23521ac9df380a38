"""Model buffers per device and the CPU compute buffer: fitprobe beside `llama-fit-params --fit-print`.

On this CPU build the devices are the host and, through a loopback ggml-rpc-server of the same build, one
RPC device: `-ngl N` puts the output layer and the last N-1 blocks on it (src/llama-model.cpp i_gpu_start),
so the weights split between the two is llama.cpp's own placement.
"""
from __future__ import annotations

import pytest

from fitprobe.estimator import buffers
from fitprobe.estimator.fields import replace
from fitprobe.estimator.kv import kv_cache
from fitprobe.estimator.memory import estimate
from fitprobe.estimator.quant import source_types, tensor_types
from fitprobe.estimator.settings import RunSettings
from fitprobe.estimator.tensors import inventory
from fitprobe.llama_tools import MIB, fit_print
from fitprobe.sparse_gguf import write_sparse_gguf

from planhelpers import make_input

from .conftest import spec_of, supported_models
from .test_commands import rpc_server
from .test_quantize import llama_bytes


def host_args(st: RunSettings, ngl: int) -> list[str]:
    return ["-c", str(st.context * st.batch), "-np", str(st.batch), "-fa", "on" if st.flash_attention else "off",
            "-ub", str(st.ubatch), "-b", str(max(st.ubatch, 2048)), "-ngl", str(ngl), "--no-repack"]


# Differences found at b11434 and not yet explained (docs/llama-cpp.md lists them); strict, so a fix shows up.
KNOWN_BUFFER_DIFFERENCES = {
    "gemma-4-31b-it-nvfp4": "llama.cpp's CPU model buffer is one token_embd (2688 MiB) larger than the GGUF's tensors",
    "gemma-4-31b-it": "llama.cpp's CPU model buffer is one token_embd (2688 MiB) larger than the GGUF's tensors",
    "gemma-4-26b-a4b": "llama.cpp's CPU model buffer is one token_embd (1408 MiB) larger than the GGUF's tensors",
    "deepseek-v3.2": "CPU compute buffer: fitprobe 266 MiB, llama.cpp 658 MiB (DSA indexer top-k graph not modelled)",
    "nemotron-3-super-120b-a12b": "CPU compute buffer: fitprobe above llama.cpp (394 vs 300 MiB, LatentMoE)",
    "nemotron-3-ultra-550b-a55b": "CPU compute buffer: fitprobe above llama.cpp (752 vs 392 MiB, LatentMoE)",
}


@pytest.mark.parametrize("model", [pytest.param(m, marks=pytest.mark.xfail(reason=KNOWN_BUFFER_DIFFERENCES[m], strict=True))
                                   if m in KNOWN_BUFFER_DIFFERENCES else m for m in supported_models()])
def test_host_buffers(model, llama_bin, source_gguf):
    """CPU only: the model buffer holds every tensor of the GGUF (16-bit source types here), the context the
    KV cache and the output buffer; both equal to llama.cpp's floored MiB. The CPU compute buffer is compared:
    fitprobe's graph_reserve model (logits + the largest FFN/attention working set) is known to fall short of
    the CPU graph allocator's peak, by 5-50 % on the bundled models at b11434 (docs/llama-cpp.md); this keeps
    it an under-estimate within half. (--no-repack: see test_weights_split_between_host_and_device.)"""
    spec = spec_of(model)
    shapes = {t.name: t.shape for t in inventory(spec)}
    weights = sum(llama_bytes(shapes[name], ty) for name, ty in source_types(spec).items())
    for st in (RunSettings(context=4096), RunSettings(context=16384, ubatch=2048, flash_attention=False)):
        devices, _ = fit_print(str(llama_bin / "llama-fit-params"), source_gguf(model), host_args(st, 0))
        host = devices[-1]
        assert host.device == "Host" and host.model_mib == weights // MIB, (model, host, weights // MIB)
        kv = kv_cache(spec, st)
        context = kv.total + buffers.llama_cpp_output_bytes(spec, st)
        assert abs(host.context_mib - context // MIB) <= 1, (model, st.context, host, context // MIB)
        compute = buffers.llama_cpp_compute_bytes(spec, st, kv.cells_full, output_here=True) // MIB
        assert 0.5 * host.compute_mib <= compute <= host.compute_mib, (model, st.context, host.compute_mib, compute)


@pytest.mark.parametrize("model,ngl", [("llama-3.1-8b-instruct", 17), ("qwen3-30b-a3b", 30), ("gemma-3-27b-it", 63),
                                       ("deepseek-v2-lite-chat", 10)])
def test_weights_split_between_host_and_device(model, ngl, llama_bin, tmp_path, table):
    inp = make_input(model, "RTX 4090", 1, quant="Q4_K_M", ctx=4096, engine="llama.cpp")
    path = tmp_path / "m.gguf"
    write_sparse_gguf(inp.spec, path, tensor_types(inp.spec, inp.fmt))
    st = replace(inp.settings, engine="llama.cpp", gpu_layers=ngl)
    mem = estimate(inp.spec, inp.fmt, table, st, inp.hw)
    with rpc_server(llama_bin, ["ggml-rpc-server -H 0.0.0.0 -p 50052"], tmp_path / "rpc-server.log") as rpc:
        devices, _ = fit_print(str(llama_bin / "llama-fit-params"), path,
                               host_args(st, ngl) + ["--rpc", rpc, "--no-repack"])
    rpc_dev = [d for d in devices if d.device != "Host"]
    host = next(d for d in devices if d.device == "Host")
    assert len(rpc_dev) == 1, devices
    assert rpc_dev[0].model_mib == mem.per_device[0].weights_bytes // MIB, (devices, mem.per_device[0])
    assert rpc_dev[0].context_mib == mem.per_device[0].kv_cache_bytes // MIB
    # --no-repack: quantized CPU weights would otherwise sit in the CPU_REPACK extra buffer, which fit-print's
    # Host line skips (it counts host buffer types only)
    assert host.model_mib == mem.host_weights_bytes // MIB, (devices, mem.host_weights_bytes // MIB)
    host_context = mem.host_kv_cache_bytes + buffers.llama_cpp_output_bytes(inp.spec, st)
    assert abs(host.context_mib - host_context // MIB) <= 1, (devices, host_context // MIB)
