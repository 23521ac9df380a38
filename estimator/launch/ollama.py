"""Ollama: server environment (context, parallel, flash attention, KV type) and the model to run.

Ollama runs llama.cpp and picks the GPU layers itself, so the plan sets what it cannot guess:
OLLAMA_CONTEXT_LENGTH / num_ctx (Ollama's default: 4096, or tiered by VRAM since v0.15.5),
OLLAMA_NUM_PARALLEL (total context = num_ctx x parallel), OLLAMA_FLASH_ATTENTION (required for a
quantized KV cache) and OLLAMA_KV_CACHE_TYPE=q8_0 when the cache decides fit (FORMULAS.md §3.6;
envconfig/config.go). Partial offload is reported as the layer count Ollama will land near.
"""
from __future__ import annotations

import re

from fitprobe.estimator.fields import replace

from ..message import msg, plural
from .refs import gguf_repo_for, ollama_tag_for
from .common import (GIB, Flag, can_offload, device_fits, LaunchInput, LaunchPlan, cap_context, ctx_text, engine_format, gib, largest_fitting,
                     plan_from, shell_join, size, unified)


def default_context(hw) -> int:
    """Ollama's own num_ctx when none is set: tiered by total VRAM since v0.15.5 (server/routes.go,
    FORMULAS.md §3.6): < 23 GiB -> 4096, 23-47 GiB -> 32768, >= 47 GiB -> 262144."""
    vram = sum(d.memory_bytes for d in hw.devices) / GIB
    return 4096 if vram < 23 else 32768 if vram < 47 else 262144


def plan(inp: LaunchInput) -> LaunchPlan:
    engine = "ollama"
    fmt, fmt_note = engine_format(engine, inp)
    notes = [fmt_note] if fmt_note else []
    kv = inp.settings.kv_cache_dtype if inp.settings.kv_cache_dtype in ("f16", "q8_0", "q4_0") else "f16"
    base = replace(inp.settings, engine=engine, quant=fmt.name, flash_attention=True,
                                           kv_cache_dtype=kv, gpu_layers=None if inp.hw.devices else 0)
    base, capped = cap_context(inp, base, engine)
    if capped:
        notes.append(capped)
    st, sized = base, size(inp, fmt, base)
    kv_reason = None
    if not sized.ok and not inp.kv_explicit and kv == "f16":
        q8 = replace(base, kv_cache_dtype="q8_0")
        s8 = size(inp, fmt, q8)
        if s8.ok:
            kv_reason = msg("KV pressure decides fit: the f16 cache (%(f16)s) does not fit beside the weights; q8_0 "
                            "(%(q8)s) does", f16=gib(sized.mem.kv.total), q8=gib(s8.mem.kv.total))
            st, sized = q8, s8
    n = inp.spec.n_layers
    if not sized.ok and unified(inp.hw):
        notes.append(msg("unified memory: moving layers to the CPU frees nothing (one pool); only a shorter context "
                         "or a smaller quant helps"))
    elif not sized.ok and can_offload(inp):
        g = largest_fitting(0, n, lambda x: device_fits(size(inp, fmt, replace(st, gpu_layers=x))))
        if g is not None and size(inp, fmt, replace(st, gpu_layers=g)).ok:
            st = replace(st, gpu_layers=g)
            sized = size(inp, fmt, st)
            notes.append(msg("does not fit on the GPU: Ollama offloads layers itself; about %(g)s of %(n)s layers fit "
                             "(the rest run on the CPU: slow)", g=g, n=n + 1))
    B = st.batch
    default = default_context(inp.hw)
    if capped:
        ctx_reason = capped
    elif st.context == default:
        ctx_reason = msg("%(context)s per sequence as asked (also Ollama's default on this much VRAM; set so it is "
                         "not left to the tiering)", context=ctx_text(st.context))
    else:
        ctx_reason = msg("%(context)s per sequence as asked; Ollama's own default here would be %(default)s (tiered "
                         "by total VRAM since v0.15.5)", context=ctx_text(st.context), default=ctx_text(default))
    env = {"OLLAMA_CONTEXT_LENGTH": str(st.context), "OLLAMA_NUM_PARALLEL": str(B), "OLLAMA_FLASH_ATTENTION": "1"}
    flags = [
        Flag(flag="OLLAMA_CONTEXT_LENGTH", value=str(st.context),
             reason=ctx_reason),
        Flag(flag="num_ctx", value=str(st.context),
             reason=msg("the same per model: PARAMETER num_ctx in a Modelfile, or options.num_ctx in an API call")),
        Flag(flag="OLLAMA_NUM_PARALLEL", value=str(B),
             reason=plural("%(n)s concurrent sequence; the cache holds num_ctx x %(n)s tokens",
                           "%(n)s concurrent sequences; the cache holds num_ctx x %(n)s tokens", B)),
        Flag(flag="OLLAMA_FLASH_ATTENTION", value="1",
             reason=msg("flash attention: needed for a quantized KV cache and keeps the compute buffer small")),
    ]
    if not inp.hw.devices and inp.hw.cpu_threads:  # the speed counts these threads: the model must run as many
        flags.append(Flag(flag="num_thread", value=str(inp.hw.cpu_threads),
                          reason=msg("the %(n)s CPU threads the speed estimate counts: PARAMETER num_thread in a "
                                     "Modelfile, or options.num_thread in an API call", n=inp.hw.cpu_threads)))
    if st.kv_cache_dtype != "f16":
        env["OLLAMA_KV_CACHE_TYPE"] = st.kv_cache_dtype
        flags.append(Flag(flag="OLLAMA_KV_CACHE_TYPE", value=st.kv_cache_dtype,
                          reason=kv_reason or msg("%(kv)s KV cache as asked", kv=st.kv_cache_dtype)))
    tag, ref = ollama_tag_for(inp.refs, fmt.name), gguf_repo_for(inp.refs, fmt.name)
    name = tag.repo if tag else f"hf.co/{ref.repo}:{fmt.name}" if ref and fmt.kind == "gguf" else None
    create: list[str] = []
    if inp.gguf_path:  # the local file that was sized: `ollama create` from a Modelfile naming it
        name = re.sub(r"[^a-z0-9._-]+", "-", inp.spec.name.lower()).strip("-") or "local-model"
        create = [f"printf 'FROM %s\\n' {shell_join([inp.gguf_path])} > Modelfile",
                  shell_join(["ollama", "create", name, "-f", "Modelfile"])]
    if name is None and inp.ollama_name:
        notes.append(msg("Ollama's %(name)s is this model, but the catalog does not know which tag holds %(quant)s: "
                         "see ollama.com/library for its quantization tags", name=inp.ollama_name, quant=fmt.name))
    if not name:
        name = f"<{inp.spec.name}-{fmt.name}>"
        notes.append(msg("no Ollama library name or GGUF repo is known for %(model)s: create one from a %(quant)s GGUF "
                         "with a Modelfile (FROM ./file.gguf) and `ollama create`", model=inp.model_ref,
                         quant=fmt.name))
    serve = shell_join([f"{k}={v}" for k, v in env.items()] + ["ollama", "serve"])
    setup = [f"{serve} &", *create]
    command = shell_join(["ollama", "run", name])
    return plan_from(engine, inp, sized, st, fmt, command=command, flags=flags, setup=setup, env=env, notes=notes,
                     gpu_layers=st.gpu_layers)
