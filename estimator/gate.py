"""The pre-deploy gate: requirements in, pass/fail out, with the reason for each requirement.

The subject is the launch plan of the engine being sized (the command fitprobe tells you to
run), so a plan that fits only through a shorter context fails a context requirement, and one
that fits through CPU offload is held to the speed requirement. A `tight` verdict passes unless
`strict`. Tokens/s are the plan's own speed estimate (LaunchPlan.speed).
"""
from __future__ import annotations

from typing import Literal

from fitprobe.estimator.fields import doc, record

from .launch.common import LaunchPlan, ctx_text, gib
from .message import Num, join, msg


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
    subject: str = doc(description="what was judged: launch.<engine> (the recommended command), or recommended_now "
                                   "when a check gated right now judged the deployment that fits the free memory")
    checks: list[Check]
    failed: list[str] = doc(default_factory=list, description="names of the requirements that do not hold")
    on: Literal["idle", "now"] = doc(default="idle", description="memory the subject was sized on: 'idle' (the devices' total) or "
                                              "'now' (free right now: `check`, unless --gate-on idle)")


def evaluate(req: Requirements, plan: LaunchPlan) -> GateResult:
    """Judge the plan's own status, context, margin and speed (plan.speed, the printed command's)."""
    checks: list[Check] = []
    ok_status = plan.status == "fits" or (plan.status == "tight" and not req.strict)
    need = "fits" if req.strict else msg("fits or tight")
    checks.append(Check(name="fit", required=need, actual=plan.status, passed=ok_status,
                        reason=msg("%(engine)s plan is %(status)s and --strict refuses tight", engine=plan.engine,
                                   status=plan.status) if plan.status == "tight" and req.strict
                        else msg("%(engine)s plan is %(status)s", engine=plan.engine, status=plan.status)))
    if req.context:
        serves = (msg("the plan serves %(context)s tokens per sequence", context=ctx_text(plan.context)) if plan.fits
                  else msg("the plan serves %(context)s tokens per sequence but does not fit",
                           context=ctx_text(plan.context)))
        checks.append(Check(name="context", required=str(req.context), actual=str(plan.context),
                            passed=plan.fits and plan.context >= req.context,
                            reason=join([serves, *(n for n in plan.notes if n.startswith("capped at"))])))
    if req.min_margin_bytes:
        checks.append(Check(name="margin", required=str(req.min_margin_bytes), actual=str(plan.margin_bytes),
                            passed=plan.margin_bytes >= req.min_margin_bytes,
                            reason=msg("%(margin)s left on the tightest device, %(required)s required",
                                       margin=gib(plan.margin_bytes), required=gib(req.min_margin_bytes))))
    if req.tps:
        sp = plan.speed
        value, why = ((sp.decode_tps, msg("%(bound)s bound (%(backend)s)", bound=sp.bound, backend=sp.backend)) if sp
                      else (None, msg("speed not estimated")))
        checks.append(Check(name="speed", required=f"{req.tps:g}",
                            actual=msg("unknown") if value is None else f"{value:.1f}",
                            passed=value is not None and plan.fits and value >= req.tps,
                            reason=why if value is None else msg("~%(tps)s tokens/s per sequence (%(why)s)",
                                                                 tps=Num(value, ".1f"), why=why)))
    failed = [c.name for c in checks if not c.passed]
    return GateResult(passed=not failed, subject=f"launch.{plan.engine}", checks=checks, failed=failed)
