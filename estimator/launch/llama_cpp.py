"""llama-server: context, GPU layers, MoE expert offload, KV type, split, chosen so the plan fits.

Order of levers (each tried only when the previous configuration does not fit): everything on
the GPUs at the context asked; a q8_0 KV cache when the cache is what tips it over; for MoE the
routed experts of the first N blocks in system RAM (`--n-cpu-moe N`) or plain partial offload
(`-ngl`), whichever reads fewer bytes from RAM per token; last, a shorter context.
Flag semantics: common/arg.cpp (`-ngl` counts the output layer; `--n-cpu-moe N` overrides the
expert tensors of blocks 0..N-1 to the CPU buffer), FORMULAS.md §2.1, §2.5, §2.6.
"""
from __future__ import annotations

from fitprobe.estimator.fields import replace

import math

from ..memory import MemoryBreakdown, balanced_split
from ..message import Num, join, msg, plural
from ..quant import WeightBytes
from .refs import gguf_repo_for
from .common import (GIB, MIN_USEFUL_CONTEXT, Flag, LaunchInput, LaunchPlan, Sized, can_offload, cap_context, ctx_text,
                     device_fits, engine_format, gib, rope_flags, largest_fitting, longest_context, model_max_context, plan_from, render, size,
                     smallest_fitting, unified)

PAD = 256  # llama.cpp pads the context to 256 cells
# common/arg.cpp (-ts): "got N input configs, but system only has 16 devices" once N >= llama_max_devices()
# (LLAMA_MAX_DEVICES 16): 15 values at most. Without -ts llama.cpp splits by each device's free memory.
MAX_SPLIT_VALUES = 16
RPC_PORT = 50052  # ggml-rpc-server's default port (tools/rpc/rpc-server.cpp; the binary was renamed from rpc-server)


def moe_offload(mem: MemoryBreakdown, w: WeightBytes, n_cpu: int) -> MemoryBreakdown:
    """The breakdown with the routed experts of blocks 0..n_cpu-1 moved from their device to RAM."""
    n = mem.n_layers
    first = n - mem.gpu_layers
    devices = [replace(d) for d in mem.per_device]
    moved_total = 0
    start = first
    for d in devices:
        moved = sum(w.experts_per_layer[i] for i in range(start, start + d.layers) if i < n_cpu)
        d.weights_bytes -= moved
        d.total_bytes -= moved
        moved_total += moved
        start += d.layers
    weights = sum(d.weights_bytes for d in devices)
    return replace(mem, per_device=devices, weights_bytes=weights, total_bytes=mem.total_bytes - moved_total,
        host_weights_bytes=mem.host_weights_bytes + moved_total)


def cpu_read_per_token(inp: LaunchInput, w: WeightBytes, *, ngl: int | None, n_cpu_moe: int) -> float:
    """Bytes decode reads from system RAM per token (routed experts count k/E), to compare levers."""
    spec, n = inp.spec, inp.spec.n_layers
    share = spec.moe.n_experts_used / spec.moe.n_experts if spec.moe else 1.0
    gpu_blocks = n if ngl is None else max(0, min(ngl, n + 1) - 1)
    total = 0.0
    for i in range(n):
        experts = w.experts_per_layer[i] if w.experts_per_layer else 0
        if i < n - gpu_blocks:
            total += (w.per_layer[i] - experts) + experts * share
        elif i < n_cpu_moe:
            total += experts * share
    return total


def plan(inp: LaunchInput) -> LaunchPlan:
    engine = "llama.cpp"
    fmt, fmt_note = engine_format(engine, inp)
    hw = inp.hw
    kv = inp.settings.kv_cache_dtype if inp.settings.kv_cache_dtype in ("f16", "bf16", "f32", "q8_0", "q4_0") else "f16"
    asked_ngl = inp.settings.gpu_layers if hw.devices else 0
    base = replace(inp.settings, engine=engine, quant=fmt.name, flash_attention=True, cpu_moe_layers=0,
                   tensor_split=None, gpu_layers=asked_ngl, kv_cache_dtype=kv)
    w, _ = inp.sizer.weights(fmt)
    notes = [fmt_note] if fmt_note else []
    reasons: dict[str, str] = {}
    if inp.longest_context and model_max_context(inp.spec):
        base = replace(base, context=model_max_context(inp.spec))
    base, capped = cap_context(inp, base, engine)
    if capped:
        reasons["ctx"] = capped
        notes.append(capped)
    kvs = [kv] + (["q8_0"] if not inp.kv_explicit and kv in ("f16", "bf16") else [])
    if hw.devices and unified(hw):
        notes.append(msg("unified memory: the GPU and the CPU share one pool, so moving layers or experts to the "
                         "CPU frees nothing; only a shorter context or a smaller quant helps"))
    found = None if inp.longest_context else _place(inp, fmt, base, kvs, w, reasons)
    if found is None and hw.devices and not unified(hw) and not hw.system_ram_bytes:
        notes.append(msg("system RAM unknown: offloading to the CPU was not planned (pass --ram-gib, or run "
                         "`fitprobe check` on the machine itself)"))
    if found is None:
        found = _shorter_context(inp, fmt, base, kvs, w, reasons, notes)
    if found is None:
        st = _with_split(inp, fmt, base, w)
        sized = size(inp, fmt, st)
        notes.append(msg("does not fit at any useful context: see the fixes"))
    else:
        st, sized = found
    return _build(inp, fmt, st, sized, reasons, notes, w)


def _with_split(inp: LaunchInput, fmt, st, w):
    """The settings with the layer split that balances the devices (several GPUs only).

    GPUs of other nodes join only through the RPC backend (every token crosses the network), so while
    the first node's GPUs hold the model with their error band free, the split gives the others nothing
    and the command runs on one node."""
    devices, per = inp.hw.devices, inp.gpus_per_node
    if len(devices) < 2:
        return st
    kv = inp.sizer.kv_for(st)
    if len(devices) > per:
        local = (balanced_split(inp.spec, w, st, replace(inp.hw, devices=devices[:per]), now=inp.now, kv=kv)
                 if per > 1 else (1,))
        if local is not None:
            cand = replace(st, tensor_split=(*local, *[0] * (len(devices) - per)))
            if device_fits(size(inp, fmt, cand), inp.sizer.band(fmt, "llama.cpp")):
                return cand
    return replace(st, tensor_split=balanced_split(inp.spec, w, st, inp.hw, now=inp.now, kv=kv))


def _nodes_used(inp: LaunchInput, st) -> int:
    """Nodes whose GPUs hold layers: with a split, up to the last device given any; else all of them."""
    devices = len(inp.hw.devices)
    if st.tensor_split:
        devices = max((i + 1 for i, c in enumerate(st.tensor_split) if c), default=devices)
    return math.ceil(devices / inp.gpus_per_node)


def _place(inp: LaunchInput, fmt, st, kvs, w, reasons) -> tuple | None:
    """The fastest placement at this context: everything on the GPUs, then a lighter KV cache, then
    CPU offload (routed experts or whole layers), each judged with the host side; None if none fits."""
    full = None
    for kv in kvs:
        cand = _with_split(inp, fmt, replace(st, kv_cache_dtype=kv), w)
        sized = size(inp, fmt, cand)
        full = full or sized
        if sized.ok:
            if kv != kvs[0]:
                reasons["kv"] = msg("KV pressure decides fit: the %(asked)s cache (%(asked_size)s) does not fit beside "
                                    "the weights; at %(kv)s it is %(size)s and the plan fits", asked=kvs[0],
                                    asked_size=gib(full.mem.kv.total), kv=kv, size=gib(sized.mem.kv.total))
            return cand, sized
    if not can_offload(inp) or st.gpu_layers is not None:  # an -ngl the user gave is kept
        return None
    for kv in kvs:
        found = _offload(inp, fmt, replace(st, kv_cache_dtype=kv), w, reasons)
        if found is not None:
            if kv != kvs[0]:
                reasons["kv"] = msg("a %(kv)s cache leaves more of the model on the GPUs than %(asked)s", kv=kv,
                                    asked=kvs[0])
            return found
    return None


def _offload(inp: LaunchInput, fmt, base, w, reasons) -> tuple | None:
    """Expert offload (--n-cpu-moe) and plain partial offload (-ngl), each searched for the most that
    stays on the GPUs, then judged with system RAM; the faster of those that fit is kept. A placement
    that keeps each GPU's error band free ('fits') is preferred to one inside it ('tight')."""
    for band in (inp.sizer.band(fmt, "llama.cpp"), None):
        options = _offload_options(inp, fmt, base, w, band)
        if options:
            break
    else:
        return None
    n = inp.spec.n_layers
    rated = sorted(((_decode_rate(inp, fmt, st, sized, w), kind, value, st, sized)
                    for kind, value, st, sized in options), key=lambda o: -o[0][0])
    (rate, rate_text), kind, value, st, sized = rated[0]
    other = rated[1] if len(rated) > 1 else None
    parts = [rate_text]
    if other:
        parts.append(msg("%(flag)s %(value)s would give %(rate)s", flag="-ngl" if other[1] == "ngl" else "--n-cpu-moe",
                         value=other[2], rate=other[0][1]))
    if kind == "moe":
        parts[0] = msg("the model does not fit on the GPUs; keeping the routed experts of the first %(k)s of %(n)s "
                       "blocks in RAM (%(size)s host weights) leaves attention, shared weights and KV on the GPU: "
                       "%(rate)s", k=value, n=n, size=gib(sized.mem.host_weights_bytes), rate=rate_text)
        reasons["moe"] = join(parts)
    else:
        parts[0] = (msg("the model does not fit on the GPUs: %(k)s of %(n)s blocks + output layer fit; the rest run "
                        "from RAM: %(rate)s", k=max(0, value - 1), n=n, rate=rate_text) if value >= 1 else
                    msg("the model does not fit on the GPUs: %(k)s of %(n)s blocks fit; the rest run from RAM: %(rate)s",
                        k=max(0, value - 1), n=n, rate=rate_text))
        reasons["ngl"] = join(parts)
    return st, sized


def _offload_options(inp: LaunchInput, fmt, base, w, band) -> list[tuple]:
    """The fitting offload placements whose GPUs pass `device_fits(band)`: (kind, value, settings, sized)."""
    n = inp.spec.n_layers
    options = []

    def placed(st):
        st = _with_split(inp, fmt, st, w)
        return st, size(inp, fmt, st)

    if inp.spec.moe and any(w.experts_per_layer):
        k = smallest_fitting(1, n, lambda x: device_fits(placed(replace(base, cpu_moe_layers=x))[1], band))
        if k is not None:
            st, sized = placed(replace(base, cpu_moe_layers=k))
            if sized.ok:
                options.append(("moe", k, st, sized))
    g = largest_fitting(0, n, lambda x: device_fits(placed(replace(base, gpu_layers=x))[1], band))
    if g is not None:
        st, sized = placed(replace(base, gpu_layers=g))
        if sized.ok:
            options.append(("ngl", g, st, sized))
    return options


def _decode_rate(inp: LaunchInput, fmt, st, sized, w) -> tuple[float, str]:
    """Decode tokens/s of a placement to compare levers; bytes read from RAM when speed is unknown."""
    from ..speed import estimate_speed

    try:
        tps = estimate_speed(inp.spec, w, st, inp.hw, sized.mem, cpu_expert_layers=st.cpu_moe_layers,
                             calibration=inp.calibration).decode_tps
        return tps, msg("~%(tps)s tokens/s", tps=Num(tps, ".1f"))
    except ValueError:  # no bandwidth figure: fewer bytes read from RAM per token is faster
        read = cpu_read_per_token(inp, w, ngl=st.gpu_layers, n_cpu_moe=st.cpu_moe_layers)
        return -read, msg("~%(size)s read from RAM per token", size=gib(read))


def _shorter_context(inp, fmt, base, kvs, w, reasons, notes) -> tuple | None:
    """The longest context, down to llama.cpp's own --fit-ctx floor, at which some placement fits."""
    asked = base.context
    floor = min(asked, MIN_USEFUL_CONTEXT)

    def at(c: int):
        return _place(inp, fmt, replace(base, context=c), kvs, w, {})

    c = largest_fitting(floor, asked - (0 if inp.longest_context else 1), lambda x: at(x) is not None, step=PAD)
    if c is None:
        lower = largest_fitting(PAD, floor - 1, lambda x: at(x) is not None, step=PAD) if floor > PAD else None
        if lower:
            notes.append(msg("only %(tokens)s tokens fit, under the %(floor)s-token floor llama.cpp's own fitter uses "
                             "(--fit-ctx): not a useful deployment", tokens=Num(lower, ","),
                             floor=Num(MIN_USEFUL_CONTEXT, ",")))
        return None
    found = _place(inp, fmt, replace(base, context=c), kvs, w, reasons)
    reasons["ctx"] = (msg("the longest context that fits (multiple of %(pad)s)", pad=PAD) if inp.longest_context else
                      msg("%(asked)s does not fit; %(context)s is the largest context (multiple of %(pad)s) that does",
                          asked=ctx_text(asked), context=ctx_text(c), pad=PAD))
    return found


def model_args(inp: LaunchInput, fmt) -> tuple[list[Flag], list[str]]:
    """-hf REPO:QUANT only for a repo the catalog (or a Hub listing) knows holds QUANT; else a
    download of the repo's matching files and -m, or a conversion."""
    if inp.gguf_path:
        return [Flag(flag="-m", value=inp.gguf_path, reason=msg("the local GGUF file that was sized"))], []
    ref = gguf_repo_for(inp.refs, fmt.name)
    if ref is not None:
        return [Flag(flag="-hf", value=f"{ref.repo}:{fmt.name}",
                     reason=msg("downloads the %(quant)s GGUF; %(repo)s holds it (%(source)s, seen %(seen)s)",
                                quant=fmt.name, repo=ref.repo, source=ref.source, seen=ref.seen))], []
    held = join(msg("%(repo)s holds %(quants)s", repo=r.repo, quants=", ".join(r.quants)) for r in inp.refs.gguf)
    listed = {r.repo for r in inp.refs.gguf}
    unconfirmed = inp.gguf_repo if inp.gguf_repo and inp.gguf_repo not in listed else None
    if unconfirmed:
        local = f"./{unconfirmed.split('/')[-1]}"
        pattern = f"*[-.]{fmt.name}[-.]*"  # Q2_K matches -Q2_K. and -Q2_K-00001-of-, not -UD-Q2_K_XL-
        download = f"hf download {unconfirmed} --include \"{pattern}\" --local-dir {local}"
        return ([Flag(flag="-m", value=f"$(find {local} -name '{pattern}' | sort | head -n 1)",
                      reason=msg("the %(quant)s file downloaded from %(repo)s (the first part of a split file)",
                                 quant=fmt.name, repo=unconfirmed))],
                [msg("run first: %(command)s  (the catalog knows %(repo)s is a GGUF repo of this model, not which "
                     "quants it holds%(held)s)", command=download, repo=unconfirmed,
                     held=join(["", held]) if held else "")])
    name = f"{inp.spec.name}-{fmt.name}.gguf"
    return ([Flag(flag="-m", value=name, reason=msg("a %(quant)s GGUF of %(model)s", quant=fmt.name,
                                                    model=inp.model_ref))],
            [msg("no known GGUF repo holds %(quant)s (%(held)s): convert with convert_hf_to_gguf.py and "
                 "llama-quantize, and pass its path to -m", quant=fmt.name, held=held) if held else
             msg("no GGUF repo is known for %(model)s: convert with convert_hf_to_gguf.py and llama-quantize, and "
                 "pass its path to -m", model=inp.model_ref)])


def _build(inp, fmt, st, sized, reasons, notes, w) -> LaunchPlan:
    hw, n, cpu_moe = inp.hw, inp.spec.n_layers, st.cpu_moe_layers
    flags, more = model_args(inp, fmt)
    notes = notes + more
    B = st.batch
    ctx_reason = reasons.get("ctx") or msg("%(context)s tokens per sequence as asked", context=ctx_text(st.context))
    if B > 1:
        ctx_reason = join([ctx_reason, msg("llama-server's -c is the total over %(slots)s slots (%(slots)s x "
                                           "%(context)s)", slots=B, context=str(st.context))])
    flags.append(Flag(flag="--ctx-size", value=str(st.context * B), reason=ctx_reason))
    flags.append(Flag(flag="--parallel", value=str(B),
                      reason=plural("%(n)s concurrent sequence; set explicitly because llama-server's default "
                                    "(-1 = auto) splits the context into several slots",
                                    "%(n)s concurrent sequences; set explicitly because llama-server's default "
                                    "(-1 = auto) splits the context into several slots", B)))
    nodes = 1
    if hw.devices:
        ngl = n + 1 if st.gpu_layers is None else st.gpu_layers
        flags.append(Flag(flag="-ngl", value=str(ngl), reason=reasons.get("ngl") or (
            msg("all %(n)s blocks + the output layer on the GPUs (-ngl counts the output layer)", n=n)
            if len(hw.devices) > 1 else
            msg("all %(n)s blocks + the output layer on the GPU (-ngl counts the output layer)", n=n))))
        if cpu_moe:
            flags.append(Flag(flag="--n-cpu-moe", value=str(cpu_moe), reason=reasons["moe"]))
        nodes = _nodes_used(inp, st)
        shown = st.tensor_split[:nodes * inp.gpus_per_node] if st.tensor_split else None  # the devices that run
        if shown and len(shown) > 1 and ngl > 0:
            split = ",".join(map(str, shown))
            if len(shown) < MAX_SPLIT_VALUES:
                flags.append(Flag(flag="--tensor-split", value=split,
                                  reason=msg("layers per device (the last counts the output layer), chosen so every "
                                             "device keeps a similar share of its usable memory free: the split this "
                                             "plan was sized on")))
            else:
                notes.append(msg("llama.cpp takes at most %(most)s --tensor-split values: with %(n)s devices it splits "
                                 "by free memory itself (this plan was sized on %(split)s)", most=MAX_SPLIT_VALUES - 1,
                                 n=len(shown), split=split))
    else:
        flags.append(Flag(flag="-ngl", value="0", reason=msg("no GPU: every layer runs on the CPU")))
    on_cpu = not hw.devices or cpu_moe or (st.gpu_layers is not None and st.gpu_layers <= n)
    if on_cpu and hw.cpu_threads:  # the speed counts these threads: the command must run the same number
        flags.append(Flag(flag="--threads", value=str(hw.cpu_threads),
                          reason=msg("the %(n)s CPU threads the speed estimate counts for the layers in RAM",
                                     n=hw.cpu_threads)))
    flags += rope_flags(inp, st, "llama.cpp")[0]
    flags.append(Flag(flag="-fa", value="on", reason=(
        msg("flash attention: needed for a quantized V cache, and keeps the compute buffer from growing with the "
            "context") if st.kv_cache_dtype in ("q8_0", "q4_0") else
        msg("flash attention keeps the compute buffer small (no F32 score matrix over the whole cache)"))))
    if st.kv_cache_dtype != "f16":
        why = reasons.get("kv") or msg("%(kv)s KV cache as asked", kv=st.kv_cache_dtype)
        flags.append(Flag(flag="-ctk", value=st.kv_cache_dtype, reason=why))
        flags.append(Flag(flag="-ctv", value=st.kv_cache_dtype, reason=why))
    if st.ubatch != 512:
        flags.append(Flag(flag="-ub", value=str(st.ubatch), reason=msg("micro-batch the compute buffer was sized for")))
        if st.ubatch > 2048:
            flags.append(Flag(flag="-b", value=str(st.ubatch),
                              reason=msg("the logical batch must be at least the micro-batch")))
    flags += _ram_advice(inp, sized)
    setup: list[str] = []
    if nodes > 1:
        hosts = [f"node{i}:{RPC_PORT}" for i in range(1, nodes)]
        setup = [f"ggml-rpc-server -H 0.0.0.0 -p {RPC_PORT}  # on node{i}" for i in range(1, nodes)]
        flags.append(Flag(flag="--rpc", value=",".join(hosts),
                          reason=msg("%(gpus)s GPUs span %(nodes)s nodes of %(per)s: the other nodes' GPUs join "
                                     "through ggml-rpc-server (RPC backend; insecure, trusted network only)",
                                     gpus=len(hw.devices), nodes=nodes, per=inp.gpus_per_node)))
        notes.append(msg("replace node1.. with the other hosts' addresses"))
    command = render(["llama-server"], flags)
    gl = (n + 1 if st.gpu_layers is None else st.gpu_layers) if hw.devices else 0
    return plan_from("llama.cpp", inp, sized, st, fmt, command=command, flags=flags, setup=setup, notes=notes,
                     gpu_layers=gl, cpu_moe_layers=cpu_moe, nodes=nodes,
                     tensor_split=list(st.tensor_split) if st.tensor_split else None,
                     max_context=longest_context(inp, fmt, st, step=PAD) if sized.ok and inp.with_max_context else None)


def _ram_advice(inp: LaunchInput, sized: Sized) -> list[Flag]:
    """Locked pages when offloaded weights nearly fill RAM; no mmap when the file is bigger than RAM.

    `--load-mode` replaced --mlock / --no-mmap (common/arg.cpp at b11434: "mmap+mlock", "none"; the old
    flags are rejected as invalid arguments)."""
    hw, m = inp.hw, sized.mem
    if not hw.system_ram_bytes:
        return []
    ram = hw.ram_available_bytes if hw.ram_available_bytes is not None else hw.system_ram_bytes
    offloaded = m.host_weights_bytes > (m.model_file_bytes * 0.05)
    if offloaded and m.host_total_bytes > 0.75 * ram:
        return [Flag(flag="--load-mode", value="mmap+mlock", reason=msg(
            "%(size)s of weights run from RAM and fill %(share)s of it: locking keeps them from being paged out",
            size=gib(m.host_weights_bytes), share=Num(m.host_total_bytes / ram, ".0%")))]
    if not offloaded and m.model_file_bytes > ram:
        return [Flag(flag="--load-mode", value="none", reason=msg(
            "the GGUF (%(size)s) is larger than RAM (%(ram)s); without mmap it is read into the GPUs rather than "
            "mapped through the page cache", size=gib(m.model_file_bytes), ram=gib(ram)))]
    return []


__all__ = ["plan", "moe_offload", "cpu_read_per_token", "GIB"]
