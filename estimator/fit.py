"""One model on one hardware set, every format worth trying: the candidates `rank` orders.

The launch planners do the work (each one searches KV type, offload and context until its plan
fits); this module only chooses which (engine, format) pairs to ask. Each pair has an upper bound
on its score: its quality x the best context factor x the speed class of a decode ceiling (active
weights at full calibrated bandwidth, no KV, no overhead). Pairs are asked best bound first and
skipped once their bound cannot beat the best score found, so the result is the true best while
most pairs are never planned. `deploy`, `conversation_speed` and `stretch` are the seams to the planners
and the speed model, so their improvements flow in unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from fitprobe.estimator.fields import replace

from .hardware import Hardware
from .launch import LaunchInput, LaunchPlan, engines_for, plan_engine
from .launch.common import size
from .plan import Sizer
from .quant import QuantFormat, QuantTable
from .rank import Benchmark, Candidate, QuantQuality, RankPolicy, Scored, score, size_points, speed_class
from .settings import RunSettings
from .speed import DEFAULT_RAM_BANDWIDTH_GBS, Speed, backend_key, estimate_speed
from .spec import ModelSpec
from .tensors import param_counts

# GGUF quants llama.cpp / Ollama / MLX are asked for, most precise first (BF16 is a 16-bit GGUF).
GGUF_LADDER = ("BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "IQ4_XS", "Q3_K_M", "IQ3_XXS", "Q2_K", "IQ2_XXS", "IQ1_M")
# Checkpoint formats vLLM / SGLang serve from the published repo (FP8 quantized on load) or an AWQ repo.
CHECKPOINT_LADDER = ("BF16", "FP8", "AWQ")
# Decode speed is quoted at the start of a conversation, as llama-bench's tg test measures it: 256
# tokens (one llama.cpp cache pad) in an 8-bit cache, whatever KV type and length the plan reserves.
# So a plan never scores slower because extra memory let the planner keep a wider or longer cache.
SPEED_DEPTH = 256
SPEED_KV = {"llama.cpp": "q8_0", "ollama": "q8_0", "mlx": "q8_0", "vllm": "fp8", "sglang": "fp8"}
RANKED_ENGINES = ("llama.cpp", "vllm", "mlx")  # Ollama and SGLang size like llama.cpp and vLLM: asked by name only


@dataclass
class ModelFacts:
    """What the ranking needs about a model besides its spec (catalog tags, a benchmark)."""

    name: str
    spec: ModelSpec
    family: str = ""
    tags: list[str] = field(default_factory=list)
    benchmark: Benchmark | None = None
    hf_id: str | None = None
    gguf_repo: str | None = None
    ollama: str | None = None
    native: str = "BF16"  # the checkpoint's own format (FP8, NVFP4, MXFP4 ...): quality 100 % there
    _counts: object = None

    @property
    def counts(self):
        """Parameter counts (text, active, vision), computed once: the inventory walk is not free."""
        if self._counts is None:
            self._counts = param_counts(self.spec)
        return self._counts


@dataclass
class FitContext:
    """Shared by every model of one run: hardware, tables, policy."""

    hw: Hardware
    table: QuantTable
    quality: QuantQuality
    error_band: float
    policy: RankPolicy
    calibration: object  # the speed fit, loaded by the edge (catalogs.speed_calibration)
    engines: list[str] | None = None  # --engine: that one only
    min_margin_bytes: int = 0


@dataclass
class ModelFit:
    facts: ModelFacts
    scored: list[Scored]
    plans: dict[tuple[str, str], LaunchPlan]  # (engine, quant) -> plan, for the commands
    inputs: dict[tuple[str, str], LaunchInput]


def published_format(spec: ModelSpec, table: QuantTable) -> str:
    """The format the checkpoint is published in (BF16, FP8, NVFP4, MXFP4 ...), as the planners read it."""
    from types import SimpleNamespace

    from .launch.common import native_checkpoint_format

    return native_checkpoint_format(SimpleNamespace(spec=spec, table=table)).name


def decode_ceiling(weights_bytes: int, spec: ModelSpec, counts, hw: Hardware, engine: str, calibration) -> float:
    """An upper bound of what estimator.speed can say for any plan of these weights: the active
    weights read once per token at the calibrated bandwidth of every device together, the part that
    cannot fit on the devices at all read from RAM (MoE: routed experts at k/E); no KV, no overhead."""
    share = counts.active / counts.text if counts.text else 1.0
    eta_ram = calibration.efficiency("llama.cpp/cpu").bandwidth
    ram_bw = (hw.ram_bandwidth_gbs or DEFAULT_RAM_BANDWIDTH_GBS) * 1e9 * eta_ram
    if not hw.devices:
        return ram_bw / max(1.0, weights_bytes * share)
    eta = calibration.efficiency(backend_key(engine, hw.devices[0])).bandwidth
    gpu_bw = sum(d.bandwidth_gbs or 0 for d in hw.devices) * 1e9 * eta
    if not gpu_bw:
        return float("inf")  # no bandwidth figure: no bound
    unified = all(d.unified_memory for d in hw.devices)
    overflow = 0 if unified else max(0, weights_bytes - sum(hw.usable_bytes(d) for d in hw.devices))
    cpu_share = min(share, spec.moe.n_experts_used / spec.moe.n_experts) if spec.moe else 1.0
    cpu_read = overflow * cpu_share
    gpu_read = max(0.0, weights_bytes * share - cpu_read)
    return 1.0 / max(1e-12, gpu_read / gpu_bw + cpu_read / ram_bw)


def deploy(inp: LaunchInput, engine: str) -> LaunchPlan:
    """The planner's plan for this engine: the one seam to estimator.launch."""
    return plan_engine(engine, inp)


def conversation_speed(inp: LaunchInput, plan: LaunchPlan, *, depth: int = SPEED_DEPTH) -> Speed | None:
    """Decode and prefill speed of a launch plan with `depth` tokens in an 8-bit cache (None without figures).
    Not the plan's own speed (launch.plan_speed, at its full context and KV type): see SPEED_DEPTH."""
    fmt = inp.table.find(plan.quant) or inp.fmt
    hw = inp.hw
    if plan.engine in ("vllm", "sglang"):
        hw = replace(hw, devices=hw.devices[:plan.tensor_parallel])
    st = replace(inp.settings, engine=plan.engine, quant=fmt.name, context=min(plan.context, depth),
                 kv_cache_dtype=SPEED_KV.get(plan.engine, plan.kv_cache_dtype), gpu_layers=plan.gpu_layers)
    try:
        sized = size(inp, fmt, st, hw)
        return estimate_speed(inp.spec, inp.sizer.weights(fmt)[0], st, hw, sized.mem,
                              cpu_expert_layers=plan.cpu_moe_layers, calibration=inp.calibration)
    except ValueError:
        return None  # a device without a bandwidth figure: speed unknown, said by the caller


def placement(plan: LaunchPlan, inp: LaunchInput) -> str:
    if not inp.hw.devices:
        return "cpu"
    offloaded = (plan.cpu_moe_layers > 0 or any(f.flag == "--cpu-offload-gb" for f in plan.flags)
                 or (plan.gpu_layers is not None and plan.gpu_layers <= inp.spec.n_layers))
    return "offload" if offloaded else "gpu"


def engine_formats(engine: str, facts: ModelFacts, ctx: FitContext) -> list[QuantFormat]:
    hw = ctx.hw
    names: list[str]
    if engine in ("vllm", "sglang"):
        names = [n for n in CHECKPOINT_LADDER if n != "FP8" or all(d.fp8 for d in hw.devices)]
        if facts.native not in names:
            names.insert(0, facts.native)
    else:
        names = list(GGUF_LADDER)
        if facts.native == "MXFP4":
            names.insert(0, "MXFP4")
    return [f for f in (ctx.table.find(n) for n in names) if f is not None]


def base_quality(facts: ModelFacts, counts) -> tuple[float, str]:
    """The model's quality points before quantization: its benchmark, else the size proxy."""
    if facts.benchmark:
        return facts.benchmark.score, f"{facts.benchmark.name} {facts.benchmark.score:g}"
    return size_points(counts.text, counts.active), "size proxy"


def retention_of(fmt: QuantFormat, facts: ModelFacts, ctx: FitContext, bits) -> tuple[float, str]:
    """Share of quality a format keeps: 1 for the published weights themselves; any other format loses
    what it loses from 16 bit (a model published quantized is requantized from its 16-bit form).
    Formats the scoreboard did not measure are read at their nominal bits (checkpoint formats: those
    of the quantized linear layers), else at `bits(fmt)`, the bits per weight of this model."""
    if fmt.name == facts.native:
        return 1.0, f"{fmt.name}: the published weights"
    return ctx.quality.retention(fmt.name, _bits_for_curve(fmt, ctx, bits))


def _bits_for_curve(fmt: QuantFormat, ctx: FitContext, bits) -> float:
    if ctx.quality.nominal_bits(fmt.name) is not None:
        return 0.0  # measured: its own value is used, not the curve
    return nominal_bits(fmt) or bits(fmt)


def nominal_bits(fmt: QuantFormat) -> float | None:
    return fmt.linear_bpw or (fmt.bits if fmt.kind != "gguf" else None)


def fit_model(facts: ModelFacts, ctx: FitContext) -> ModelFit:
    """Candidates for one model on ctx.hw, best first; planners run only where a candidate could win."""
    spec, hw = facts.spec, ctx.hw
    sizer = Sizer(spec, ctx.table, hw, error_band=ctx.error_band, min_margin_bytes=ctx.min_margin_bytes)
    counts = facts.counts
    params = max(1, counts.text)
    base_q, basis = base_quality(facts, counts)
    target = ctx.policy.context_target
    engines = [e for e in (ctx.engines or engines_for(hw)) if ctx.engines or e in RANKED_ENGINES]

    def bits(fmt: QuantFormat) -> float:
        return sizer.weights(fmt)[0].total * 8 / params

    native_fmt = ctx.table.find(facts.native)
    native_bits = bits(native_fmt) if native_fmt and facts.native != "BF16" else 16.0
    capacity = sum(hw.usable_bytes(d) for d in hw.devices)
    if not (hw.devices and all(d.unified_memory for d in hw.devices)):
        capacity += int((hw.system_ram_bytes or 0) * hw.usable_fraction)
    todo = []
    out: list[Scored] = []
    for engine in engines:
        formats = engine_formats(engine, facts, ctx)
        smallest = formats[-1]
        rough_min = (nominal_bits(smallest) or ctx.quality.nominal_bits(smallest.name) or 16.0) * params / 8
        w_min = sizer.weights(smallest)[0].total if capacity > 0 and rough_min > capacity / 2 else 0
        if w_min > capacity:  # the ladder only grows: no format of this engine can fit
            kept, how = retention_of(smallest, facts, ctx, bits)
            out.append(score(replace(_candidate(facts, params, engine, smallest, w_min * 8 / params, base_q * kept,
                                                f"{basis} x {kept:.3f} ({how})"),
                                     total_bytes=w_min, margin_bytes=capacity - w_min), ctx.policy))
            continue
        for order, fmt in enumerate(formats):
            wide = nominal_bits(fmt) or ctx.quality.nominal_bits(fmt.name) or bits(fmt)
            if facts.native != "BF16" and fmt.name != facts.native and wide > native_bits * 1.02:
                continue  # wider than the published weights: no quality to gain, only memory to lose
            kept, how = retention_of(fmt, facts, ctx, bits)
            q = base_q * kept
            rough = (nominal_bits(fmt) or ctx.quality.nominal_bits(fmt.name) or 16.0) * params / 8
            ceiling = speed_class(decode_ceiling(int(rough), spec, counts, hw, engine, ctx.calibration))[0]
            todo.append((q * ceiling, q, -order, engine, fmt, f"{basis} x {kept:.3f} ({how})"))
    # best first by a rough bound (nominal bits), so a plan that runs fast is found early and prunes the rest
    todo.sort(key=lambda t: (-t[0], -t[1], -t[2]))
    best = 0.0
    plans, inputs = {}, {}
    cf_max = score(_blank(facts, min(target, spec.max_context or target)), ctx.policy).context_factor
    for _, q, _, engine, fmt, why in todo:
        if q * cf_max <= best:
            continue
        weights_total = sizer.weights(fmt)[0].total
        if q * cf_max * speed_class(decode_ceiling(weights_total, spec, counts, hw, engine, ctx.calibration))[0] <= best:
            continue  # even at the memory-bandwidth ceiling it could not outscore the best
        base = _candidate(facts, params, engine, fmt, weights_total * 8 / params, q, why)
        if capacity > 0 and weights_total > capacity:
            out.append(score(replace(base, context=0, status="exceeds", placement="none",
                                     total_bytes=weights_total, margin_bytes=capacity - weights_total), ctx.policy))
            continue
        st = RunSettings(quant=fmt.name, context=target, engine=engine,
                         kv_cache_dtype="auto" if engine in ("vllm", "sglang") else "f16")
        inp = LaunchInput(spec=spec, fmt=fmt, settings=st, hw=hw, sizer=sizer, table=ctx.table, hf_id=facts.hf_id,
                          with_max_context=False,
                          gguf_repo=facts.gguf_repo, ollama_name=facts.ollama, calibration=ctx.calibration)
        plan = deploy(inp, engine)
        if engine == "vllm" and any(f.flag == "--cpu-offload-gb" for f in plan.flags):
            plan = replace(plan, fits=False, status="exceeds",
                           notes=plan.notes + ["needs --cpu-offload-gb: llama.cpp offload is the better lever"])
        speed = conversation_speed(inp, plan) if plan.fits else None
        cand = replace(base, engine=plan.engine, quant=plan.quant, context=plan.context, status=plan.status,
                       placement=placement(plan, inp), total_bytes=plan.total_bytes, host_bytes=plan.host_bytes,
                       margin_bytes=plan.margin_bytes, decode_tps=speed.decode_tps if speed else None,
                       prefill_tps=speed.prefill_tps if speed else None)
        s = score(cand, ctx.policy)
        out.append(s)
        plans[(plan.engine, plan.quant)] = plan
        inputs[(plan.engine, plan.quant)] = inp
        best = max(best, s.score)
    return ModelFit(facts=facts, scored=out, plans=plans, inputs=inputs)


def stretch(fit: ModelFit, s: Scored, ctx: FitContext, *, limit: int) -> Scored:
    """The same plan at a longer context when its placement holds one: the model's maximum (up to
    `limit`), else half of it, and so on down to the plan's own. One estimate per step (the plan's
    settings, with its KV type or the q8_0 cache the planner turns to under KV pressure) picks the
    step; the planner then plans it, and the result is kept only with the same placement and verdict.
    vLLM's planner searches max-model-len itself, so its plan is asked at the maximum directly."""
    c = s.candidate
    key = (c.engine, c.quant)
    inp, old = fit.inputs.get(key), fit.plans.get(key)
    longest = min(limit, fit.facts.spec.max_context or 0)
    if inp is None or old is None or not s.runs or longest <= c.context:
        return s
    if c.engine not in ("vllm", "sglang"):
        longest = _longest_step(inp, old, c.context, longest)
        if longest is None:
            return s
    wider = LaunchInput(**{**inp.__dict__, "settings": replace(inp.settings, context=longest)})
    plan = deploy(wider, c.engine)
    same_place = (plan.gpu_layers == old.gpu_layers and plan.cpu_moe_layers == old.cpu_moe_layers
                  and not any(f.flag == "--cpu-offload-gb" for f in plan.flags))
    if not plan.fits or plan.context <= c.context or not same_place or plan.status != c.status:
        return s
    fit.plans[key], fit.inputs[key] = plan, wider
    return score(replace(c, context=plan.context, total_bytes=plan.total_bytes, host_bytes=plan.host_bytes,
                         margin_bytes=plan.margin_bytes), ctx.policy)


def _longest_step(inp: LaunchInput, plan: LaunchPlan, current: int, longest: int) -> int | None:
    if plan.cpu_moe_layers:
        return None  # expert offload is placed after sizing: only the planner can extend it
    fmt = inp.table.find(plan.quant) or inp.fmt
    n = longest
    while n > current:
        for kv in dict.fromkeys([plan.kv_cache_dtype] + (["q8_0"] if plan.engine != "mlx" else [])):
            if size(inp, fmt, replace(plan.settings, context=n, kv_cache_dtype=kv)).ok:
                return n
        n //= 2
    return None


def _candidate(facts: ModelFacts, params: int, engine: str, fmt: QuantFormat, bits: float, q: float,
               basis: str) -> Candidate:
    return Candidate(model=facts.name, family=facts.family, tags=facts.tags, params=params, engine=engine,
                     quant=fmt.name, bits_per_weight=round(bits, 3), context=0, status="exceeds", placement="none",
                     total_bytes=0, host_bytes=0, margin_bytes=0, quality=round(min(100.0, q), 4), quality_basis=basis)


def _blank(facts: ModelFacts, context: int) -> Candidate:
    return Candidate(model=facts.name, params=0, engine="", quant="", bits_per_weight=0, context=context,
                     status="fits", placement="gpu", total_bytes=0, host_bytes=0, margin_bytes=0, quality=0)
