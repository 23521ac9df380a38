"""The pre-deploy gate: requirements in, pass/fail out, with the reason for each requirement.

The subject is the launch plan of the engine being sized (the command fitprobe tells you to
run), so a plan that fits only through a shorter context fails a context requirement, and one
that fits through CPU offload is held to the speed requirement. A `tight` verdict passes unless
`strict`. Tokens/s come from `tokens_per_second`, the one place the speed model is consulted.
"""
from __future__ import annotations

from fitprobe.estimator.fields import doc, record, replace

from .launch.common import LaunchInput, LaunchPlan, ctx_text, gib


@record
class Requirements:
    context: int | None = doc(default=None, gt=0, description="tokens per sequence the plan must serve")
    tps: float | None = doc(default=None, gt=0, description="decode tokens/s per sequence the plan must reach")
    min_margin_bytes: int = doc(default=0, ge=0, description="free memory the plan must leave on every device")
    strict: bool = doc(default=False, description="a tight verdict fails")

    @property
    def any(self) -> bool:
        return bool(self.context or self.tps or self.min_margin_bytes or self.strict)


@record
class Check:
    name: str = doc(description="fit | context | margin | speed")
    required: str
    actual: str
    passed: bool
    reason: str


@record
class GateResult:
    passed: bool
    subject: str = doc(description="what was judged: launch.<engine>")
    checks: list[Check]
    failed: list[str] = doc(default_factory=list, description="names of the requirements that do not hold")


def tokens_per_second(inp: LaunchInput, plan: LaunchPlan) -> tuple[float | None, str]:
    """Decode tokens/s per sequence for a launch plan, from estimator.speed; (None, why) without it."""
    try:
        from .speed import estimate_speed
    except ImportError as exc:  # the speed model ships separately; the gate says so instead of guessing
        return None, f"no speed model available ({exc})"
    fmt = inp.table.find(plan.quant) or inp.fmt
    st = replace(inp.settings, engine=plan.engine, quant=fmt.name, context=plan.context,
                                         kv_cache_dtype=plan.kv_cache_dtype, gpu_layers=plan.gpu_layers)
    hw = replace(inp.hw, devices=inp.hw.devices[:plan.tensor_parallel]) if plan.engine in ("vllm", "sglang") else inp.hw
    from .launch.common import size

    try:
        sized = size(inp, fmt, st, hw)
        speed = estimate_speed(inp.spec, inp.sizer.weights(fmt)[0], st, hw, sized.mem,
                               cpu_expert_layers=plan.cpu_moe_layers)
    except Exception as exc:  # missing calibration, unknown bandwidth: reported, never a traceback
        return None, f"speed not estimated: {exc}"
    return speed.decode_tps, f"{speed.bound} bound ({speed.backend})"


def evaluate(req: Requirements, plan: LaunchPlan, *, tps: tuple[float | None, str] | None = None) -> GateResult:
    checks: list[Check] = []
    ok_status = plan.status == "fits" or (plan.status == "tight" and not req.strict)
    need = "fits" if req.strict else "fits or tight"
    checks.append(Check(name="fit", required=need, actual=plan.status, passed=ok_status,
                        reason=f"{plan.engine} plan is {plan.status}" + (" and --strict refuses tight" if
                                                                         plan.status == "tight" and req.strict else "")))
    if req.context:
        checks.append(Check(name="context", required=str(req.context), actual=str(plan.context),
                            passed=plan.fits and plan.context >= req.context,
                            reason=f"the plan serves {ctx_text(plan.context)} tokens per sequence"
                            + ("" if plan.fits else " but does not fit")
                            + "".join(f"; {n}" for n in plan.notes if n.startswith("capped at"))))
    if req.min_margin_bytes:
        checks.append(Check(name="margin", required=str(req.min_margin_bytes), actual=str(plan.margin_bytes),
                            passed=plan.margin_bytes >= req.min_margin_bytes,
                            reason=f"{gib(plan.margin_bytes)} left on the tightest device, {gib(req.min_margin_bytes)} required"))
    if req.tps:
        value, why = tps if tps is not None else (None, "speed not evaluated")
        checks.append(Check(name="speed", required=f"{req.tps:g}", actual="unknown" if value is None else f"{value:.1f}",
                            passed=value is not None and plan.fits and value >= req.tps,
                            reason=why if value is None else f"~{value:.1f} tokens/s per sequence ({why})"))
    failed = [c.name for c in checks if not c.passed]
    return GateResult(passed=not failed, subject=f"launch.{plan.engine}", checks=checks, failed=failed)
