"""SGLang (`python -m sglang.launch_server`): --tp, --mem-fraction-static, --context-length, KV dtype.

Same TP rule and fit levers as vLLM (SGLang's QKVParallelLinear splits heads the same way); the
memory model is the core's SGLang budget (mem_fraction_static = GPU minus its activation/graph
reserve, FORMULAS.md §3.5). Multi-node runs TP across nodes (--nnodes/--node-rank/--dist-init-addr,
docs.sglang.io server arguments). No CPU-offload lever: SGLang has none in this plan.
"""
from __future__ import annotations

from .common import LaunchInput, LaunchPlan
from .vllm import plan as _paged_plan


def plan(inp: LaunchInput) -> LaunchPlan:
    return _paged_plan(inp, engine="sglang")
