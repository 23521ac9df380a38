"""vllm serve: tensor/pipeline parallel sizes, max-model-len, KV dtype, quantization, offload.

TP validity follows vLLM's own checks: ModelConfig.verify_with_parallel_config raises unless the
attention head count divides by TP, and QKVParallelLinear divides the KV heads by TP (or, when
TP >= KV heads, TP by the KV heads: each KV head replicated on TP/KV ranks). Models too big for
one node run TP inside a node and PP across nodes on Ray (FORMULAS.md §3.4). Levers, in order:
as asked; fp8 KV when the cache decides fit; the largest max-model-len the KV budget holds (not
below 4096); `--cpu-offload-gb` last (weights streamed over PCIe every step: slow).
"""
from __future__ import annotations

from fitprobe.estimator.fields import replace

import math

from ..hardware import Hardware
from ..memory import MemoryBreakdown, driver_total_bytes
from ..message import join, msg, plural
from ..spec import ModelSpec
from .common import (GIB, MIN_USEFUL_CONTEXT, Flag, LaunchInput, LaunchPlan, Sized, can_offload, cap_context, ctx_text,
                     engine_format, rope_flags,
                     gib, largest_fitting, plan_from, rejudge, render, size, smallest_fitting)

BLOCK = 16  # vLLM's default KV block on CUDA
RAY_PORT = 6379


def valid_tp(spec: ModelSpec, tp: int) -> bool:
    """vLLM accepts this tensor-parallel size: attention heads, KV heads and the dense MLP width split
    evenly (ColumnParallelLinear shards intermediate_size with vllm.distributed.utils.divide, which
    asserts divisibility: Qwen2-1.5B's 8960 fails at TP 6 although its 12 heads split)."""
    if tp < 1 or spec.n_heads % tp:
        return False
    if spec.intermediate_size and spec.intermediate_size % tp:
        return False
    if spec.mla is not None:
        return True  # MLA: one latent per rank, no KV-head split
    kv = spec.n_kv_heads
    return tp % kv == 0 if tp >= kv else kv % tp == 0


def pick_tp(spec: ModelSpec, limit: int) -> int:
    return max(t for t in range(1, max(1, limit) + 1) if valid_tp(spec, t))


def layout(inp: LaunchInput, *, across_nodes_tp: bool = False) -> tuple[int, int, int]:
    """(tp, pp, nodes): TP within a node, PP over nodes (or, for SGLang, TP across nodes)."""
    n, per = len(inp.hw.devices), inp.gpus_per_node
    if n <= per:
        return pick_tp(inp.spec, n), 1, 1
    nodes = n // per
    if across_nodes_tp and valid_tp(inp.spec, nodes * per):
        return nodes * per, 1, nodes
    return pick_tp(inp.spec, per), nodes, nodes


def sub_hardware(hw: Hardware, count: int) -> Hardware:
    return replace(hw, devices=hw.devices[:count])


def pp_adjust(mem: MemoryBreakdown, pp: int) -> MemoryBreakdown:
    """Each pipeline stage holds 1/pp of the layers: weights and KV per GPU divide by pp."""
    if pp <= 1:
        return mem
    devices = []
    for d in mem.per_device:
        w, kv = d.weights_bytes // pp, d.kv_cache_bytes // pp
        devices.append(replace(d, weights_bytes=w, kv_cache_bytes=kv,
                                            total_bytes=w + kv + d.buffers_bytes))
    w = sum(d.weights_bytes for d in devices)
    kv = sum(d.kv_cache_bytes for d in devices)
    return replace(mem, per_device=devices, weights_bytes=w, kv_cache_bytes=kv,
                                  total_bytes=w + kv + mem.buffers_bytes)


def offload_adjust(mem: MemoryBreakdown, per_gpu: int) -> MemoryBreakdown:
    """--cpu-offload-gb: that many bytes of weights per GPU live in pinned system RAM."""
    devices = [replace(d, weights_bytes=d.weights_bytes - per_gpu, total_bytes=d.total_bytes - per_gpu)
               for d in mem.per_device]
    moved = per_gpu * len(devices)
    return replace(mem, per_device=devices, weights_bytes=mem.weights_bytes - moved,
                                  total_bytes=mem.total_bytes - moved,
                                  host_weights_bytes=mem.host_weights_bytes + moved)


QUANT_NAMES = {"fp8": "fp8", "awq": "awq", "gptq": "gptq", "compressed-tensors": "compressed-tensors",
               "mxfp4": "mxfp4", "bitsandbytes": "bitsandbytes"}


def quantization_flag(inp: LaunchInput, fmt) -> tuple[Flag | None, str | None]:
    """--quantization matching the checkpoint's quantization_config, or the online method."""
    q = inp.spec.prequant
    if q is not None and fmt.kind == "checkpoint" or (q is not None and fmt.name == "MXFP4"):
        name = QUANT_NAMES.get(q.method)
        if q.method == "modelopt":
            name = "modelopt_fp4" if q.fmt and "fp4" in q.fmt.lower() else "modelopt"
        if name:
            return Flag(flag="--quantization", value=name,
                        reason=msg("matches the checkpoint's quantization_config (quant_method %(method)s)",
                                   method=q.method)), None
        return None, None
    if fmt.name == "FP8":
        ref = inp.refs.checkpoints.get("FP8")
        if ref is not None:
            return Flag(flag="--quantization", value="fp8",
                        reason=msg("the publisher's FP8 checkpoint %(repo)s (%(source)s, seen %(seen)s)",
                                   repo=ref.repo, source=ref.source, seen=ref.seen)), None
        return Flag(flag="--quantization", value="fp8",
                    reason=msg("FP8 weights quantized on load from the 16-bit checkpoint (dynamic per-tensor "
                               "scales)")), None
    if fmt.name == "NF4":
        return Flag(flag="--quantization", value="bitsandbytes",
                    reason=msg("4-bit NF4 quantized on load by bitsandbytes")), None
    method = {"AWQ": "awq", "GPTQ": "gptq", "NVFP4": "modelopt_fp4"}.get(fmt.name)
    if method:
        ref = inp.refs.checkpoints.get(fmt.name)
        if ref is None:  # no such checkpoint known: no flag that would fail on the 16-bit repo
            return None, msg("%(quant)s needs a pre-quantized %(quant)s checkpoint of %(model)s; none is known to the "
                             "catalog: replace the model with its repo id", quant=fmt.name, model=inp.model_ref)
        return Flag(flag="--quantization", value=method,
                    reason=msg("%(quant)s weights of %(repo)s (%(source)s, seen %(seen)s)", quant=fmt.name,
                               repo=ref.repo, source=ref.source, seen=ref.seen)), None
    return None, None


def served_model(inp: LaunchInput, fmt) -> str:
    """The repo vLLM/SGLang load: a known pre-quantized checkpoint for AWQ/GPTQ/NVFP4, else the model."""
    if inp.spec.prequant is None and fmt.name in ("AWQ", "GPTQ", "NVFP4", "FP8"):
        ref = inp.refs.checkpoints.get(fmt.name)
        if ref is not None:
            return ref.repo
        if fmt.name != "FP8":  # FP8 is also made on load from the 16-bit repo
            return f"<{fmt.name} checkpoint of {inp.model_ref}>"
    return inp.model_ref


def plan(inp: LaunchInput, engine: str = "vllm") -> LaunchPlan:
    """A GGUF quant asked of a 16-bit repo: the repo's own weights (BF16, or FP8 quantized on load)
    when they fit at the context asked without offload, so that the command runs as pasted; the
    width-matched AWQ/FP8 otherwise (AWQ needs another repo: said in a note)."""
    fmt, fmt_note = engine_format(engine, inp)
    if fmt_note and inp.fmt.kind == "gguf" and inp.hw.devices and inp.spec.prequant is None:
        ladder = ["BF16"] + (["FP8"] if fmt.name not in ("BF16", "FP8") else [])
        for name in ladder:
            cand = inp.table.find(name)
            if cand is None or cand.name == fmt.name:
                continue
            how = msg("as published") if name == "BF16" else msg("quantized to FP8 on load (--quantization fp8)")
            note = msg("%(engine)s serves checkpoints, not GGUF: this repo's weights %(how)s fit at the context asked, "
                       "so the command runs as pasted; for a %(quant)s-sized model pass an AWQ/GPTQ checkpoint's repo id",
                       engine=engine, how=how, quant=inp.fmt.name)
            p = _plan_format(inp, engine, cand, note)
            if p.fits and not any(f.flag == "--cpu-offload-gb" for f in p.flags) and \
                    p.context == _asked_context(inp, engine):
                return p
    return _plan_format(inp, engine, fmt, fmt_note)


def _asked_context(inp: LaunchInput, engine: str) -> int:
    return cap_context(inp, inp.settings, engine)[0].context


def _plan_format(inp: LaunchInput, engine: str, fmt, fmt_note: str | None) -> LaunchPlan:
    notes = [fmt_note] if fmt_note else []
    kv = inp.settings.kv_cache_dtype if inp.settings.kv_cache_dtype in ("auto", "f16", "bf16", "fp8") else "auto"
    base = replace(inp.settings, engine=engine, quant=fmt.name, kv_cache_dtype=kv, gpu_layers=None)
    base, capped = cap_context(inp, base, engine)
    if capped:
        notes.append(capped)
    if not inp.hw.devices:
        sized = size(inp, fmt, base)
        notes.append(msg("%(engine)s needs GPUs: no plan for CPU-only hardware", engine=engine))
        return plan_from(engine, inp, Sized(sized.mem, replace(sized.verdict, status="exceeds")), base, fmt,
                         command="", flags=[], notes=notes)
    tp, pp, nodes = layout(inp, across_nodes_tp=engine == "sglang")
    used = tp * pp
    if used < len(inp.hw.devices):
        notes.append(msg("uses %(used)s of %(total)s GPUs: %(heads)s attention heads / %(kv_heads)s KV heads allow TP "
                         "%(tp)s", used=used, total=len(inp.hw.devices), heads=inp.spec.n_heads,
                         kv_heads=inp.spec.n_kv_heads, tp=tp))
    hw = sub_hardware(inp.hw, tp)

    def sz(st) -> Sized:
        s = size(inp, fmt, st, hw)
        if pp > 1:
            mem = pp_adjust(s.mem, pp)
            return Sized(mem, rejudge(inp, mem, hw, engine=engine, fmt=fmt))
        return s

    reasons: dict[str, str] = {"ctx": capped} if capped else {}
    st, sized, offload = base, sz(base), 0
    fp8 = replace(base, kv_cache_dtype="fp8")
    if not sized.ok and not inp.kv_explicit:
        s8 = sz(fp8)
        if s8.ok:
            reasons["kv"] = msg("KV pressure decides fit: at %(context)s the 16-bit cache (%(size)s) does not fit the "
                                "budget; fp8 (%(fp8)s) does", context=ctx_text(base.context),
                                size=gib(sized.mem.kv_cache_bytes), fp8=gib(s8.mem.kv_cache_bytes))
            st, sized = fp8, s8
    if not sized.ok:
        floor = min(MIN_USEFUL_CONTEXT, base.context)
        best = None
        for cand in ([base] + ([fp8] if not inp.kv_explicit else [])):
            c = largest_fitting(floor, cand.context, lambda x, c0=cand: sz(replace(c0, context=x)).ok, step=BLOCK)
            if c is not None and (best is None or c > best[0]):
                best = (c, cand)
        if best:
            c, cand = best
            st = replace(cand, context=c)
            sized = sz(st)
            reasons["ctx"] = msg("%(asked)s does not fit the KV budget; %(context)s is the largest max-model-len "
                                 "(multiple of %(block)s) that does", asked=ctx_text(base.context),
                                 context=ctx_text(c), block=BLOCK)
            if cand.kv_cache_dtype == "fp8":
                reasons["kv"] = msg("fp8 KV: the 16-bit cache fits a shorter context than fp8 does")
    if not sized.ok and engine == "vllm" and can_offload(inp):
        st = fp8 if not inp.kv_explicit else base
        full = sz(st)
        per_gpu_w = full.mem.per_device[0].weights_bytes if full.mem.per_device else 0

        def off_fits(g: int) -> bool:
            mem = offload_adjust(full.mem, g * GIB)
            return rejudge(inp, mem, hw, engine=engine, fmt=fmt).status != "exceeds"

        g = smallest_fitting(1, max(1, per_gpu_w // GIB), off_fits)
        if g is not None:
            mem = offload_adjust(full.mem, g * GIB)
            sized, offload = Sized(mem, rejudge(inp, mem, hw, engine=engine, fmt=fmt)), g
            reasons.pop("ctx", None)
            if capped:
                reasons["ctx"] = capped
            if st.kv_cache_dtype == "fp8":
                reasons["kv"] = msg("fp8 KV: halves the cache, so fewer weights have to be offloaded")
            reasons["offload"] = msg("last resort: even %(context)s does not fit; %(gib)s GiB of weights per GPU stay "
                                     "in pinned RAM and cross PCIe every step (slow)",
                                     context=ctx_text(min(MIN_USEFUL_CONTEXT, base.context)), gib=g)
        else:
            st, sized = base, sz(base)
    return _build(inp, engine, fmt, st, sized, tp, pp, nodes, offload, reasons, notes)


def _build(inp, engine, fmt, st, sized, tp, pp, nodes, offload, reasons, notes) -> LaunchPlan:
    spec = inp.spec
    flags: list[Flag] = []
    world = tp * pp
    limit = min(len(inp.hw.devices), inp.gpus_per_node)
    tp_reason = join([msg("largest size ≤ %(limit)s GPUs per node that divides the %(heads)s attention heads",
                          limit=limit, heads=spec.n_heads),
                      *([] if spec.mla else [msg("fits the %(kv_heads)s KV heads", kv_heads=spec.n_kv_heads)]),
                      *([msg("the %(width)s MLP width", width=spec.intermediate_size)] if spec.intermediate_size
                        else [])], " and ")
    if engine == "vllm":
        flags.append(Flag(flag="--tensor-parallel-size", value=str(tp), reason=tp_reason))
        if pp > 1:
            flags.append(Flag(flag="--pipeline-parallel-size", value=str(pp),
                              reason=msg("%(gpus)s GPUs span %(nodes)s nodes of %(per)s: TP inside a node, each node "
                                         "one pipeline stage holding 1/%(pp)s of the layers", gpus=len(inp.hw.devices),
                                         nodes=nodes, per=inp.gpus_per_node, pp=pp)))
            flags.append(Flag(flag="--distributed-executor-backend", value="ray",
                              reason=msg("multi-node vLLM runs its workers on a Ray cluster")))
        flags.append(Flag(flag="--max-model-len", value=str(st.context), reason=reasons.get("ctx") or (
            msg("%(context)s as asked; fits the KV budget", context=ctx_text(st.context)) if sized.ok else
            msg("%(context)s as asked; does not fit (see the fixes)", context=ctx_text(st.context)))))
        flags.append(Flag(flag="--gpu-memory-utilization", value=f"{st.gpu_memory_utilization:g}",
                          reason=msg("vLLM's share of each GPU: weights, activations and the KV budget live inside it; "
                                     "CUDA graphs use the rest")))
        if st.kv_cache_dtype == "fp8":
            flags.append(Flag(flag="--kv-cache-dtype", value="fp8",
                              reason=reasons.get("kv") or msg("%(kv)s KV cache as asked", kv="fp8")))
        flags.append(Flag(flag="--max-num-seqs", value=str(st.batch), reason=plural(
            "%(n)s concurrent sequence: the KV budget was sized for %(n)s x %(context)s",
            "%(n)s concurrent sequences: the KV budget was sized for %(n)s x %(context)s", st.batch,
            context=ctx_text(st.context))))
    else:
        flags.append(Flag(flag="--tp", value=str(tp), reason=tp_reason if nodes == 1 else
                          msg("tensor parallel over all %(tp)s GPUs of %(nodes)s nodes; %(heads)s heads divide by it",
                              tp=tp, nodes=nodes, heads=spec.n_heads)))
        frac = _mem_fraction(sized.mem, inp)
        flags.append(Flag(flag="--mem-fraction-static", value=f"{frac:.2f}",
                          reason=msg("weights + KV pool share of each GPU: SGLang's default rule (GPU memory minus the "
                                     "reserve for activations and CUDA graphs), pinned so the plan is reproducible")))
        flags.append(Flag(flag="--context-length", value=str(st.context), reason=reasons.get("ctx") or (
            msg("%(context)s as asked; fits the KV pool", context=ctx_text(st.context)) if sized.ok else
            msg("%(context)s as asked; does not fit (see the fixes)", context=ctx_text(st.context)))))
        if st.kv_cache_dtype == "fp8":
            flags.append(Flag(flag="--kv-cache-dtype", value="fp8_e4m3",
                              reason=reasons.get("kv") or msg("%(kv)s KV cache as asked", kv="fp8")))
        flags.append(Flag(flag="--max-running-requests", value=str(st.batch),
                          reason=plural("%(n)s concurrent sequence, as sized", "%(n)s concurrent sequences, as sized",
                                        st.batch)))
    qflag, qnote = quantization_flag(inp, fmt)
    if qflag:
        flags.append(qflag)
    if qnote:
        notes.append(qnote)
    if engine == "vllm" and spec.moe and world > 1 and spec.moe.n_experts >= world:
        flags.append(Flag(flag="--enable-expert-parallel",
                          reason=msg("MoE with %(experts)s experts on %(gpus)s GPUs: whole experts per GPU instead of "
                                     "slicing every expert across ranks", experts=spec.moe.n_experts, gpus=world)))
    if offload:
        flags.append(Flag(flag="--cpu-offload-gb", value=str(offload), reason=reasons["offload"]))
    yarn, env = rope_flags(inp, st, engine)
    flags += yarn
    model = served_model(inp, fmt)
    setup: list[str] = []
    if engine == "vllm":
        command = render(["vllm", "serve", model], flags)
        if nodes > 1:
            setup = [f"ray start --head --port={RAY_PORT}  # on the head node",
                     f"ray start --address=<head-ip>:{RAY_PORT}  # on each of the other {nodes - 1} node(s)"]
            notes.append(msg("run vllm serve on the head node once every node has joined the Ray cluster"))
    else:
        if nodes > 1:
            flags += [Flag(flag="--nnodes", value=str(nodes), reason=msg("%(nodes)s nodes of %(per)s GPUs", nodes=nodes,
                                                                         per=inp.gpus_per_node)),
                      Flag(flag="--node-rank", value="0",
                           reason=msg("this command is node 0; run it on node i with --node-rank i")),
                      Flag(flag="--dist-init-addr", value="node0:50000",
                           reason=msg("rendezvous address of node 0 (replace node0 with its address)"))]
        command = render(["python", "-m", "sglang.launch_server", "--model-path", model], flags, env)
    return plan_from(engine, inp, sized, st, fmt, command=command, flags=flags, setup=setup, notes=notes, env=env,
                     gpu_layers=None, tensor_parallel=tp, pipeline_parallel=pp, nodes=nodes)


def _mem_fraction(mem: MemoryBreakdown, inp: LaunchInput) -> float:
    d = mem.per_device[0] if mem.per_device else None
    dev = inp.hw.devices[0]
    if d is None:
        return 0.88
    return math.floor(d.usable_bytes / driver_total_bytes(dev) * 100) / 100
