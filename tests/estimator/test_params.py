"""Every bundled model's parameter count, computed from its config, against the published size."""
import pytest

from fitprobe.catalogs.models import load_models
from fitprobe.estimator.config import spec_from_config
from fitprobe.estimator.tensors import param_counts

ENTRIES = load_models()


def test_catalog_is_large_enough():
    assert len(ENTRIES) >= 40


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_params_within_two_percent_of_published(entry):
    counts = param_counts(spec_from_config(entry.config, name=entry.name))
    # Publishers count either the language model alone (Qwen3.5, DeepSeek: no MTP, no vision) or the
    # whole checkpoint; the catalog's params_source says which. One of the two must match within 2 %.
    best = min(abs(counts.text - entry.published_params), abs(counts.total - entry.published_params))
    # A figure published rounded ('8B') only says the count lies within half a unit of it.
    allowed = max(0.02 * entry.published_params, (entry.published_params_rounding or 0) / 2)
    assert best <= allowed, (counts, entry.published_params)


@pytest.mark.parametrize("name,active,rel", [
    ("qwen3-30b-a3b", 3.3e9, 0.03), ("deepseek-v3", 37e9, 0.03), ("mixtral-8x7b-v0.1", 12.9e9, 0.01),
    ("qwen3-235b-a22b", 22e9, 0.02),
])
def test_active_params(spec_of, name, active, rel):
    assert param_counts(spec_of(name)).active == pytest.approx(active, rel=rel)


def test_gpt_oss_active_excluding_input_embedding(spec_of):
    # OpenAI's model card counts the unembedding but not the input embedding (5.13B active).
    spec = spec_of("gpt-oss-120b")
    p = param_counts(spec)
    assert p.active - spec.vocab_size * spec.hidden_size == pytest.approx(5.13e9, rel=0.01)
