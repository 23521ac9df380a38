"""`fitprobe fit`: every model of the bundled catalog (or a Hub listing) sized on one hardware set,
its best plan, ranked (estimator/rank.py). Shared by `fit` and the report's hardware page."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fitprobe.estimator.fields import doc, record, replace
from fitprobe.estimator.message import msg
from fitprobe.i18n import N_

GIB = 1 << 30
# The format whose fixes `--all` shows for a model that does not fit (llama.cpp's common default).
FIX_FORMAT = "Q4_K_M"


@record
class FitRequest:
    """What `fitprobe fit` ranks on: named hardware (or this machine, probed) and the ranking's filters."""

    gpu: str | None = doc(default=None, description="catalog GPU name or 'cpu'; none: probe this machine")
    gpus: int = doc(default=1, description="number of identical GPUs named by `gpu`")
    memory_gib: float | None = doc(default=None, description="memory of each named GPU")
    ram_gib: float | None = doc(default=None, description="system RAM for offload (default: probed, or unknown)")
    usable_fraction: float = doc(default=0.95, description="share of physical memory treated as usable")
    min_ctx: int | None = doc(default=None, description="plans must serve at least this many tokens (default 32K "
                                                        "context target)")
    min_tps: float | None = doc(default=None, description="plans must decode at least this many tokens/s")
    use_case: str | None = doc(default=None, description="only models tagged for this use (chat, coding, ...)")
    engine: Literal["llama.cpp", "vllm", "sglang", "ollama", "mlx"] | None = doc(
        default=None, description="plans for this engine only")
    family: str | None = doc(default=None, description="only this model family (qwen3, llama, gemma3, ...)")
    max_params: float | None = doc(default=None, description="only models up to this many billion parameters")
    include_all: bool = doc(default=False, description="include models that do not fit, with what would make them fit")
    sort: str = doc(default="score", description="ranking key (fitprobe fit --help)")
    limit: int | None = doc(default=None, description="the first N models")
    min_margin_bytes: int = doc(default=0, ge=0, description="margin below which a plan is 'tight'")


@dataclass
class FitOptions:
    min_ctx: int | None = None
    min_tps: float | None = None
    use_case: str | None = None
    engine: str | None = None
    family: str | None = None
    max_params_b: float | None = None
    include_all: bool = False
    sort: str = "score"
    limit: int | None = None
    max_context: int = 131072  # the longest context a plan is stretched to
    min_margin_bytes: int = 0


@dataclass
class Subject:
    """One model to size: its facts, or why it cannot be sized."""

    name: str
    facts: object = None  # estimator.fit.ModelFacts
    unsupported: str | None = None


@dataclass
class FitRun:
    output: object  # fit_schema.FitOutput
    elapsed_s: float = 0.0


def catalog_subjects() -> list[Subject]:
    """The bundled models with their use-case tags (vision read from the config)."""
    from fitprobe.catalogs.model_uses import load_uses
    from fitprobe.catalogs.models import load_models
    from fitprobe.catalogs.quants import quant_table
    from fitprobe.catalogs.resolve import ResolveError, _from_entry
    from fitprobe.estimator.fit import ModelFacts, published_format

    uses = load_uses()
    out = []
    for entry in load_models():
        try:
            spec = _from_entry(entry, None).spec
        except ResolveError as exc:
            out.append(Subject(entry.name, unsupported=str(exc)))
            continue
        use = uses.get(entry.name)
        tags = list(use.tags) if use else []
        facts = ModelFacts(name=entry.name, spec=spec, family=entry.family, tags=tags,
                           benchmark=use.benchmark if use else None, hf_id=entry.hf_id, gguf_repo=entry.gguf_repo,
                           ollama=entry.ollama, native=published_format(spec, quant_table()))
        out.append(Subject(entry.name, facts=with_vision(facts)))
    return out


def with_vision(facts):
    """Facts with the 'vision' tag when the config has a vision tower."""
    if facts.counts.vision and "vision" not in facts.tags:
        facts.tags = [*facts.tags, "vision"]
    return facts


def _wanted(s: Subject, opts: FitOptions) -> bool:
    """Filters that need no sizing: use case, family, size."""
    f = s.facts
    if f is None:
        return True
    if opts.use_case and opts.use_case not in f.tags:
        return False
    if opts.family and opts.family.lower().replace("-", "") not in f.family.lower().replace("-", ""):
        return False
    if opts.max_params_b is not None and f.counts.text > opts.max_params_b * 1e9:
        return False
    return True


def run_fit(subjects: list[Subject], hw, *, opts: FitOptions, hardware_source: str, source: str,
            command: str = "fit") -> FitRun:
    """Size, filter and rank; the FitOutput contract filled."""
    import time

    from fitprobe.app import error_band
    from fitprobe.catalogs.model_uses import load_quant_quality
    from fitprobe.catalogs.quants import quant_table
    from fitprobe.catalogs.speed_calibration import load_calibration
    from fitprobe.estimator.fit import FitContext, fit_model, stretch
    from fitprobe.estimator.rank import DEFAULT_CONTEXT_TARGET, RankPolicy, best_per_model, order, rank
    from fitprobe.fit_schema import FitOutput, FitUnsupported

    t0 = time.perf_counter()
    policy = RankPolicy(context_target=opts.min_ctx or DEFAULT_CONTEXT_TARGET, sort=opts.sort)
    ctx = FitContext(hw=hw, table=quant_table(), quality=load_quant_quality(), error_band=error_band(),
                     policy=policy, calibration=load_calibration(), engines=[opts.engine] if opts.engine else None,
                     min_margin_bytes=opts.min_margin_bytes)
    rows, unsupported, fits = [], [], {}
    chosen = []
    considered = 0
    for s in subjects:
        if s.unsupported:
            unsupported.append(FitUnsupported(model=s.name, reason=s.unsupported))
            continue
        if not _wanted(s, opts):
            continue
        considered += 1
        fit = fit_model(s.facts, ctx)
        fits[s.name] = fit
        kept = [c for c in fit.scored if _plan_ok(c, opts)]
        ranked = best_per_model(rank([c.candidate for c in kept], policy)) if kept else []
        if not ranked and opts.include_all and fit.scored:
            # it does not run (or not as --min-ctx/--min-tps ask): its lightest plan, with what would make it fit
            lightest = min(fit.scored, key=lambda c: c.candidate.total_bytes + c.candidate.host_bytes)
            ranked = [replace(lightest, runs=False, score=0.0)]
        if ranked:
            best = ranked[0]
            if best.runs:
                best = stretch(fit, best, ctx, limit=opts.max_context)
            chosen.append(best)
    final = [c for c in order(chosen, policy.sort) if c.runs or opts.include_all]
    if opts.limit:
        final = final[:opts.limit]
    for i, s in enumerate(final, 1):
        rows.append(_row(i, s, fits[s.candidate.model], ctx, opts))
    out = FitOutput(command=command, hardware=_hardware(hw, hardware_source), context_target=policy.context_target,
                    sort=opts.sort, source=source, rows=rows, unsupported=unsupported, considered=considered)
    if hw.system_ram_bytes is None and hw.devices and not all(d.unified_memory for d in hw.devices):
        out.notes.append(msg("system RAM not given: plans that offload to RAM were not considered (pass --ram-gib)"))
    return FitRun(output=out, elapsed_s=time.perf_counter() - t0)


def _plan_ok(s, opts: FitOptions) -> bool:
    c = s.candidate
    if not s.runs:
        return False
    if opts.min_ctx and c.context < opts.min_ctx:
        return False
    if opts.min_tps and (c.decode_tps or 0) < opts.min_tps:
        return False
    return True


def _hardware(hw, source: str):
    from fitprobe.fit_schema import FitHardware

    return FitHardware(name=hw.name, source=source, count=len(hw.devices),
                       memory_bytes=sum(d.memory_bytes for d in hw.devices),
                       usable_bytes=sum(hw.usable_bytes(d) for d in hw.devices),
                       system_ram_bytes=hw.system_ram_bytes)


def _row(i: int, s, fit, ctx, opts: FitOptions):
    from fitprobe.fit_schema import FitRow, FitScore

    c, f = s.candidate, fit.facts
    p = f.counts
    plan = fit.plans.get((c.engine, c.quant))
    would = [] if s.runs else _would_fit(fit, ctx)
    if not s.runs and c.status != "exceeds":
        would.insert(0, msg(RUNS_NOT_AS_ASKED))
    return FitRow(rank=i, model=c.model, hf_id=f.hf_id, family=f.family, tags=f.tags, params=p.text,
                  params_active=p.active, max_context=f.spec.max_context, runs=s.runs, status=c.status,
                  engine=c.engine, quant=c.quant, bits_per_weight=c.bits_per_weight, context=c.context,
                  placement=c.placement, total_bytes=c.total_bytes, host_bytes=c.host_bytes,
                  margin_bytes=c.margin_bytes, decode_tps=_r(c.decode_tps), prefill_tps=_r(c.prefill_tps),
                  score=FitScore(score=round(s.score, 2), quality=round(c.quality, 2), quality_basis=c.quality_basis,
                                 speed_factor=s.speed_factor, speed_class=s.speed_class,
                                 context_factor=round(s.context_factor, 4)),
                  command=plan.command if plan and s.runs else "", would_fit=would,
                  notes=[n for n in (plan.notes if plan else []) if n][:3])


def _r(x):
    return None if x is None else round(x, 1)


def _would_fit(fit, ctx) -> list[str]:
    """The smallest changes that make the model fit, from estimator.fixes on its Q4_K_M llama.cpp plan."""
    from fitprobe.estimator.fixes import find_fixes
    from fitprobe.estimator.launch import LaunchInput
    from fitprobe.estimator.plan import Sizer
    from fitprobe.estimator.settings import RunSettings

    f = fit.facts
    fmt = ctx.table.find(FIX_FORMAT)
    st = RunSettings(quant=fmt.name, context=min(ctx.policy.context_target, f.spec.max_context or 4096))
    sizer = Sizer(f.spec, ctx.table, ctx.hw, error_band=ctx.error_band)
    inp = LaunchInput(spec=f.spec, fmt=fmt, settings=st, hw=ctx.hw, sizer=sizer, table=ctx.table,
                      calibration=ctx.calibration, hf_id=f.hf_id)
    fixes = find_fixes(inp)
    return [msg("%(change)s (%(cost)s)", change=x.change, cost=x.cost) for x in fixes[:3]]


RUNS_NOT_AS_ASKED = "it runs, but not with the context or speed asked (--min-ctx, --min-tps)"
SOURCE_WORDS = (N_("catalog"), N_("probe"), N_("bundled catalog"))  # FitHardware.source, FitOutput.source
SORT_WORDS = {"score": N_("score"), "quality": N_("quality"), "speed": N_("speed"), "context": N_("context"),
              "params": N_("parameter count"), "memory": N_("memory")}  # --sort's key, as the title says it


def render_table(out) -> str:
    """The ranked table, at most 100 columns wide, in the language fitprobe.i18n has chosen."""
    from fitprobe.i18n import _, ljust, rjust, say, spec

    names = [_("model"), _("quant"), _("engine"), _("ctx"), "GiB", _("margin"), "tok/s", "pp t/s", _("runs"),
             _("score")]
    widths = [max(w, _width(n)) for w, n in zip((26, 10, 9, 5, 6, 6, 6, 6, 8, 5), names)]
    left = (True, True, True, False, False, False, False, False, True, False)

    def cells(values) -> str:
        return " ".join(ljust(v, w) if lft else rjust(v, w) for v, w, lft in zip(values, widths, left))

    hw = out.hardware
    ram = _(", ") + _("%(size)s GiB RAM") % {"size": spec(hw.system_ram_bytes / GIB, ".0f")} if hw.system_ram_bytes else ""
    head = {"hardware": hw.name, "usable": spec(hw.usable_bytes / GIB, ".1f"), "ram": ram, "source": _(hw.source),
            "models": _(out.source), "sort": _(SORT_WORDS[out.sort])}
    if not hw.usable_bytes and hw.system_ram_bytes:  # CPU only: no device memory to speak of, only the RAM
        title = _("What runs on %(hardware)s (%(size)s GiB RAM; %(source)s) — %(models)s, sorted by %(sort)s") % {
            **head, "size": spec(hw.system_ram_bytes / GIB, ".0f")}
    else:
        title = _("What runs on %(hardware)s (%(usable)s GiB usable%(ram)s; %(source)s) — %(models)s, sorted by "
                  "%(sort)s") % head
    lines = [title,
             f"{' #':>3} " + cells(names)]
    for r in out.rows:
        lines.append(f"{r.rank:>3} " + cells([_cut(r.model, 26), _cut(r.quant, 10), _cut(r.engine, 9), _ctx(r.context),
                                              _gib(r.total_bytes + r.host_bytes), _gib(r.margin_bytes, "+"),
                                              _num(r.decode_tps), _num(r.prefill_tps), _runs(r),
                                              spec(r.score.score, ".1f")]))
        if not r.runs and r.would_fit:
            first = r.would_fit[0]
            hint = say(first) if first == RUNS_NOT_AS_ASKED else _("would fit: %(change)s") % {"change": say(first)}
            lines.append(f"{'':>4}{hint}")
    if not out.rows:
        lines.append("  " + (_("nothing matches") if out.considered else _("nothing matches: no model passed the filters")))
    lines.append(_("runs: GPU = all on the accelerators, GPU+RAM = offloads, ~ = tight; tok/s at a conversation's start"))
    lines.append(_("score = quality x speed factor x context factor (docs/fit.md; --json has each factor)"))
    if out.unsupported:
        lines.append(_("not sized (%(n)s): %(models)s") % {
            "n": len(out.unsupported), "models": _("; ").join(f"{u.model}: {say(u.reason)}" for u in out.unsupported[:5])
            + (" ..." if len(out.unsupported) > 5 else "")})
    lines += [f"- {say(n)}" for n in out.notes]
    return "\n".join(_cut(line, 100) for line in lines)


def _width(text: str) -> int:
    from fitprobe.i18n import width

    return width(text)


def _cut(text: str, n: int) -> str:
    if _width(text) <= n:
        return text
    while _width(text) > n - 1:
        text = text[:-1]
    return text + "…"


def _ctx(n: int) -> str:
    if n <= 0:
        return "-"
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else f"{n / 1024:.1f}K" if n >= 1024 else str(n)


def _num(x) -> str:
    from fitprobe.i18n import spec

    return "-" if x is None else spec(x, ",.0f" if x >= 100 else ".1f")


def _gib(n: int, sign: str = "") -> str:
    from fitprobe.i18n import spec

    x = n / GIB
    return ("+" if sign and x >= 0 else "") + spec(x, ",.0f" if abs(x) >= 100 else ".1f")


def _runs(r) -> str:
    from fitprobe.i18n import _

    if not r.runs:
        return _("no")
    mark = "~" if r.status == "tight" else ""
    return {"gpu": "GPU", "offload": _("GPU+RAM"), "cpu": "CPU"}.get(r.placement, r.placement) + mark
