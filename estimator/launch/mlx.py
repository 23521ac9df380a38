"""MLX on Apple silicon: `mlx_lm.server`, a quantized conversion, and the Metal wired limit.

mlx-lm loads Hugging Face checkpoints and quantizes with `mlx_lm.convert -q --q-bits B --q-group-size 64`
(mlx_lm/convert.py); the server takes --model, --decode-concurrency and --prompt-cache-bytes
(mlx_lm/server.py). Unified memory is capped by the Metal working-set limit; when that cap, not
physical memory, is what blocks the fit, `sudo sysctl iogpu.wired_limit_mb=N` raises it
(FORMULAS.md §2.6).
"""
from __future__ import annotations

from fitprobe.estimator.fields import replace

import math

from ..message import msg, plural
from .common import (MIB, Flag, LaunchInput, LaunchPlan, Sized, cap_context, engine_format, gib, plan_from, rejudge,
                     shell_join, size)


def mlx_model(inp: LaunchInput, fmt, setup: list[str]) -> tuple[str, str]:
    """A known mlx-community conversion of this width, else `mlx_lm.convert` into a local folder."""
    ref = inp.refs.mlx.get(fmt.name)
    if ref is not None:
        return ref.repo, msg("%(quant)s conversion on the Hub (%(source)s, seen %(seen)s)", quant=fmt.name,
                             source=ref.source, seen=ref.seen)
    if fmt.kind != "mlx":
        return inp.model_ref, msg("the checkpoint as published")
    bits = int(fmt.bits or 4)
    out = f"./{inp.spec.name}-{bits}bit"
    setup.append(shell_join(["mlx_lm.convert", "--hf-path", inp.model_ref, "-q", "--q-bits", str(bits),
                             "--q-group-size", str(fmt.group_size or 64), "--mlx-path", out]))
    return out, msg("%(bits)s-bit conversion above", bits=bits)


def plan(inp: LaunchInput) -> LaunchPlan:
    engine = "mlx"
    fmt, fmt_note = engine_format(engine, inp)
    notes: list[str] = [fmt_note] if fmt_note else []
    kv = inp.settings.kv_cache_dtype if inp.settings.kv_cache_dtype in ("f16", "bf16") else "f16"
    st = replace(inp.settings, engine=engine, kv_cache_dtype=kv, gpu_layers=None)
    st, capped = cap_context(inp, st, engine)
    if capped:
        notes.append(capped)
    sized = size(inp, fmt, st)
    setup: list[str] = []
    model, how = mlx_model(inp, fmt, setup)
    flags: list[Flag] = [Flag(flag="--model", value=model, reason=msg("the MLX weights to serve (%(how)s)", how=how))]
    flags.append(Flag(flag="--decode-concurrency", value=str(st.batch),
                      reason=plural("%(n)s concurrent sequence, as sized", "%(n)s concurrent sequences, as sized",
                                    st.batch)))
    flags.append(Flag(flag="--prompt-cache-bytes", value=str(sized.mem.kv_cache_bytes),
                      reason=msg("caps the KV caches at the %(size)s the plan reserved",
                                 size=gib(sized.mem.kv_cache_bytes))))
    dev = inp.hw.devices[0] if inp.hw.devices else None
    if not sized.ok and dev is not None and dev.usable_cap_bytes:
        raised = replace(inp.hw, devices=[replace(d, usable_cap_bytes=None) for d in inp.hw.devices])
        s2 = size(inp, fmt, st, raised)
        if s2.ok:
            need = s2.mem.per_device[0].total_bytes * (1 + inp.sizer.band(fmt, "mlx"))
            limit_mb = min(math.ceil(need / MIB / 1024) * 1024, int(dev.memory_bytes * inp.hw.usable_fraction / MIB))
            setup.insert(0, f"sudo sysctl iogpu.wired_limit_mb={limit_mb}")
            notes.append(msg("the Metal working-set limit (%(limit)s) blocks the fit, not memory: raising it to "
                             "%(mib)s MiB (needed + the estimate's error band) lets the plan fit; the setting resets "
                             "at reboot", limit=gib(dev.usable_cap_bytes), mib=limit_mb))
            sized = Sized(s2.mem, rejudge(inp, s2.mem, raised, engine="mlx", fmt=fmt))
    command = shell_join(["mlx_lm.server"] + [p for f in flags for p in (f.flag, f.value) if p is not None])
    return plan_from(engine, inp, sized, st, fmt, command=command, flags=flags, setup=setup, notes=notes)
