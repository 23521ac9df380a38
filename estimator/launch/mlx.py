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

from .common import (MIB, Flag, LaunchInput, LaunchPlan, Sized, cap_context, engine_format, gib, plan_from, rejudge,
                     shell_join, size)


def mlx_model(inp: LaunchInput, fmt, setup: list[str]) -> tuple[str, str]:
    """A known mlx-community conversion of this width, else `mlx_lm.convert` into a local folder."""
    ref = inp.refs.mlx.get(fmt.name)
    if ref is not None:
        return ref.repo, f"{fmt.name} conversion on the Hub ({ref.source}, seen {ref.seen})"
    if fmt.kind != "mlx":
        return inp.model_ref, "the checkpoint as published"
    bits = int(fmt.bits or 4)
    out = f"./{inp.spec.name}-{bits}bit"
    setup.append(shell_join(["mlx_lm.convert", "--hf-path", inp.model_ref, "-q", "--q-bits", str(bits),
                             "--q-group-size", str(fmt.group_size or 64), "--mlx-path", out]))
    return out, f"{bits}-bit conversion above"


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
    flags: list[Flag] = [Flag(flag="--model", value=model, reason=f"the MLX weights to serve ({how})")]
    flags.append(Flag(flag="--decode-concurrency", value=str(st.batch),
                      reason=f"{st.batch} concurrent sequence{'s' if st.batch > 1 else ''}, as sized"))
    flags.append(Flag(flag="--prompt-cache-bytes", value=str(sized.mem.kv_cache_bytes),
                      reason=f"caps the KV caches at the {gib(sized.mem.kv_cache_bytes)} the plan reserved"))
    dev = inp.hw.devices[0] if inp.hw.devices else None
    if not sized.ok and dev is not None and dev.usable_cap_bytes:
        raised = replace(inp.hw, devices=[replace(d, usable_cap_bytes=None) for d in inp.hw.devices])
        s2 = size(inp, fmt, st, raised)
        if s2.ok:
            need = s2.mem.per_device[0].total_bytes * (1 + inp.sizer.band(fmt, "mlx"))
            limit_mb = min(math.ceil(need / MIB / 1024) * 1024, int(dev.memory_bytes * inp.hw.usable_fraction / MIB))
            setup.insert(0, f"sudo sysctl iogpu.wired_limit_mb={limit_mb}")
            notes.append(f"the Metal working-set limit ({gib(dev.usable_cap_bytes)}) blocks the fit, not memory: "
                         f"raising it to {limit_mb} MiB (needed + the estimate's error band) lets the plan fit; "
                         "the setting resets at reboot")
            sized = Sized(s2.mem, rejudge(inp, s2.mem, raised, engine="mlx", fmt=fmt))
    command = shell_join(["mlx_lm.server"] + [p for f in flags for p in (f.flag, f.value) if p is not None])
    return plan_from(engine, inp, sized, st, fmt, command=command, flags=flags, setup=setup, notes=notes)
