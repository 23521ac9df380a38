"""What would make it fit: the smallest change on each axis, ranked.

Axes: KV quantization, a shorter context, a smaller quant, N more GPUs of this kind, a node count
for vLLM + Ray (CPU offload is the planners' own lever: the recommended deployment carries it).
Each is found by sizing with the same memory model (`Sizer.size`). Ranking puts changes that keep
model and hardware first (KV type, then context if at least half of it is kept), then quality
(quant), then hardware (more GPUs, more nodes); inside an axis, the smallest change wins.
"""
from __future__ import annotations

import math

from fitprobe.estimator.fields import doc, record, replace

from .message import Num, msg
from .verdict import Status
from .launch.common import (MIN_USEFUL_CONTEXT, LaunchInput, cap_context, ctx_text, gib, largest_fitting, size,
                            smallest_fitting)

MAX_EXTRA_GPUS = 64
MAX_NODES = 16


@record
class Fix:
    axis: str = doc(description="kv_cache | context | quant | gpus | nodes")
    change: str = doc(description="the change in words")
    value: str = doc(description="the new value of that setting")
    status: Status = doc(description="verdict with this change: fits | tight")
    total_bytes: int = doc(description="accelerator memory needed with this change")
    cost: str = doc(description="what the change costs (quality, context, speed, hardware)")
    rank: int = 0


_ORDER = {"kv_cache": 0, "context": 1, "quant": 2, "gpus": 3, "nodes": 4}


def find_fixes(inp: LaunchInput) -> list[Fix]:
    """Fixes for settings that do not fit on `inp.hw` as asked (CPU offload is not among them: the
    planners already recommend it when it is what fits). A context beyond the model's maximum is
    cut to that maximum first: no fix can serve more than the model was built for."""
    fixes: list[Fix] = []
    capped_st, capped = cap_context(inp, inp.settings, inp.settings.engine)
    if capped:
        asked = inp.settings.context
        inp = LaunchInput(**{**inp.__dict__, "settings": capped_st})
        s = size(inp, inp.fmt, capped_st)
        if s.ok:
            return [Fix(axis="context", change=msg("context %(context)s (the model's maximum) instead of %(asked)s",
                                                   context=ctx_text(capped_st.context), asked=ctx_text(asked)),
                        value=str(capped_st.context), status=s.verdict.status, total_bytes=s.mem.total_bytes, rank=1,
                        cost=msg("none beyond the cut: the model was not trained for a longer context"))]
    st, fmt, engine = inp.settings, inp.fmt, inp.settings.engine
    kv_types = {"llama.cpp": ["q8_0", "q4_0"], "ollama": ["q8_0", "q4_0"], "vllm": ["fp8"], "sglang": ["fp8"]}.get(engine, [])
    if st.kv_cache_dtype in ("f16", "bf16", "auto", "f32"):
        for kv in kv_types:
            s = size(inp, fmt, replace(st, kv_cache_dtype=kv))
            if s.ok:
                fixes.append(Fix(axis="kv_cache", change=msg("KV cache %(kv)s", kv=kv), value=kv,
                                 status=s.verdict.status, total_bytes=s.mem.total_bytes,
                                 cost=msg("small quality loss on long contexts") if kv != "q4_0"
                                 else msg("noticeable quality loss on long contexts")))
                break
    step = 16 if engine in ("vllm", "sglang") else 256
    c = largest_fitting(step, st.context - 1, lambda x: size(inp, fmt, replace(st, context=x)).ok, step=step)
    if c:
        s = size(inp, fmt, replace(st, context=c))
        kept = Num(c / st.context, ".0%")
        fixes.append(Fix(axis="context", change=msg("context %(context)s instead of %(asked)s", context=ctx_text(c),
                                                    asked=ctx_text(st.context)), value=str(c),
                         status=s.verdict.status, total_bytes=s.mem.total_bytes,
                         cost=msg("keeps %(share)s of the context asked (under 4K: little room for a prompt)", share=kept)
                         if c < MIN_USEFUL_CONTEXT else msg("keeps %(share)s of the context asked", share=kept)))
    q = _smaller_quant(inp)
    if q:
        fixes.append(q)
    if inp.hw.devices:
        fixes += _more_gpus(inp)
    for f in fixes:
        f.rank = _ORDER[f.axis] + (10 if f.axis == "context" and "keeps" in f.cost and _kept(f) < 0.5 else 0)
    fixes.sort(key=lambda f: (f.rank, f.total_bytes))
    for i, f in enumerate(fixes, 1):
        f.rank = i
    return fixes


def _kept(f: Fix) -> float:
    try:
        return float(f.cost.split("keeps ")[1].split("%")[0]) / 100
    except (IndexError, ValueError):
        return 1.0


def _smaller_quant(inp: LaunchInput) -> Fix | None:
    """The largest format, smaller than the one asked and loadable by this engine, that fits."""
    st, engine = inp.settings, inp.settings.engine
    current = inp.sizer.weights(inp.fmt)[0].total
    gguf = engine in ("llama.cpp", "ollama", "mlx")
    best = None
    for fmt in inp.table.formats:
        if gguf and fmt.kind == "checkpoint" or (not gguf and fmt.kind == "gguf"):
            continue
        if (fmt.kind == "mlx") != (engine == "mlx") and fmt.kind != "native":
            continue  # MLX formats are MLX's alone; MLX does not read GGUF files
        w = inp.sizer.weights(fmt)[0].total
        if w >= current:
            continue
        s = size(inp, fmt, replace(st, quant=fmt.name))
        if s.ok and (best is None or w > best[0]):
            best = (w, fmt, s)
    if best is None:
        return None
    w, fmt, s = best
    return Fix(axis="quant", change=msg("%(quant)s instead of %(asked)s", quant=fmt.name, asked=inp.fmt.name),
               value=fmt.name, status=s.verdict.status, total_bytes=s.mem.total_bytes,
               cost=msg("weights %(size)s instead of %(asked)s: lower quality", size=gib(w), asked=gib(current)))


def _more_gpus(inp: LaunchInput) -> list[Fix]:
    dev, n, engine = inp.hw.devices[0], len(inp.hw.devices), inp.settings.engine
    out = []

    def hw_with(k: int):
        return replace(inp.hw, devices=[dev] * k)

    if engine in ("vllm", "sglang"):
        from .launch.vllm import valid_tp

        per = inp.gpus_per_node
        counts = [k for k in range(n + 1, per + 1) if valid_tp(inp.spec, k)]
        k = next((k for k in counts if size(inp, inp.fmt, inp.settings, hw_with(k)).ok), None)
        if k:
            s = size(inp, inp.fmt, inp.settings, hw_with(k))
            out.append(Fix(axis="gpus", change=msg("%(n)sx %(gpu)s (tensor parallel %(n)s)", n=k, gpu=dev.name),
                           value=str(k), status=s.verdict.status, total_bytes=s.mem.total_bytes,
                           cost=msg("%(n)s more GPU(s)", n=k - n)))
        elif engine == "vllm":
            nodes = _nodes_needed(inp, hw_with)
            if nodes:
                out.append(Fix(axis="nodes", change=msg("%(nodes)s nodes of %(per)sx %(gpu)s (vLLM + Ray, PP %(nodes)s)",
                                                        nodes=nodes, per=per, gpu=dev.name),
                               value=str(nodes), status="fits", total_bytes=0,
                               cost=msg("%(more)s more GPUs across %(nodes)s nodes; pipeline stages add latency",
                                        more=nodes * per - n, nodes=nodes)))
        return out
    k = smallest_fitting(n + 1, n + MAX_EXTRA_GPUS, lambda x: size(inp, inp.fmt, inp.settings, hw_with(x)).ok)
    if k:
        s = size(inp, inp.fmt, inp.settings, hw_with(k))
        nodes = math.ceil(k / inp.gpus_per_node)
        change = (msg("%(n)sx %(gpu)s over %(nodes)s nodes (RPC)", n=k, gpu=dev.name, nodes=nodes) if nodes > 1
                  else msg("%(n)sx %(gpu)s", n=k, gpu=dev.name))
        out.append(Fix(axis="gpus" if nodes == 1 else "nodes", change=change, value=str(k), status=s.verdict.status,
                       total_bytes=s.mem.total_bytes, cost=msg("%(n)s more GPU(s)", n=k - n)))
    return out


def _nodes_needed(inp: LaunchInput, hw_with) -> int | None:
    from .launch import vllm
    from .launch.common import LaunchInput as _LI

    per = inp.gpus_per_node
    for nodes in range(2, MAX_NODES + 1):
        sub = _LI(**{**inp.__dict__, "hw": hw_with(nodes * per), "kv_explicit": True})
        p = vllm.plan(sub)
        if p.fits and p.context >= inp.settings.context and not any(f.flag == "--cpu-offload-gb" for f in p.flags):
            return nodes
    return None
