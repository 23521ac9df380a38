"""Launch-command builders, one module per engine, and which engines a hardware set gets."""
from __future__ import annotations

from ..hardware import Hardware
from ..settings import too_old_for
from .common import Flag, LaunchInput, LaunchPlan

ALL_ENGINES = ("llama.cpp", "ollama", "vllm", "sglang", "mlx")


def engines_for(hw: Hardware, engine: str | None = None) -> list[str]:
    """`--engine` alone when given; otherwise what runs on this hardware: no vLLM/SGLang on Apple,
    without a GPU or on NVIDIA GPUs older than they support (MIN_CUDA_CC), MLX only on Apple, only vLLM on
    Intel Gaudi (llama.cpp, Ollama and SGLang have no Gaudi backend; vLLM runs there through the
    vllm-gaudi plugin, github.com/vllm-project/vllm-gaudi)."""
    if engine:
        return [engine]
    kinds = {d.kind for d in hw.devices}
    if "hpu" in kinds:
        return ["vllm"]
    if not kinds or kinds == {"cpu"}:
        return ["llama.cpp", "ollama"]
    if "apple" in kinds:
        return ["llama.cpp", "ollama", "mlx"]
    return ["llama.cpp", "ollama"] + [e for e in ("vllm", "sglang") if not too_old_for(e, hw)]


def plan_engine(engine: str, inp: LaunchInput) -> LaunchPlan:
    from . import llama_cpp, mlx, ollama, sglang, vllm

    return {"llama.cpp": llama_cpp.plan, "ollama": ollama.plan, "vllm": vllm.plan,
            "sglang": sglang.plan, "mlx": mlx.plan}[engine](inp)


def plan_all(inp: LaunchInput, engines: list[str]) -> dict[str, LaunchPlan]:
    """Each engine's plan with its own speed (the speed of exactly that command)."""
    plans = {e: plan_engine(e, inp) for e in engines}
    for p in plans.values():
        p.speed = plan_speed(inp, p)
        if p.max_context is None and p.fits and p.command and inp.with_max_context:
            p.max_context = plan_longest_context(inp, p)
    return plans


def sized_on(inp: LaunchInput, plan: LaunchPlan):
    """(format, hardware) a plan was sized on: its own format, and for vLLM/SGLang only the GPUs its
    tensor-parallel group uses."""
    fmt = next((f for f in inp.table.formats if f.name == plan.quant), None) or inp.fmt
    hw = inp.hw
    if plan.engine in ("vllm", "sglang"):
        hw = Hardware(**{**hw.__dict__, "devices": hw.devices[:plan.tensor_parallel]})
    return fmt, hw


def plan_longest_context(inp: LaunchInput, plan: LaunchPlan) -> int | None:
    """The longest context of a plan whose memory is a plain sizing of its settings (not vLLM's
    pipeline stages or CPU offload, whose memory the planner adjusts)."""
    from .common import longest_context

    if plan.pipeline_parallel > 1 or any(f.flag == "--cpu-offload-gb" for f in plan.flags):
        return None
    fmt, hw = sized_on(inp, plan)
    return longest_context(inp, fmt, plan.settings, step=16 if plan.engine in ("vllm", "sglang") else 256, hw=hw)


def plan_speed(inp: LaunchInput, plan: LaunchPlan):
    """Decode/prefill of a plan as sized: its format, context, KV, offload and split; None when a
    device has no bandwidth figure or the engine has no plan here (vLLM without a GPU)."""
    from ..speed import estimate_speed

    if not plan.command:
        return None
    fmt, hw = sized_on(inp, plan)
    try:
        return estimate_speed(inp.spec, inp.sizer.weights(fmt)[0], plan.settings, hw, plan.sized.mem,
                              calibration=inp.calibration)
    except ValueError:
        return None


__all__ = ["ALL_ENGINES", "Flag", "LaunchInput", "LaunchPlan", "engines_for", "plan_all", "plan_engine"]
