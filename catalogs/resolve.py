"""Turn what the user typed into a ModelSpec: a bundled name, a local config.json / directory /
.gguf file, or a Hugging Face id (through the Hub, its cache, then the bundled catalog)."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from fitprobe.errors import MODEL_UNREADABLE, RETRY_LATER, ModelError, UsageError, message_of
from fitprobe.estimator.config import MAX_CONFIG_BYTES, SpecError, documented_yarn, parse_config_bytes, spec_from_config
from fitprobe.estimator.fields import replace
from fitprobe.estimator.quant import QuantFormat, WeightBytes, weight_bytes
from fitprobe.estimator.message import msg
from fitprobe.estimator.spec import ModelSpec

from .models import ModelEntry, find_model, find_ollama_tag, find_unmodelled, suggest_models
from .quants import find_quant, quant_table


class ResolveError(ModelError):
    """The model cannot be resolved: its kind says why (not found, unreadable, retry later)."""


@dataclass
class ResolvedModel:
    spec: ModelSpec
    source: str
    entry: ModelEntry | None = None
    known_weights: dict[str, tuple[WeightBytes, str]] = field(default_factory=dict)
    requested_quant: str | None = None
    gguf_repo: str | None = None
    notes: list[str] = field(default_factory=list)
    extra_formats: list[QuantFormat] = field(default_factory=list)  # e.g. a local GGUF's own file type


def _spec(config: dict, name: str, hf_id: str | None, where: str = "config.json") -> ModelSpec:
    try:
        return spec_from_config(config, name=name, hf_id=hf_id, where=where)
    except SpecError as exc:
        raise ResolveError(msg("%(name)s: %(exc)s", name=name, exc=exc), MODEL_UNREADABLE) from exc
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ArithmeticError) as exc:
        # validate_config should have named the field; say which file it was rather than crash
        raise ResolveError(msg("%(where)s cannot be sized (%(error_type)s: %(exc)s)",
                               where=where, error_type=type(exc).__name__, exc=exc), MODEL_UNREADABLE) from exc


def _default_notes(spec: ModelSpec) -> list[str]:
    if not spec.defaults_used:
        return []
    return [f"config.json omits {', '.join(spec.defaults_used)}: the {spec.architecture} defaults of transformers apply"]


def _read_config(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ResolveError(msg("cannot read %(path)s: %(reason)s", path=path, reason=exc.strerror), MODEL_UNREADABLE) from exc
    try:
        return parse_config_bytes(raw, str(path))
    except SpecError as exc:
        raise ResolveError(message_of(exc), MODEL_UNREADABLE) from exc


def scaled(w: WeightBytes, total: int) -> WeightBytes:
    """Formula weights rescaled to a known real total, keeping the per-layer shape for offload."""
    f = total / max(1, w.total)
    return replace(w, total=total, token_embd=int(w.token_embd * f), output=int(w.output * f),
        per_layer=[int(x * f) for x in w.per_layer], experts_per_layer=[int(x * f) for x in w.experts_per_layer])


def text_weights_from_checkpoint(spec: ModelSpec, fmt: QuantFormat, checkpoint_bytes: int) -> WeightBytes:
    """The language model's weights from a checkpoint's exact size: the vision tower (counted apart,
    added back by engines that load it) and MTP layers (not loaded without speculative decoding, e.g.
    vLLM's DeepSeek/GLM loaders skip layers past num_hidden_layers) come off before the rescale."""
    w = weight_bytes(spec, fmt, quant_table())
    return scaled(w, max(1, checkpoint_bytes - w.vision - w.mtp))


def resolve(text: str, *, token: str | None = None, revision: str | None = None, lookup=None) -> ResolvedModel:
    """Resolve MODEL; raises ResolveError with a one-line message (and close-name suggestions).
    `lookup` (catalogs.hub.Lookup) bounds and counts the Hub requests an org/name id makes."""
    raw = text.strip()
    if not raw:
        raise ResolveError(msg("empty model name"))
    if len(raw) > 4096 or "\0" in raw:
        raise ResolveError(msg("'%(raw)s...' is not a model name, path or Hub id", raw=raw[:60]))
    try:
        return _resolve(raw, token=token, revision=revision, lookup=lookup)
    except OSError as exc:  # a path the OS refuses to look at (ENAMETOOLONG, ELOOP, EACCES on a parent)
        raise ResolveError(msg("cannot look at '%(raw)s': %(reason)s", raw=raw[:80], reason=exc.strerror)) from None


def _resolve(raw: str, *, token: str | None, revision: str | None, lookup) -> ResolvedModel:
    path = Path(os.path.expanduser(raw))
    if path.suffix.lower() == ".gguf" or (path.exists() and path.is_file() and path.suffix.lower() == ".gguf"):
        return _from_gguf(path)
    if path.is_dir():
        cfg = path / "config.json"
        if not cfg.exists():
            raise ResolveError(msg("%(path)s has no config.json", path=path))
        return ResolvedModel(spec=_spec(_read_config(cfg), path.name, None, str(cfg)), source=f"local {cfg}")
    if path.suffix.lower() == ".json":
        if not path.exists():
            raise ResolveError(msg("%(path)s does not exist", path=path))
        return ResolvedModel(spec=_spec(_read_config(path), path.parent.name or path.stem, None, str(path)),
                             source=f"local {path}")
    tagged = find_ollama_tag(raw) if ":" in raw and "/" not in raw else None
    if tagged is not None:
        return _from_entry(tagged[0], tagged[1], source="bundled catalog (Ollama tag)")
    base, _, quant = raw.partition(":")
    # an org/name id never resolves to the catalog here (only when the Hub fails): indexing all of it
    # by Hub id would cost more than the lookup
    entry = find_model(base.split("@")[0]) if "/" not in base else None
    if entry is not None:
        if revision is not None or "@" in base:
            raise UsageError(msg("--revision/@ applies to Hugging Face ids: '%(name)s' is a bundled catalog name (its "
                                 "Hub id is %(hf_id)s)", name=entry.name, hf_id=entry.hf_id) if entry.hf_id else
                             msg("--revision/@ applies to Hugging Face ids: '%(name)s' is a bundled catalog name",
                                 name=entry.name))
        return _from_entry(entry, quant or None)  # a catalog name: offline by design
    # An org/name id asks the Hub first (exact sizes), then its cache, then the bundled snapshot.
    if re.fullmatch(r"[\w.-]+/[\w.-]+(@[^:\s]+)?(:[\w.-]+)?", raw) or raw.lower().startswith(("http://", "https://", "hf.co/", "huggingface.co/")):
        return _from_hub(raw, token=token, revision=revision, lookup=lookup)
    _fail_if_unmodelled(base)
    hint = suggest_models(raw)
    if hint:
        raise ResolveError(msg("unknown model '%(raw)s' (not in the bundled catalog, not a file, not an org/name Hub "
                               "id); did you mean: %(hint)s? (fitprobe list models)", raw=raw, hint=", ".join(hint)))
    raise ResolveError(msg("unknown model '%(raw)s' (not in the bundled catalog, not a file, not an org/name Hub id) "
                           "(fitprobe list models)", raw=raw))


def _fail_if_unmodelled(name: str) -> None:
    """A known model whose architecture is not modelled yet: the parser's fail-closed message names
    what is missing (exit 3), where 'unknown model' would suggest a same-family stand-in."""
    known = find_unmodelled(name)
    if known is not None:
        _spec(known.config, known.display_name, known.hf_id)
        raise ResolveError(f"{known.display_name}: listed as not modelled, yet its config sizes "
                           "(move it into the catalog)", MODEL_UNREADABLE)


def _from_entry(entry: ModelEntry, quant: str | None, *, source: str = "bundled catalog") -> ResolvedModel:
    if not entry.config:
        raise ResolveError(msg("%(name)s: bundled entry has no config.json", name=entry.name))
    spec = _spec(entry.config, entry.name, entry.hf_id)
    if entry.long_context:
        spec = documented_yarn(spec, entry.long_context["rope_scaling"], entry.long_context["source"])
    return ResolvedModel(spec=spec, source=source, entry=entry, requested_quant=quant, gguf_repo=entry.gguf_repo,
                         notes=_default_notes(spec))


def _from_hub(raw: str, *, token: str | None, revision: str | None, lookup=None) -> ResolvedModel:
    from . import hub  # heavy: huggingface_hub is imported only for Hub lookups

    try:
        ref = hub.parse_model_ref(raw)
    except hub.BadModelRef as exc:
        raise ResolveError(message_of(exc)) from exc
    if revision:
        ref = replace(ref, revision=revision)
    lookup = lookup or hub.Lookup()
    lookup.start()  # one deadline for every request of this resolution (base model, GGUF repos too)
    try:
        model = hub.fetch_model(ref, token=token, lookup=lookup)
        if model.config is None and model.params_json is None and model.gguf_files:
            return _gguf_repo(model, ref.quant, token, lookup)
        resolved = _hub_model(model, ref.quant)
        if ref.quant and _fmt_name(ref.quant) not in resolved.known_weights and not model.gguf_files:
            _attach_gguf_quant(resolved, model.repo_id, ref.quant, token, lookup)
        return resolved
    except hub.HubUnavailable as exc:
        entry = find_model(ref.repo_id)
        if entry is None:
            _fail_if_unmodelled(ref.repo_id)
            raise ResolveError(msg("%(exc)s, and '%(repo_id)s' is not in the bundled catalog: retry later",
                                   exc=exc, repo_id=ref.repo_id),
                               RETRY_LATER) from exc
        resolved = _from_entry(entry, ref.quant, source="bundled catalog (Hub unreachable)")
        resolved.notes.append(msg("Hub not reachable (%(error)s); used the bundled snapshot of %(hf_id)s",
                                  error=message_of(exc), hf_id=entry.hf_id))
        return resolved
    except hub.HubError as exc:
        raise ResolveError(message_of(exc), exc.kind) from exc


def _gguf_repo(model, quant: str | None, token: str | None, lookup) -> ResolvedModel:
    """A GGUF-only repo (unsloth/…-GGUF:Q4_K_M): the architecture comes from its base model's
    config.json (the Hub's base_model tag, else the bundled catalog by name); sizes are real."""
    from . import hub

    base_entry = find_model(re.sub(r"[-_.]gguf$", "", model.repo_id.split("/")[-1], flags=re.I))
    resolved = None
    for base in model.base_models:
        base_model = hub.fetch_model(base, token=token, lookup=lookup)
        if base_model.config or base_model.params_json:
            resolved = _hub_model(base_model, quant)
            resolved.notes.append(msg("architecture from base model %(base)s (config.json)", base=base))
            break
    if resolved is None and base_entry is not None:
        resolved = _from_entry(base_entry, quant, source="bundled catalog")
        resolved.notes.append(msg("architecture from the bundled snapshot of %(hf_id)s", hf_id=base_entry.hf_id))
    if resolved is None:
        raise ResolveError(msg("%(repo_id)s holds only GGUF files and names no base model with a config.json: pass "
                               "the base model id or a local .gguf", repo_id=model.repo_id))
    resolved.source = f"Hugging Face Hub ({model.repo_id})"
    _apply_gguf_sizes(resolved, model)
    if quant and _fmt_name(quant) not in resolved.known_weights:
        have = ", ".join(g.quant for g in model.gguf_files)
        raise ResolveError(msg("%(repo_id)s has no %(quant)s GGUF (it has: %(have)s)",
                               repo_id=model.repo_id, quant=quant, have=have))
    return resolved


def _fmt_name(quant: str) -> str:
    fmt = quant_table().find(quant)
    return fmt.name if fmt else quant


def _apply_gguf_sizes(resolved: ResolvedModel, model) -> None:
    table = quant_table()
    for gg in model.gguf_files:
        fmt = table.find(gg.quant)
        if fmt is None or not gg.size_bytes or not gg.complete:
            continue
        w = weight_bytes(resolved.spec, fmt, table)
        resolved.known_weights[fmt.name] = (scaled(w, gg.size_bytes - w.file_only),
                                            msg("real file size (%(repo)s)", repo=model.repo_id))
        resolved.gguf_repo = model.repo_id


def _attach_gguf_quant(resolved: ResolvedModel, base_repo: str, quant: str, token: str | None, lookup) -> None:
    """A GGUF quant asked of a repo with no GGUF files: size it from the matching GGUF repo."""
    from . import hub

    fmt = quant_table().find(quant)
    if fmt is None or fmt.kind != "gguf":
        return
    try:
        candidates = hub.find_gguf_repos(base_repo, token=token, limit=10, lookup=lookup)
        for cand in candidates:
            listing = hub.fetch_model(cand.repo_id, token=token, lookup=lookup)
            if any(_fmt_name(g.quant) == fmt.name for g in listing.gguf_files):
                _apply_gguf_sizes(resolved, listing)
                resolved.notes.append(msg("%(quant)s size from %(repo)s (GGUF repo of %(base)s)", quant=quant,
                                          repo=cand.repo_id, base=base_repo))
                return
        resolved.notes.append(msg("no GGUF repo with %(quant)s found for %(base)s: %(quant)s sized by formula",
                                  quant=quant, base=base_repo))
    except hub.HubError as exc:
        resolved.notes.append(msg("GGUF repos for %(base)s not searched (%(error)s): %(quant)s sized by formula",
                                  base=base_repo, error=message_of(exc), quant=quant))


def _hub_model(model, quant: str | None) -> ResolvedModel:
    source = "Hugging Face Hub" if model.source == "hub" else "Hugging Face cache (offline)"
    config = model.config
    if config is None and model.params_json:
        config = params_json_to_config(model.params_json)
    if config is None:
        raise ResolveError(msg("%(repo_id)s has no config.json or params.json to size from", repo_id=model.repo_id))
    where = f"{model.config_file or 'params.json'} of {model.repo_id}"
    spec = _spec(config, model.repo_id.split("/")[-1], model.repo_id, where)
    resolved = ResolvedModel(spec=spec, source=source, requested_quant=quant,
                             notes=list(model.notes) + _default_notes(spec))
    if model.safetensors_params:
        exact = sum(n * _dtype_bytes(dt) for dt, n in model.safetensors_params.items())
        key = _prequant_format(spec) or "BF16"
        resolved.known_weights[key] = (text_weights_from_checkpoint(spec, find_quant(key), exact),
                                       msg("exact from checkpoint"))
    _apply_gguf_sizes(resolved, model)
    return resolved


_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1,
                "I16": 2, "I32": 4, "I64": 8, "F8_E8M0": 1, "BOOL": 1}


def _dtype_bytes(dtype: str) -> float:
    return _DTYPE_BYTES.get(dtype.upper(), 2)


def _prequant_format(spec: ModelSpec) -> str | None:
    q = spec.prequant
    if q is None:
        return None
    method = q.method
    if method == "fp8" or (method == "compressed-tensors" and q.bits == 8):
        return "FP8"
    if method in ("awq",):
        return "AWQ"
    if method in ("gptq", "compressed-tensors"):
        return "GPTQ"
    if method == "mxfp4":
        return "BF16"  # native: MXFP4 experts, 16-bit elsewhere (see quant._checkpoint_bytes)
    if method in ("modelopt",) and q.fmt and "fp4" in q.fmt.lower():
        return "NVFP4"
    if method == "bitsandbytes":
        return "NF4"
    return None


def native_format(spec: ModelSpec) -> str:
    """The checkpoint's own format: BF16, or what its quantization_config declares."""
    return _prequant_format(spec) or "BF16"


def params_json_to_config(p: dict) -> dict:
    """Mistral's native params.json named in HF config terms (mistral-inference ModelArgs)."""
    mapping = {"dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
               "n_kv_heads": "num_key_value_heads", "head_dim": "head_dim", "hidden_dim": "intermediate_size",
               "vocab_size": "vocab_size", "sliding_window": "sliding_window"}
    cfg = {new: p[old] for old, new in mapping.items() if p.get(old) is not None}
    if p.get("moe") is not None and not isinstance(p["moe"], dict):
        raise ResolveError(msg("params.json field moe must be an object"), MODEL_UNREADABLE)
    cfg["model_type"] = "mixtral" if p.get("moe") else "mistral"
    cfg["max_position_embeddings"] = p.get("max_seq_len") or p.get("max_position_embeddings") or 32768
    if p.get("moe"):
        cfg["num_local_experts"] = p["moe"].get("num_experts")
        cfg["num_experts_per_tok"] = p["moe"].get("num_experts_per_tok")
    cfg["tie_word_embeddings"] = bool(p.get("tied_embeddings", False))
    return cfg


def _from_gguf(path: Path) -> ResolvedModel:
    if not path.exists():
        raise ResolveError(msg("%(path)s does not exist", path=path))
    from .gguf_file import GgufFileError, gguf_to_config, read_gguf

    try:
        info = read_gguf(path)
        config = gguf_to_config(info)
    except GgufFileError as exc:
        raise ResolveError(message_of(exc), MODEL_UNREADABLE) from exc
    spec = _spec(config, path.stem, None, f"{path} (GGUF metadata)")
    per_layer = [0] * spec.n_layers
    experts = [0] * spec.n_layers
    embd = output = 0
    for t in info.tensors:
        m = re.match(r"blk\.(\d+)\.", t.name)
        if t.name.startswith("token_embd"):
            embd += t.n_bytes
        elif m and int(m.group(1)) < spec.n_layers:
            per_layer[int(m.group(1))] += t.n_bytes
            if "_exps" in t.name:
                experts[int(m.group(1))] += t.n_bytes
        elif not m:
            output += t.n_bytes
    total = info.total_bytes
    w = WeightBytes(total=total, token_embd=embd, output=output, per_layer=per_layer, experts_per_layer=experts,
                    by_type=info.bytes_by_type())
    fmt = quant_table().find(info.file_type or "") if info.file_type else None
    resolved = ResolvedModel(spec=spec, source=f"local GGUF {path}")
    if fmt is None:
        fmt = QuantFormat(name=info.file_type or "GGUF", kind="gguf", ftype="Q8_0", label=f"GGUF {info.file_type or 'file'}",
                          source=f"tensor types read from {path.name}")
        resolved.extra_formats.append(fmt)
    resolved.requested_quant = fmt.name
    resolved.known_weights[fmt.name] = (w, msg("exact from GGUF header"))
    return resolved
