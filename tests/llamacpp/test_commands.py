"""Every llama-server command fitprobe prints is accepted by the pinned llama-server and serves /health.

The printed command is parsed as a shell would, its model argument (-m FILE or -hf REPO:QUANT) replaced by
a sparse GGUF of the same model cut to two blocks (the printed quant's tensor types, same architecture,
so the server's warm-up decode takes a moment), and started on a loopback port. Flags that only matter on
GPUs run as they are on this CPU build: -ngl and --n-cpu-moe are accepted and place nothing, and
--tensor-split warns that it has no effect. --rpc's hosts are replaced by a loopback rpc-server of the
same build, so the offloaded layers really go to an RPC device. A flag the pinned build does not know
fails the test (llama-server exits with "error: invalid argument").
"""
from __future__ import annotations

import re
import shlex
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager

import pytest

from fitprobe.estimator.fields import replace
from fitprobe.estimator.launch import llama_cpp
from fitprobe.estimator.quant import tensor_types
from fitprobe.sparse_gguf import write_sparse_gguf
from fitprobe.verify import fit_params_command

from planhelpers import make_input

HEALTH_DEADLINE_S = 90
# --rpc ships the offloaded blocks' bytes to the rpc-server over loopback (the 405B's two-block file: ~45 s on an
# idle 2-core machine, past 90 s on a busy one)
RPC_HEALTH_DEADLINE_S = 300

# (model, GPU, count, quant, context, sequences, KV type, the flag the plan must show)
PLANS = [
    ("llama-3.1-8b-instruct", "RTX 4090", 1, None, 8192, 1, None, "-ngl"),
    ("llama-3.1-70b-instruct", "RTX 4090", 2, None, 8192, 1, None, "--tensor-split"),
    ("llama-3.1-70b-instruct", "RTX 4090", 1, None, 8192, 1, None, "-ngl"),
    ("qwen3-30b-a3b", "RTX 3060", 1, "Q4_K_M", 8192, 1, None, "--n-cpu-moe"),
    ("qwen3-8b", "RTX 3060", 1, None, 65536, 1, "q8_0", "-ctk"),
    ("gemma-3-27b-it", "RTX 4090", 1, None, 4096, 4, None, "--parallel"),
    ("llama-3.1-405b", "RTX 4090", 16, "Q4_K_M", 4096, 1, None, "--rpc"),  # 2 nodes of 8 (Q2_K fits on one)
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_block_gguf(inp, fmt, path) -> None:
    spec = replace(inp.spec, n_layers=2, layers=inp.spec.layers[:2], mtp_layers=0)
    write_sparse_gguf(spec, path, tensor_types(spec, fmt, imatrix=False))


@contextmanager
def process(cmd: list[str], log):
    """A llama.cpp tool writing to the file `log`: a pipe nobody reads while waiting would stall it once full."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def wait_healthy(proc, port: int, log, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama-server exited {proc.returncode}: {log.read_text().strip().splitlines()[-3:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail(f"llama-server did not answer /health in {deadline_s} s")


def substitute(argv: list[str], model: str, rpc: str | None) -> list[str]:
    out, it = [], iter(argv)
    for a in it:
        if a in ("-m", "--model", "-hf", "--hf-repo"):
            next(it)
            out += ["-m", model]
        elif a == "--rpc":
            hosts = next(it).split(",")
            assert rpc is not None and all(h.endswith(":50052") for h in hosts)
            out += ["--rpc", rpc]
        else:
            out.append(a)
    return out


@pytest.mark.parametrize("model,gpu,count,quant,ctx,seqs,kv,shown", PLANS,
                         ids=[f"{p[0]}-{p[2]}x{p[1].replace(' ', '')}-{p[7]}" for p in PLANS])
def test_printed_command_starts_llama_server(model, gpu, count, quant, ctx, seqs, kv, shown, llama_bin, tmp_path):
    inp = make_input(model, gpu, count, quant=quant, ctx=ctx, batch=seqs, kv=kv, engine="llama.cpp")
    plan = llama_cpp.plan(inp)
    line = plan.command.split("\n")[-1]
    # the model argument may be a shell substitution that finds a split GGUF's first part: one word here
    argv = shlex.split(re.sub(r"\$\([^)]*\)", "MODEL", line))
    argv = [a for a in argv if a != "\\"]
    assert argv[0] == "llama-server" and shown in argv, plan.command
    gguf = tmp_path / "model.gguf"
    two_block_gguf(inp, inp.fmt if inp.fmt.kind == "gguf" else inp.fmt, gguf)
    port = free_port()
    log = tmp_path / "llama-server.log"
    with rpc_server(llama_bin, plan.setup, tmp_path / "rpc-server.log") as rpc:
        cmd = [str(llama_bin / "llama-server"), *substitute(argv[1:], str(gguf), rpc),
               "--host", "127.0.0.1", "--port", str(port)]
        with process(cmd, log) as server:
            wait_healthy(server, port, log, RPC_HEALTH_DEADLINE_S if rpc else HEALTH_DEADLINE_S)


@contextmanager
def rpc_server(llama_bin, setup: list[str], log):
    """The printed setup command (`ggml-rpc-server -H 0.0.0.0 -p 50052`), on loopback and a free port."""
    lines = [shlex.split(line, comments=True) for line in setup if "rpc-server" in line]
    if not lines:
        yield None
        return
    argv, port = lines[0], free_port()
    assert (llama_bin / argv[0]).is_file(), f"the printed setup runs {argv[0]}, which the pinned build does not have"
    argv = [str(llama_bin / argv[0])] + [{"0.0.0.0": "127.0.0.1", "50052": str(port)}.get(a, a) for a in argv[1:]]
    with process(argv, log) as proc:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, "rpc-server exited"
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"


@pytest.mark.parametrize("kv,fa,seqs,ub", [("f16", True, 1, 512), ("q8_0", True, 4, 512), ("f16", False, 2, 1024)])
def test_fit_params_arguments_are_accepted(kv, fa, seqs, ub, llama_bin, tmp_path):
    """The arguments --verify passes to llama-fit-params parse and run on the pinned build."""
    inp = make_input("qwen3-0.6b", "RTX 4090", ctx=4096, batch=seqs, kv=kv, engine="llama.cpp")
    st = replace(inp.settings, flash_attention=fa, ubatch=ub)
    gguf = tmp_path / "model.gguf"
    two_block_gguf(inp, inp.fmt, gguf)
    cmd = fit_params_command(str(llama_bin / "llama-fit-params"), str(gguf), st)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and "invalid argument" not in proc.stderr, proc.stderr[-2000:]


def test_documented_llama_server_options_exist_in_the_pinned_build(llama_bin):
    """catalogs/data/engine_flags.json (the options a plan may print) against the pinned llama-server's --help."""
    from fitprobe.catalogs.engine_flags import load_engine_flags

    proc = subprocess.run([str(llama_bin / "llama-server"), "--help"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    words = set((proc.stdout + proc.stderr).replace(",", " ").split())
    missing = [f.names for f in load_engine_flags()["llama.cpp"].flags if not words & set(f.names)]
    assert not missing, f"documented options the b11434 llama-server does not have: {missing}"
