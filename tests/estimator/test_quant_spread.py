"""Formats sized approximately carry their measured shortfall (catalogs/data/quant_spread.json) into the band."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fitprobe.app import catalog_hardware, error_band
from fitprobe.catalogs.models import find_model
from fitprobe.catalogs.quants import quant_table
from fitprobe.estimator.config import spec_from_config
from fitprobe.estimator.fields import replace
from fitprobe.estimator.hardware import Device, Hardware
from fitprobe.estimator.plan import Sizer
from fitprobe.estimator.quant import MeasuredFile, is_approximate, recipe_family
from fitprobe.estimator.settings import RunSettings
from fitprobe.estimator.spread import WeightSpread, measure, weight_spread, widened
from fitprobe.estimator.verdict import band_for, judge

GIB = 1 << 30
TABLE = quant_table()
RANK = {"fits": 0, "tight": 1, "exceeds": 2}
NAMES = ["deepseek-r1", "qwen3-30b-a3b", "llama-3.1-8b-instruct", "qwen3.6-35b-a3b", "llama-4-scout-17b-16e-instruct"]
SPECS = {n: spec_from_config(find_model(n).config, name=n) for n in NAMES}
UD = [f.name for f in TABLE.formats if f.approximate]


def gguf_band():
    """The band a llama.cpp plan of an exactly sized format is judged with."""
    return band_for(error_band(), "llama.cpp")


def published(fmt: str, model: str) -> MeasuredFile:
    return next(m for m in TABLE.measured if m.format == fmt and m.model == model)


def test_stored_spread_is_what_the_formula_gives_today(spec_of):
    """quant_spread.json is derived data: rerun scripts/quant_spread.py --write when this fails."""
    specs = {m.model: spec_of(m.model) for m in TABLE.measured}
    fresh = {(m.format, m.model): m for m in measure(TABLE, specs | {p.model: spec_of(p.model) for f in TABLE.formats
                                                                      for p in f.published})}
    stored = {(m.format, m.model): m for m in TABLE.measured}
    assert stored.keys() == fresh.keys()
    for key, m in fresh.items():
        assert stored[key].estimate_gib == pytest.approx(m.estimate_gib, abs=0.01), key
        assert stored[key].published_gib == m.published_gib and stored[key].family == m.family, key


def test_deepseek_ud_iq1_s_takes_the_published_files_excess():
    spec = SPECS["deepseek-r1"]
    spread = weight_spread(TABLE.find("UD-IQ1_S"), spec, TABLE)
    file = published("UD-IQ1_S", "deepseek-v3")  # 186 GB on unsloth's DeepSeek-V3-0324 model card
    assert spread.basis == "family" and spread.worst is file
    assert spread.excess == pytest.approx(file.published_gib / file.estimate_gib - 1) and spread.excess > 0.3
    assert "39%" in spread.text() and "latent-attention MoE" in spread.text()


def test_recipe_and_checked_families_get_no_spread():
    assert weight_spread(TABLE.find("UD-Q2_K_XL"), SPECS["deepseek-r1"], TABLE) is None  # mla_moe recipe
    assert weight_spread(TABLE.find("UD-Q4_K_XL"), SPECS["llama-3.1-8b-instruct"], TABLE) is None  # checked dense
    assert weight_spread(TABLE.find("Q4_K_M"), SPECS["deepseek-r1"], TABLE) is None


def test_a_family_without_a_file_takes_the_formats_worst_sized_the_same_way():
    spread = weight_spread(TABLE.find("UD-IQ1_M"), SPECS["qwen3-30b-a3b"], TABLE)  # only a DeepSeek file exists
    assert spread.basis == "format" and spread.worst is published("UD-IQ1_M", "deepseek-v3")
    assert "no published file of a MoE model" in spread.text()


def test_a_format_with_no_file_sized_by_its_mix_takes_the_worst_of_any_approximate_format():
    by_mix = [m for m in TABLE.measured if m.family not in TABLE.find(m.format).recipes
              and m.family not in TABLE.find(m.format).checked_families]
    worst = max(by_mix, key=lambda m: m.excess)
    # UD-Q2_K_XL's files are of recipe families (they measure the recipe, not the Q2_K mix a dense model gets)
    for fmt, model in (("UD-Q6_K_XL", "llama-3.1-8b-instruct"), ("UD-Q2_K_XL", "llama-3.1-8b-instruct")):
        spread = weight_spread(TABLE.find(fmt), SPECS[model], TABLE)
        assert spread.basis == "approximate formats" and spread.worst is worst, fmt


@pytest.mark.parametrize("model", NAMES)
@pytest.mark.parametrize("fmt", UD)
def test_every_approximate_sizing_has_a_spread(model, fmt):
    spec, f = SPECS[model], TABLE.find(fmt)
    assert (weight_spread(f, spec, TABLE) is not None) == is_approximate(f, spec)


def _sized(model: str, gpu: str, count: int, quant: str, ctx: int = 8192):
    hw = catalog_hardware(gpu, count, usable_fraction=0.95, ram_bytes=None)
    sizer = Sizer(SPECS[model], TABLE, hw, error_band=error_band())
    fmt = TABLE.find(quant)
    mem, verdict, source = sizer.size(fmt, RunSettings(quant=quant, context=ctx, engine="llama.cpp"))
    return sizer, fmt, hw, mem, verdict, source


def test_deepseek_ud_iq1_s_on_two_h200_covers_the_published_file():
    """The 186 GB file (173.23 GiB) against the 124.6 GiB formula: the verdict's band must cover it."""
    sizer, fmt, hw, mem, verdict, source = _sized("deepseek-r1", "H200", 2, "UD-IQ1_S")
    assert source == "approximate formula"
    file = published("UD-IQ1_S", "deepseek-v3")
    limiting = next(d for d in mem.per_device if d.name == verdict.limiting)
    real_share = limiting.weights_bytes * file.published_gib / file.estimate_gib  # the file split as the formula is
    assert limiting.weights_bytes + verdict.uncertainty_bytes >= real_share
    plain = judge(mem, hw, error_band=gguf_band())
    assert verdict.uncertainty_bytes > plain.uncertainty_bytes + 25 * GIB
    if verdict.status == "fits":  # what the rule gives here: 71 GiB free per H200, more than the band
        for d in mem.per_device:
            real = d.total_bytes + d.weights_bytes * (file.published_gib / file.estimate_gib - 1)
            assert real <= d.usable_bytes


def test_deepseek_ud_iq1_s_on_two_h100_is_no_longer_a_fit():
    """Two H100s hold the formula's 125 GiB but not the published 173 GiB: the plain band said 'fits'."""
    sizer, fmt, hw, mem, verdict, _ = _sized("deepseek-r1", "H100", 2, "UD-IQ1_S")
    assert judge(mem, hw, error_band=gguf_band()).status == "fits"
    file = published("UD-IQ1_S", "deepseek-v3")
    assert file.published_gib * GIB > sum(d.usable_bytes for d in mem.per_device)  # the real file would not fit
    assert verdict.status == "tight"


def test_a_known_real_size_needs_no_spread(spec_of):
    sizer, fmt, hw, mem, _, _ = _sized("deepseek-r1", "H200", 2, "UD-IQ1_S")
    w, _ = sizer.weights(fmt)
    known = Sizer(SPECS["deepseek-r1"], TABLE, hw, error_band=error_band(),
                  known_weights={fmt.name: (w, "real file size (unsloth/DeepSeek-R1-GGUF)")})
    assert known.spread(fmt) is None and known.band(fmt, "llama.cpp") == gguf_band()


spreads = st.floats(min_value=0, max_value=2)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(UD), st.floats(4, 400), st.integers(1, 4), st.integers(512, 131_072),
       spreads)
def test_an_approximate_verdict_never_claims_more_margin_than_an_exact_one(model, quant, gib, count, ctx, excess):
    """Same bytes, same hardware: the approximate format's verdict is never better than the exact one's,
    for the real spread of the format and for any other measured excess."""
    hw = Hardware(devices=[Device(name="gpu", memory_bytes=int(gib * GIB))] * count, system_ram_bytes=256 * GIB)
    sizer = Sizer(SPECS[model], TABLE, hw, error_band=error_band())
    fmt = TABLE.find(quant)
    mem, verdict, _ = sizer.size(fmt, RunSettings(quant=quant, context=ctx, engine="llama.cpp"))
    exact = judge(mem, hw, error_band=gguf_band())
    assert verdict.margin_bytes == exact.margin_bytes
    assert verdict.uncertainty_bytes >= exact.uncertainty_bytes
    assert RANK[verdict.status] >= RANK[exact.status]
    worst = MeasuredFile(format=quant, model=model, family=recipe_family(SPECS[model]), published_gib=1 + excess,
                         estimate_gib=1, source="hypothesis")
    spread = WeightSpread(format=quant, family=worst.family, excess=excess, basis="family", worst=worst)
    for band in (gguf_band(), error_band(), 0.05):
        wide = judge(mem, hw, error_band=widened(band, spread))
        plain = judge(mem, hw, error_band=band)
        assert wide.uncertainty_bytes >= plain.uncertainty_bytes and RANK[wide.status] >= RANK[plain.status]


def test_widened_band_compounds_onto_the_weights_only():
    band = gguf_band()
    worst = replace(TABLE.measured[0], published_gib=1.5, estimate_gib=1.0)
    wide = widened(band, WeightSpread(format="x", family="moe", excess=0.5, basis="family", worst=worst))
    assert wide.weights == pytest.approx((1 + band.weights) * 1.5 - 1)
    assert (wide.kv_cache, wide.buffers) == (band.kv_cache, band.buffers)
