"""How far an approximate format's size can fall short of the real file, measured on published files.

An approximate format (`quant.is_approximate`) is sized for a model's family by a mix no published file
of that family confirms, so the estimate's usual error band (measured on runs whose formats are sized
exactly) does not cover it. Its own error is measured instead: every published file of a format is set
beside this formula's size of the same model (`QuantTable.measured`, written by scripts/quant_spread.py).
The unsafe direction is a file larger than the estimate, so the band takes the largest excess

1. of the format's published files in the model's family ("family");
2. none there: of the format's files in other families it also sizes by an unconfirmed mix ("format");
3. none either: of every approximate format's files in families sized that way ("approximate formats"),

each tier labelled in the text. A file of a family sized by a recipe or a checked mix measures that
recipe, not the mix, so it never stands in for one. Never below zero: files that run smaller leave the
usual band as it is. The weights' band becomes (1 + measured p90) x (1 + excess) - 1: the formula's
error against the file, then the engine's against the file.

A published size is not put in the formula's place for a catalog model: it speaks for its own upload,
and the same UD name is another mix in another upload (DeepSeek-R1's Jan-2025 UD-Q2_K_XL is 212 GB in
unsloth.ai/blog/deepseekr1-dynamic, V3-0324's 233 GiB), and no catalog fact ties a bundled model to the
upload a published file came from. Where the Hub lists the very file planned (`unsloth/...-GGUF:UD-IQ1_S`),
its size is used ("real file size", catalogs/resolve.py) and no spread applies.
"""
from __future__ import annotations

from typing import Literal

from fitprobe.estimator.fields import doc, record

from .message import Num, msg
from .quant import MeasuredFile, QuantFormat, QuantTable, is_approximate, recipe_family, weight_bytes
from .spec import ModelSpec
from .verdict import ErrorBand

Basis = Literal["family", "format", "approximate formats"]

FAMILY_WORDS = {"dense": msg("dense"), "moe": msg("MoE"), "mla_moe": msg("latent-attention MoE (DeepSeek-style)"),
                "hybrid": msg("recurrent-hybrid"), "hybrid_moe": msg("recurrent-hybrid MoE")}


@record
class WeightSpread:
    """An approximate format's measured shortfall on one model family, and the file that sets it."""

    format: str
    family: str = doc(description="recipe_family() of the model being planned")
    excess: float = doc(ge=0, description="how much larger the worst published file is than the formula's size")
    basis: Basis = doc(description="family: files of this family; format: of this format, other families; "
                                   "approximate formats: of any approximate format (this one has no file)")
    worst: MeasuredFile

    def text(self) -> str:
        """Why the band is wide, in one sentence."""
        w = self.worst
        seen = msg("%(model)s's published %(format)s file is %(published)s against %(estimate)s by the formula",
                   model=w.model, format=w.format, published=Num(w.published_gib, ".1f", "GiB"),
                   estimate=Num(w.estimate_gib, ".1f", "GiB"))
        family = FAMILY_WORDS.get(self.family, self.family)
        if self.basis == "family":
            head = msg("%(format)s is sized approximately for %(family)s models: %(seen)s",
                       format=self.format, family=family, seen=seen)
        elif self.basis == "format":
            head = msg("%(format)s is sized approximately and no published file of a %(family)s model checks it: "
                       "the band takes the largest excess measured for the format elsewhere (%(seen)s)",
                       format=self.format, family=family, seen=seen)
        else:
            head = msg("%(format)s is sized approximately and no published file of it checks the formula: the band "
                       "takes the largest excess measured for any approximate format (%(seen)s)",
                       format=self.format, seen=seen)
        if self.excess <= 0:
            return msg("%(head)s; the formula is not short there, so the usual band applies", head=head)
        return msg("%(head)s, so the weights' error band adds %(excess)s", head=head, excess=Num(self.excess, ".0%"))


def measure(table: QuantTable, specs: dict[str, ModelSpec]) -> list[MeasuredFile]:
    """Every published file of every format beside this formula's size of its model (`specs`: by catalog name)."""
    out = []
    for fmt in table.formats:
        for pub in fmt.published:
            spec = specs[pub.model]
            est = weight_bytes(spec, fmt, table).total / (1 << 30)
            out.append(MeasuredFile(format=fmt.name, model=pub.model, family=recipe_family(spec),
                                    published_gib=pub.gib, estimate_gib=round(est, 3), source=pub.source))
    return out


def weight_spread(fmt: QuantFormat, spec: ModelSpec, table: QuantTable) -> WeightSpread | None:
    """The measured spread of an approximate format on this model's family; None where the format is
    sized by a recipe or a checked mix, or where nothing at all was measured."""
    if not is_approximate(fmt, spec):
        return None
    family = recipe_family(spec)
    formats = {f.name: f for f in table.formats}
    by_mix = [m for m in table.measured if m.format in formats and _sized_by_mix(formats[m.format], m.family)]
    tiers: list[tuple[Basis, list[MeasuredFile]]] = [
        ("family", [m for m in by_mix if m.format == fmt.name and m.family == family]),
        ("format", [m for m in by_mix if m.format == fmt.name]),
        ("approximate formats", by_mix),
    ]
    for basis, files in tiers:
        if files:
            worst = max(files, key=lambda m: m.excess)
            return WeightSpread(format=fmt.name, family=family, excess=max(0.0, worst.excess), basis=basis,
                                worst=worst)
    return None


def _sized_by_mix(fmt: QuantFormat, family: str) -> bool:
    """The family is sized approximately (neither a recipe nor a checked mix): is_approximate by family."""
    return fmt.approximate and family not in fmt.recipes and family not in fmt.checked_families


def widened(band: float, spread: WeightSpread | None) -> float:
    """The error band with the format's measured excess compounded onto the weights' share."""
    if spread is None or spread.excess <= 0:
        return band
    if isinstance(band, ErrorBand):
        return ErrorBand(weights=(1 + band.weights) * (1 + spread.excess) - 1, kv_cache=band.kv_cache,
                         buffers=band.buffers)
    return (1 + band) * (1 + spread.excess) - 1  # a single band: applied to every component alike
