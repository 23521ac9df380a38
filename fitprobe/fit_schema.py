"""The JSON contract of `fitprobe fit --json` (and the report's hardware page): `FitOutput`.

Typed records like fitprobe/schema.py; fitprobe/contract.py validates and documents them.
Bytes are integers, speeds tokens/s. Bump FIT_SCHEMA_VERSION on any breaking change.
"""
from __future__ import annotations

from fitprobe.estimator.fields import doc, record

FIT_SCHEMA_VERSION = "1.0"


@record
class FitHardware:
    name: str = doc(description="'2x RTX 4090', 'CPU only', ...")
    source: str = doc(description="'catalog' (named with --gpu) or 'probe'")
    count: int = doc(description="accelerators (0 = CPU only)")
    memory_bytes: int = doc(description="physical accelerator memory, all devices")
    usable_bytes: int = doc(description="what models may use on the accelerators (usable share, caps)")
    system_ram_bytes: int | None = doc(default=None, description="host RAM for offload; null = unknown (not counted)")


@record
class FitScore:
    """The score and its factors, so a reader can recompute it (docs/fit.md)."""

    score: float = doc(description="quality x speed_factor x context_factor; 0 when it does not run")
    quality: float = doc(description="quality points (0-100) of the model at this format")
    quality_basis: str = doc(description="benchmark or size proxy, and the format's retention with its basis")
    speed_factor: float = doc(description="1.0 fast (>= 4x reading speed), 0.75 reading speed, 0.4 slow, 0.1 crawl")
    speed_class: str
    context_factor: float = doc(description="sqrt(min(1, context / context_target))")


@record
class FitRow:
    rank: int = doc(description="1 = best; plans that do not run come after every plan that runs")
    model: str = doc(description="bundled catalog name or Hub repo id")
    hf_id: str | None = None
    family: str = ""
    tags: list[str] = doc(default_factory=list, description="use cases: chat, base, coding, reasoning, vision")
    params: int = doc(description="language-model parameters")
    params_active: int = doc(description="parameters per token (MoE: routed experts counted k/E)")
    max_context: int = doc(description="the model's maximum context (max_position_embeddings)")
    runs: bool = doc(description="the plan fits (or is tight) on this hardware")
    status: str = doc(description="fits | tight | exceeds")
    engine: str
    quant: str = doc(description="format of the plan (catalogs/data/quant_formats.json)")
    bits_per_weight: float
    context: int = doc(description="tokens per sequence the plan serves (the longest that needs no more offload)")
    placement: str = doc(description="gpu, offload (part in system RAM), cpu, or none (does not fit)")
    total_bytes: int = doc(description="accelerator memory the plan needs")
    host_bytes: int = doc(description="system RAM the plan needs")
    margin_bytes: int = doc(description="usable minus needed on the tightest device (negative = short)")
    decode_tps: float | None = doc(default=None, description="tokens/s per sequence at the start of a conversation "
                                                               "(256 tokens in an 8-bit cache, like llama-bench tg)")
    prefill_tps: float | None = doc(default=None, description="prompt tokens/s for a 4K-token prompt")
    score: FitScore
    command: str = doc(default="", description="the launch command of this plan")
    would_fit: list[str] = doc(default_factory=list, description="--all, when it does not run: the smallest changes that make it fit")
    notes: list[str] = doc(default_factory=list)


@record
class FitUnsupported:
    model: str
    reason: str = doc(description="why it was not sized (architecture fitprobe cannot size, no config, Hub error)")


@record
class FitOutput:
    schema_version: str = FIT_SCHEMA_VERSION
    command: str = doc(description="fit or report")
    hardware: FitHardware
    context_target: int = doc(description="context at which the context factor reaches 1 (32K or --min-ctx)")
    sort: str = doc(description="score, quality, speed, context, params or memory")
    source: str = doc(description="bundled catalog, or the Hugging Face Hub listing (with its cache state)")
    rows: list[FitRow] = doc(default_factory=list, description="one per model, best plan, ranked")
    unsupported: list[FitUnsupported] = doc(default_factory=list, description="models that could not be sized")
    considered: int = doc(default=0, description="models sized before filters on the plan (--min-ctx, --min-tps)")
    notes: list[str] = doc(default_factory=list)
