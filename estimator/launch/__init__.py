"""Launch-command builders, one module per engine, and which engines a hardware set gets."""
from __future__ import annotations

from ..hardware import Hardware
from .common import Flag, LaunchInput, LaunchPlan

ALL_ENGINES = ("llama.cpp", "ollama", "vllm", "sglang", "mlx")


def engines_for(hw: Hardware, engine: str | None = None) -> list[str]:
    """`--engine` alone when given; otherwise what runs on this hardware: no vLLM/SGLang on Apple
    or without a GPU, MLX only on Apple, only vLLM on Intel Gaudi (llama.cpp, Ollama and SGLang have no
    Gaudi backend; vLLM runs there through the vllm-gaudi plugin, github.com/vllm-project/vllm-gaudi)."""
    if engine:
        return [engine]
    kinds = {d.kind for d in hw.devices}
    if "hpu" in kinds:
        return ["vllm"]
    if not kinds or kinds == {"cpu"}:
        return ["llama.cpp", "ollama"]
    if "apple" in kinds:
        return ["llama.cpp", "ollama", "mlx"]
    return ["llama.cpp", "ollama", "vllm", "sglang"]


def plan_engine(engine: str, inp: LaunchInput) -> LaunchPlan:
    from . import llama_cpp, mlx, ollama, sglang, vllm

    return {"llama.cpp": llama_cpp.plan, "ollama": ollama.plan, "vllm": vllm.plan,
            "sglang": sglang.plan, "mlx": mlx.plan}[engine](inp)


def plan_all(inp: LaunchInput, engines: list[str]) -> dict[str, LaunchPlan]:
    return {e: plan_engine(e, inp) for e in engines}


__all__ = ["ALL_ENGINES", "Flag", "LaunchInput", "LaunchPlan", "engines_for", "plan_all", "plan_engine"]
