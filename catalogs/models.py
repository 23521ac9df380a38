"""The bundled model catalog: real config.json snapshots, one JSON file per model, validated at load."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from fitprobe.catalogs.validated import CatalogValidationError, load_json_file
from fitprobe.estimator.fields import doc, record
from fitprobe.estimator.launch.refs import ModelRefs

MODELS_DIR = Path(__file__).parent / "data" / "models"
UNMODELLED_FILE = Path(__file__).parent / "data" / "unmodelled_models.json"


class CatalogError(ValueError):
    """A catalog file that does not validate, or a name that matches nothing."""


@record
class ModelEntry:
    name: str
    display_name: str
    hf_id: str
    aliases: list[str] = doc(default_factory=list)
    family: str
    license: str | None = None
    published_params: int = doc(gt=0)
    published_active_params: int | None = None
    published_params_rounding: int | None = doc(
        default=None, gt=0, description="the unit the publisher rounded published_params to ('8B': 1e9)")
    params_source: str
    config_source: str
    gguf_repo: str | None = None
    ollama: str | None = None
    refs: ModelRefs | None = doc(default=None, description="download references per format, each with source and date")
    provenance: str = doc(default="verbatim", description="verbatim config.json copy, or 'assembled' from cited dimensions")
    field_sources: dict[str, str] = doc(default_factory=dict, description="assembled entries: config key -> source")
    notes: str = ""
    long_context: dict | None = doc(
        default=None, description="YaRN the model card documents but config.json leaves off: "
                                  "{rope_scaling: {rope_type, factor, original_max_position_embeddings}, source}")
    config: dict
    params_json: dict | None = None


def _norm(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


@lru_cache(maxsize=None)
def _load_entry(path: Path) -> ModelEntry:
    try:
        entry = load_json_file(ModelEntry, path, what=f"bundled model file {path.name}")
    except CatalogValidationError as exc:
        raise CatalogError(str(exc)) from None
    if entry.name != path.stem:
        raise CatalogError(f"bundled model file {path.name} has name '{entry.name}'")
    return entry


@lru_cache(maxsize=1)
def load_models() -> tuple[ModelEntry, ...]:
    return tuple(_load_entry(path) for path in sorted(MODELS_DIR.glob("*.json")))


@lru_cache(maxsize=1)
def _index() -> dict[str, ModelEntry]:
    index: dict[str, ModelEntry] = {}
    for entry in load_models():
        for key in (entry.name, entry.hf_id, entry.hf_id.split("/")[-1], entry.display_name, *entry.aliases):
            index.setdefault(_norm(key), entry)
    return index


def find_model(name: str) -> ModelEntry | None:
    """A bundled model by catalog name, HF id (with or without org), display name or alias; a
    trailing size in parentheses, as calculator pages write it ("GLM-5 (744B)"), is ignored."""
    path = MODELS_DIR / f"{name.strip().lower()}.json"
    if "/" not in name and path.is_file():  # a catalog name: read that one file, not the whole catalog
        return _load_entry(path)
    hit = _index().get(_norm(name))
    if hit is None and name.rstrip().endswith(")"):
        hit = _index().get(_norm(re.sub(r"\s*\([^()]*\)\s*$", "", name)))
    return hit


@record
class UnmodelledModel:
    """A published model whose architecture fitprobe cannot size yet: kept so that its names fail
    closed naming what is missing, rather than 'unknown model' or a same-family stand-in."""
    name: str
    display_name: str
    hf_id: str
    aliases: list[str] = doc(default_factory=list)
    config_source: str
    notes: str
    config: dict


@record
class UnmodelledModels:
    about: str
    models: list[UnmodelledModel]


@lru_cache(maxsize=1)
def load_unmodelled() -> tuple[UnmodelledModel, ...]:
    try:
        return tuple(load_json_file(UnmodelledModels, UNMODELLED_FILE).models)
    except CatalogValidationError as exc:
        raise CatalogError(str(exc)) from None


@lru_cache(maxsize=1)
def _unmodelled_names() -> frozenset[str]:
    """Every name of the unmodelled list, read without validation: a miss (every unknown name, every
    unreachable Hub id) must not pay for loading the records."""
    raw = json.loads(UNMODELLED_FILE.read_bytes())
    return frozenset(_norm(k) for m in raw.get("models", []) if isinstance(m, dict)
                     for k in (m.get("name", ""), m.get("hf_id", ""), str(m.get("hf_id", "")).split("/")[-1],
                               m.get("display_name", ""), *m.get("aliases", [])) if isinstance(k, str) and k)


def find_unmodelled(name: str) -> UnmodelledModel | None:
    """A known-but-unmodelled model by name, Hub id (with or without org), display name or alias."""
    key = _norm(re.sub(r"\s*\([^()]*\)\s*$", "", name))
    if key not in _unmodelled_names():
        return None
    for m in load_unmodelled():
        if key in {_norm(k) for k in (m.name, m.hf_id, m.hf_id.split("/")[-1], m.display_name, *m.aliases)}:
            return m
    return None


@lru_cache(maxsize=1)
def _ollama_index() -> dict[str, tuple[ModelEntry, str | None]]:
    index: dict[str, tuple[ModelEntry, str | None]] = {}
    for entry in load_models():
        for quant, ref in (entry.refs.ollama.items() if entry.refs else ()):
            index.setdefault(ref.repo.lower(), (entry, quant))
        if entry.ollama:
            index.setdefault(entry.ollama.lower(), (entry, None))
    return index


def find_ollama_tag(tag: str) -> tuple[ModelEntry, str | None] | None:
    """A bundled model by its Ollama library tag (`llama3.3:70b`), with the quant that tag holds if known."""
    return _ollama_index().get(tag.strip().lower())


def suggest_models(name: str, n: int = 3) -> list[str]:
    names = {e.name: e for e in load_models()}
    keys = {_norm(k): e.name for e in load_models() for k in (e.name, e.hf_id, e.display_name, *e.aliases)}
    import difflib  # only for a name that matches nothing

    hits = difflib.get_close_matches(_norm(name), list(keys), n=n * 3, cutoff=0.5)
    out: list[str] = []
    for hit in hits:
        if keys[hit] not in out:
            out.append(keys[hit])
    if not out:
        words = [w for w in name.lower().replace("/", "-").split("-") if len(w) > 2]
        out = [n_ for n_ in names if any(w in n_ for w in words)]
    return out[:n]
