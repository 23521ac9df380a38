"""The Python API: `from fitprobe import plan, check, probe, fit`. Documented in docs/python-api.md.

Each function takes what `fitprobe plan` / `check` take (a model and PlanRequest fields, named as the
long flags are) and returns the contract's typed `PlanOutput` — the same object `--json` prints and the
server answers — or raises a `fitprobe.errors.FitprobeError` whose `kind` says why (`kind.code` is the
CLI's exit code). The CLI's plan and check and the HTTP server call these same functions; `fit` returns
the FitOutput contract of `fitprobe fit --json`.
"""
from __future__ import annotations

from fitprobe.errors import UsageError
from fitprobe.estimator.message import msg
from fitprobe.usecases import PlanRequest, Probed, exit_code  # noqa: F401  (part of the API)


def plan(model: str | PlanRequest, gpu: str | None = None, *, hf_token: str | None = None, verify: bool = False,
         llama_fit_params: str | None = None, resolver=None, lookup=None, **options):
    """Size `model` on named hardware: `plan("qwen3-8b", "RTX 4090", gpus=2, context="max")` -> PlanOutput.
    `lookup` (fitprobe.deadline.Lookup) bounds the Hub requests (default: `hub_timeout` seconds)."""
    from fitprobe import usecases

    return usecases.plan(request(model, gpu, options), hf_token=hf_token, verify=verify,
                         verify_tool=llama_fit_params, resolver=resolver, lookup=lookup).output


def check(model: str | PlanRequest, *, gpu: str | None = None, hf_token: str | None = None, verify: bool = False,
          llama_fit_params: str | None = None, probe_result: Probed | None = None, resolver=None, lookup=None,
          **options):
    """Size `model` on this machine, idle and right now -> PlanOutput (`verdict_now`, `recommended_now`).
    `probe_result` (from `fitprobe.usecases.probed()`) reuses a probe already taken."""
    from fitprobe import usecases

    return usecases.check(request(model, gpu, options), probe_result=probe_result, hf_token=hf_token,
                          verify=verify, verify_tool=llama_fit_params, resolver=resolver, lookup=lookup).output


def fit(gpu=None, *, probe_result: Probed | None = None, **options):
    """Which catalog models run on `gpu` (or this machine), ranked -> FitOutput (`rows`, best first):
    `fit("RTX 4090", ram_gib=64, use_case="coding", limit=5)`."""
    from fitprobe import usecases
    from fitprobe.fitting import FitRequest

    if isinstance(gpu, FitRequest):
        request_ = gpu
    else:
        request_ = _build(FitRequest, gpu=gpu, **options)
    return usecases.fit(request_, probe_result=probe_result).output


def probe():
    """What this machine has -> fitprobe.probe.types.ProbeReport (GPUs, CPU, RAM, backends; never raises)."""
    from fitprobe import usecases

    return usecases.probe()


def request(model: str | PlanRequest, gpu: str | None, options: dict) -> PlanRequest:
    """A PlanRequest from a model and keyword options (or a request as it is); bad names or values are
    usage errors."""
    if isinstance(model, PlanRequest):
        if gpu is not None:
            options = {**options, "gpu": gpu}
        model, options = model.model, {**_fields(model), **options}
    else:
        options = {**options, "gpu": gpu} if gpu is not None else options
    return _build(PlanRequest, model=model, **options)


def _build(cls, **fields):
    """cls(**fields); an unknown name or a bad value is a usage error."""
    from dataclasses import fields as declared

    known = {f.name for f in declared(cls)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise UsageError(msg("unknown option %(unknown)s (%(record)s has: %(known)s)",
                             unknown=', '.join(unknown), record=cls.__name__, known=', '.join(sorted(known))))
    try:
        return cls(**fields)
    except (TypeError, ValueError) as exc:
        raise UsageError(msg("invalid option: %(exc)s", exc=exc)) from None


def _fields(req: PlanRequest) -> dict:
    from dataclasses import fields

    return {f.name: getattr(req, f.name) for f in fields(req) if f.name != "model"}
