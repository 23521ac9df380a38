"""What each bundled model is for (use-case tags, an optional published benchmark) and how much
quality each quantization keeps: two small catalogs the ranking reads, validated at load."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from fitprobe.catalogs.validated import load_json_file
from fitprobe.estimator.fields import doc, record
from fitprobe.estimator.rank import Benchmark, QuantQuality

DATA = Path(__file__).parent / "data"
USE_CASES = ("chat", "base", "coding", "reasoning", "vision", "embedding")


@record
class ModelUse:
    name: str = doc(description="bundled catalog name")
    tags: list[str] = doc(description="chat, base, coding, reasoning (vision comes from the config)")
    source: str
    benchmark: Benchmark | None = None


@record
class ModelUses:
    schema: int
    about: str
    models: list[ModelUse]


@lru_cache(maxsize=1)
def load_uses() -> dict[str, ModelUse]:
    uses = load_json_file(ModelUses, DATA / "model_uses.json")
    for m in uses.models:
        unknown = set(m.tags) - set(USE_CASES)
        if unknown:
            raise ValueError(f"model_uses.json: {m.name} has unknown tags {sorted(unknown)} (known: {', '.join(USE_CASES)})")
    return {m.name: m for m in uses.models}


@lru_cache(maxsize=1)
def load_quant_quality() -> QuantQuality:
    return load_json_file(QuantQuality, DATA / "quant_quality.json")
