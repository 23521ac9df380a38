"""Bundled entries say where their config came from: verbatim copies, or assembled entries whose
every config key has a cited source; download references carry a source and the date seen."""
import re

import pytest

from fitprobe.catalogs.models import find_model, load_models
from fitprobe.catalogs.resolve import resolve

ENTRIES = load_models()
ASSEMBLED = [e for e in ENTRIES if e.provenance == "assembled"]


def _keys(config: dict, prefix: str = "") -> set[str]:
    out = set()
    for key, value in config.items():
        if isinstance(value, dict) and key in ("text_config",):
            out |= _keys(value, f"{key}.")
        else:
            out.add(prefix + key)
    return out


def test_provenance_is_one_of_two_kinds():
    assert {e.provenance for e in ENTRIES} <= {"verbatim", "assembled"}
    assert len(ASSEMBLED) >= 8


@pytest.mark.parametrize("entry", ASSEMBLED, ids=[e.name for e in ASSEMBLED])
def test_assembled_entries_cite_every_config_key(entry):
    missing = _keys(entry.config) - set(entry.field_sources)
    assert not missing, missing
    assert "assembled" in entry.config_source and entry.notes.startswith("ASSEMBLED")


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.refs], ids=[e.name for e in ENTRIES if e.refs])
def test_download_references_have_source_and_date(entry):
    refs = [*entry.refs.gguf, *entry.refs.ollama.values(), *entry.refs.mlx.values(), *entry.refs.checkpoints.values()]
    assert refs
    for ref in refs:
        assert ref.source and re.fullmatch(r"\d{4}-\d{2}-\d{2}", ref.seen)
    assert all(r.quants for r in entry.refs.gguf)


def test_gemma3_4b_sizes_with_the_transformers_default_heads():
    # google/gemma-3-4b-it's text_config omits num_attention_heads: Gemma3TextConfig's default is 8
    r = resolve("gemma-3-4b-it")
    assert "num_attention_heads" not in r.entry.config["text_config"]
    assert (r.spec.n_heads, r.spec.n_kv_heads) == (8, 4)
    assert any("defaults of transformers" in n for n in r.notes)


@pytest.mark.parametrize("typed,name", [
    ("GLM-4.5 (355B-A32B)", "glm-4.5"), ("zai-org/GLM-4.5", "glm-4.5"), ("GLM-4 32B-0414", "glm-4-32b-0414"),
    ("baidu/ERNIE-4.5-300B-A47B-PT", "ernie-4.5-300b-a47b-pt"), ("google/gemma-3-12b-it", "gemma-3-12b-it"),
    # display forms of the seed calculator pages
    ("ERNIE 4.5 300B-A47B (文心)", "ernie-4.5-300b-a47b-pt"), ("Llama 4 Scout 17B-16E (109B)", "llama-4-scout-17b-16e-instruct"),
    ("DeepSeek V3.2 (685B)", "deepseek-v3.2"), ("Gemma 3 12B IT", "gemma-3-12b-it"), ("QwQ 32B Reasoning", "qwq-32b"),
    ("Qwen3 Coder 480B-A35B", "qwen3-coder-480b-a35b-instruct"), ("GLM-5.3 (753B)", "glm-5.3"),
])
def test_seed_and_hub_names_find_the_bundled_entry(typed, name):
    # org/name ids go to the Hub first in `resolve`; the bundled entry is what they fall back to offline
    assert find_model(typed).name == name
