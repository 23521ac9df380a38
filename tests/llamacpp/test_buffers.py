"""Model buffers per device and the CPU compute buffer: fitprobe beside `llama-fit-params --fit-print`.

On this CPU build the devices are the host and, through a loopback ggml-rpc-server of the same build, one
RPC device: `-ngl N` puts the output layer and the last N-1 blocks on it (src/llama-model.cpp i_gpu_start),
so the weights split between the two is llama.cpp's own placement.
"""
from __future__ import annotations

import pytest

from fitprobe.estimator.fields import replace
from fitprobe.estimator.memory import estimate
from fitprobe.estimator.quant import source_types, tensor_types
from fitprobe.estimator.settings import RunSettings
from fitprobe.estimator.tensors import inventory
from fitprobe.llama_tools import MIB, fit_print, printed_mib_matches
from fitprobe.sparse_gguf import write_sparse_gguf

from planhelpers import make_input

from .conftest import spec_of, supported_models
from .test_commands import rpc_server
from .test_quantize import llama_bytes


def host_args(st: RunSettings, ngl: int) -> list[str]:
    return ["-c", str(st.context * st.batch), "-np", str(st.batch), "-fa", "on" if st.flash_attention else "off",
            "-ub", str(st.ubatch), "-ngl", str(ngl)]


@pytest.mark.parametrize("model", supported_models())
def test_host_model_buffer_equals_the_weights(model, llama_bin, source_gguf, table):
    """CPU only: the model buffer holds every tensor of the GGUF (source types here)."""
    spec = spec_of(model)
    st = RunSettings(quant="BF16", context=4096)
    _, log = fit_print(str(llama_bin / "llama-fit-params"), source_gguf(model), host_args(st, 0))
    shapes = {t.name: t.shape for t in inventory(spec)}
    total = sum(llama_bytes(shapes[name], ty) for name, ty in source_types(spec).items())
    printed = sum(log.model.values())
    assert printed_mib_matches(total, printed), f"{model}: model buffers {log.model} MiB, fitprobe {total / MIB:.2f}"


@pytest.mark.parametrize("model,ngl", [("llama-3.1-8b-instruct", 17), ("qwen3-30b-a3b", 30), ("gemma-3-27b-it", 63),
                                       ("deepseek-v2-lite-chat", 10)])
def test_weights_split_between_host_and_device(model, ngl, llama_bin, tmp_path, table):
    inp = make_input(model, "RTX 4090", 1, quant="Q4_K_M", ctx=4096, engine="llama.cpp")
    path = tmp_path / "m.gguf"
    write_sparse_gguf(inp.spec, path, tensor_types(inp.spec, inp.fmt))
    st = replace(inp.settings, engine="llama.cpp", gpu_layers=ngl)
    mem = estimate(inp.spec, inp.fmt, table, st, inp.hw)
    with rpc_server(llama_bin, ["ggml-rpc-server -H 0.0.0.0 -p 50052"]) as rpc:
        devices, _ = fit_print(str(llama_bin / "llama-fit-params"), path, host_args(st, ngl) + ["--rpc", rpc])
    rpc_dev = [d for d in devices if d.device != "Host"]
    host = next(d for d in devices if d.device == "Host")
    assert len(rpc_dev) == 1, devices
    assert rpc_dev[0].model_mib == mem.per_device[0].weights_bytes // MIB, (devices, mem.per_device[0])
    assert host.model_mib == mem.host_weights_bytes // MIB, (devices, mem.host_weights_bytes)
    assert rpc_dev[0].context_mib == mem.per_device[0].kv_cache_bytes // MIB
