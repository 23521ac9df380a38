"""Hugging Face Hub lookups: model reference -> config, exact weight sizes, GGUF files.

Talks to the Hub only through `huggingface_hub` (imported lazily: CLI start-up stays fast).
Endpoint, cache folder and offline mode are read from the environment at call time and
passed explicitly, because `huggingface_hub.constants` freezes them at import time.
Nothing here downloads weights: sizes come from the model-info answer, the tree listing
and safetensors header range reads.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

from fitprobe.estimator.fields import doc, record

from .hub_files import GgufQuantFile, group_gguf_files

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT = 10.0

# Side files that carry the quantization config when config.json does not; the quant_method
# each implies is the one vLLM reads them as (GPTQ: quantize_config.json, AWQ: quant_config.json,
# NVIDIA ModelOpt: hf_quant_config.json).
_QUANT_SIDE_FILES = {
    "hf_quant_config.json": "modelopt",
    "quantize_config.json": "gptq",
    "quant_config.json": "awq",
}


# ---------------------------------------------------------------- errors


class HubError(Exception):
    """Base of every Hub failure; the message is one line and never holds a token."""

    def __init__(self, message: str, repo_id: str | None = None, token: str | None = None):
        if token:
            message = message.replace(token, "***")
        super().__init__(message)
        self.repo_id = repo_id


class BadModelRef(HubError, ValueError):
    """The text is not a Hub model reference."""


class HubAuthError(HubError):
    """401/403: gated repo whose licence is not accepted, missing or rejected token."""


class HubNotFound(HubError):
    """The repo or the revision does not exist (or is private and invisible to us)."""


class HubMalformedFile(HubError):
    """A JSON file from the repo (config.json, params.json...) does not parse."""


class HubUnavailable(HubError):
    """No Hub (offline, no network, Hub error) and nothing usable in the cache.

    The caller falls back to the bundled catalog and says so.
    """


class HubTimeout(HubUnavailable):
    """The Hub did not answer within the timeout."""


# ---------------------------------------------------------------- model references


@record
class ModelRef:
    repo_id: str
    revision: str | None = None
    quant: str | None = None


_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_REF = re.compile(rf"^(?P<repo>{_NAME}/{_NAME})(?:@(?P<rev>[^:\s@]+))?(?::(?P<quant>[A-Za-z0-9._-]+))?$")
_URL = re.compile(r"^(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/(?P<path>.*)$", re.IGNORECASE)


def parse_model_ref(text: str) -> ModelRef:
    """Parse `org/name`, `org/name:Q4_K_M`, `org/name@rev`, or a huggingface.co URL."""
    raw = (text or "").strip()
    m = _URL.match(raw)
    if m:
        parts = [p for p in m.group("path").split("?")[0].split("#")[0].split("/") if p]
        if parts and parts[0] in ("datasets", "spaces", "buckets"):
            raise BadModelRef(f"'{raw}' is a {parts[0][:-1]} page, not a model repo")
        if len(parts) < 2:
            raise BadModelRef(f"'{raw}' does not name a model repo (expected https://huggingface.co/org/name)")
        raw_ref = f"{parts[0]}/{parts[1]}"
        if len(parts) >= 4 and parts[2] in ("tree", "blob", "resolve"):
            raw_ref += f"@{unquote(parts[3])}"
        raw = raw_ref
    m = _REF.match(raw)
    if not m or "--" in m.group("repo") or ".." in m.group("repo") or m.group("repo").endswith((".", "-")):
        raise BadModelRef(
            f"'{text}' is not a Hugging Face model id (expected org/name, org/name:QUANT, org/name@revision or a URL)"
        )
    return ModelRef(repo_id=m.group("repo"), revision=m.group("rev"), quant=m.group("quant") and m.group("quant").upper())


# ---------------------------------------------------------------- result


@record
class HubModel:
    """What the Hub (or its cache) says about one model repo at one revision."""

    repo_id: str
    revision: str
    sha: str | None = None
    config: dict[str, Any] | None = None
    config_file: str | None = None
    params_json: dict[str, Any] | None = None
    quantization_config: dict[str, Any] | None = None
    safetensors_params: dict[str, int] = doc(default_factory=dict)
    safetensors_source: Literal["model-info", "headers"] | None = None
    gguf_files: list[GgufQuantFile] = doc(default_factory=list)
    mmproj_files: list[GgufQuantFile] = doc(default_factory=list)
    gated: bool = False
    base_models: list[str] = doc(default_factory=list, description="from the Hub's base_model:* tags")
    source: Literal["hub", "cache"] = "hub"
    notes: list[str] = doc(default_factory=list)


@record
class GgufRepoCandidate:
    repo_id: str
    downloads: int | None = None
    likes: int | None = None
    match: Literal["base_model", "name"]


# ---------------------------------------------------------------- environment


def _endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE")


def _offline() -> bool:
    from huggingface_hub import constants

    return _truthy("HF_HUB_OFFLINE") or _truthy("TRANSFORMERS_OFFLINE") or constants.HF_HUB_OFFLINE


def _cache_dir() -> Path:
    """The hub cache folder with the same precedence huggingface_hub uses, read now."""
    env = os.environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HUGGINGFACE_HUB_CACHE"):
        return Path(env["HUGGINGFACE_HUB_CACHE"]).expanduser()
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


# ---------------------------------------------------------------- error translation


def _translate(exc: BaseException, repo_id: str, revision: str | None, token: str | None) -> HubError | None:
    """Map a huggingface_hub / HTTP-client exception to one of ours (None: not a Hub failure)."""
    from huggingface_hub import errors

    page = f"{_endpoint()}/{repo_id}"
    how = "pass a token with HF_TOKEN=... or --token"
    if isinstance(exc, errors.GatedRepoError):
        if token:
            msg = f"{repo_id} is gated and this token has no access: accept its licence at {page} with the token's account"
        else:
            msg = f"{repo_id} is gated: accept its licence at {page}, then {how}"
        return HubAuthError(msg, repo_id, token)
    if isinstance(exc, errors.RevisionNotFoundError):
        return HubNotFound(f"revision '{revision}' not found in {repo_id}", repo_id, token)
    if isinstance(exc, errors.RepositoryNotFoundError):
        hint = "" if token else f" (if it is private or gated, {how})"
        return HubNotFound(f"model repo {repo_id} not found on {_endpoint()}{hint}", repo_id, token)
    if isinstance(exc, errors.OfflineModeIsEnabled):
        return HubUnavailable(f"offline mode (HF_HUB_OFFLINE) and {repo_id} is not in the cache", repo_id, token)
    if isinstance(exc, errors.LocalEntryNotFoundError):
        return HubUnavailable(f"cannot reach {_endpoint()} and {repo_id} is not in the cache", repo_id, token)
    if isinstance(exc, errors.HfHubHTTPError) and exc.response is not None:
        status = exc.response.status_code
        if status == 401:
            msg = f"the Hub rejected the token for {repo_id} (401): check HF_TOKEN or --token" if token else (
                f"{repo_id} needs authentication (401): {how}")
            return HubAuthError(msg, repo_id, token)
        if status == 403:
            return HubAuthError(
                f"access to {repo_id} refused (403): accept its licence at {page} and use a token with read access",
                repo_id, token)
        if status == 404:
            return HubNotFound(f"model repo {repo_id} not found on {_endpoint()}", repo_id, token)
        return HubUnavailable(f"the Hub answered HTTP {status} for {repo_id}", repo_id, token)
    if isinstance(exc, errors.FileMetadataError):
        return HubUnavailable(f"{_endpoint()} does not answer like a Hugging Face Hub (check HF_ENDPOINT)", repo_id, token)
    # HTTP-client errors are matched by class name: huggingface_hub 2.x raises httpx2's, older ones httpx/requests.
    names = {c.__name__ for c in type(exc).__mro__}
    if isinstance(exc, TimeoutError) or any("Timeout" in n for n in names):
        return HubTimeout(f"the Hub at {_endpoint()} did not answer in time for {repo_id}", repo_id, token)
    if isinstance(exc, OSError) or names & {"TransportError", "NetworkError", "ConnectError", "ConnectionError",
                                            "RemoteProtocolError", "ProtocolError"}:
        return HubUnavailable(f"cannot reach {_endpoint()} for {repo_id} (no network?)", repo_id, token)
    if isinstance(exc, json.JSONDecodeError):
        return HubUnavailable(f"{_endpoint()} answered non-JSON for {repo_id} (check HF_ENDPOINT)", repo_id, token)
    return None


def _call(fn, repo_id: str, revision: str | None, token: str | None):
    try:
        return fn()
    except HubError:
        raise
    except Exception as exc:  # noqa: BLE001 - translated or re-raised below
        ours = _translate(exc, repo_id, revision, token)
        if ours is None:
            raise
        raise ours from None


def _load_json(path: str | Path, repo_id: str, filename: str) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise HubMalformedFile(
            f"{filename} in {repo_id} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})", repo_id
        ) from None
    except UnicodeDecodeError:
        raise HubMalformedFile(f"{filename} in {repo_id} is not UTF-8 text", repo_id) from None
    if not isinstance(data, dict):
        raise HubMalformedFile(f"{filename} in {repo_id} is JSON but not an object", repo_id)
    return data


def _quant_config(config: dict | None) -> dict | None:
    """quantization_config at the top level or inside the text/LLM sub-config."""
    if not config:
        return None
    for holder in (config, config.get("text_config"), config.get("llm_config")):
        if isinstance(holder, dict) and isinstance(holder.get("quantization_config"), dict):
            return holder["quantization_config"]
    return None


def _apply_files(model: HubModel, files: dict[str, Path | str], repo_id: str) -> None:
    """Fill config / params.json / quantization_config from already fetched files."""
    if "config.json" in files:
        model.config = _load_json(files["config.json"], repo_id, "config.json")
        model.config_file = "config.json"
    if "params.json" in files:
        model.params_json = _load_json(files["params.json"], repo_id, "params.json")
        if model.config is None:
            model.notes.append("no config.json: Mistral-native params.json only")
    model.quantization_config = _quant_config(model.config)
    if model.quantization_config is None:
        for name, method in _QUANT_SIDE_FILES.items():
            if name in files:
                qc = _load_json(files[name], repo_id, name)
                if name == "hf_quant_config.json" and isinstance(qc.get("quantization"), dict):
                    qc = {**qc["quantization"], "producer": qc.get("producer")}
                model.quantization_config = {"quant_method": method, **qc}
                model.notes.append(f"quantization config from {name}")
                break


# ---------------------------------------------------------------- fetch


def fetch_model(ref: ModelRef | str, token: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> HubModel:
    """Everything sizing needs about a Hub model, without downloading weights.

    Online: model info (with file sizes), config files through the hub cache, safetensors
    parameter counts. Offline or unreachable: the cached snapshot (source "cache"), else
    HubUnavailable. Auth, not-found and malformed-file errors are raised, never masked.
    """
    if isinstance(ref, str):
        ref = parse_model_ref(ref)
    if _offline():
        return _from_cache(ref, reason="offline mode (HF_HUB_OFFLINE)")
    try:
        return _from_hub(ref, token, timeout)
    except HubUnavailable as exc:
        return _from_cache(ref, reason=str(exc), on_miss=exc)


def _from_hub(ref: ModelRef, token: str | None, timeout: float) -> HubModel:
    from huggingface_hub import HfApi, hf_hub_download

    endpoint, cache_dir = _endpoint(), str(_cache_dir())
    api = HfApi(endpoint=endpoint, token=token, library_name="fitprobe")
    repo, rev = ref.repo_id, ref.revision
    info = _call(lambda: api.model_info(repo, revision=rev, files_metadata=True, timeout=timeout), repo, rev, token)

    model = HubModel(repo_id=info.id or repo, revision=rev or "main", sha=info.sha, gated=bool(info.gated),
                     base_models=base_models_from_tags(info.tags or []))
    if info.id and info.id.lower() != repo.lower():
        model.notes.append(f"{repo} was renamed to {info.id}")
        repo = info.id
    sizes = {s.rfilename: (s.lfs.size if s.lfs else s.size) for s in (info.siblings or [])}
    if any(n.endswith(".gguf") and sizes[n] is None for n in sizes):
        sizes = _tree_sizes(api, repo, info.sha or rev, token)

    def get(filename: str) -> str:
        return _call(
            lambda: hf_hub_download(
                repo, filename, revision=rev, cache_dir=cache_dir, endpoint=endpoint, token=token,
                etag_timeout=timeout, library_name="fitprobe",
            ),
            repo, rev, token,
        )

    wanted = ["config.json", "params.json", *([n for n in _QUANT_SIDE_FILES if n in sizes])]
    _apply_files(model, {n: get(n) for n in wanted if n in sizes}, repo)
    if model.config is None and model.params_json is None and not any(n.endswith(".gguf") for n in sizes):
        model.notes.append("repo has no config.json, params.json or GGUF file")

    ggufs = [(n, s) for n, s in sizes.items() if n.lower().endswith(".gguf")]
    model.gguf_files = group_gguf_files(ggufs)
    model.mmproj_files = group_gguf_files(ggufs, mmproj=True)
    for g in model.gguf_files:
        if not g.complete:
            model.notes.append(f"GGUF {g.quant}: only {len(g.filenames)} of {g.parts_expected} split parts listed")

    if info.safetensors and info.safetensors.parameters:
        model.safetensors_params = {k: int(v) for k, v in info.safetensors.parameters.items()}
        model.safetensors_source = "model-info"
    elif any(n.endswith(".safetensors") for n in sizes):
        _safetensors_from_headers(api, model, repo, sizes, get, token, timeout)
    return model


def base_models_from_tags(tags: list[str]) -> list[str]:
    """`base_model:quantized:org/name`, `base_model:org/name` (the Hub derives them from the card)."""
    out = []
    for tag in tags:
        if tag.startswith("base_model:"):
            repo = tag.split(":")[-1]
            if "/" in repo and repo not in out:
                out.append(repo)
    return out


def _tree_sizes(api, repo: str, revision: str | None, token: str | None) -> dict[str, int | None]:
    """File sizes from the tree listing, for endpoints whose model info lacks them."""
    entries = _call(lambda: list(api.list_repo_tree(repo, recursive=True, revision=revision)), repo, revision, token)
    return {e.path: (e.lfs.size if getattr(e, "lfs", None) else getattr(e, "size", None))
            for e in entries if hasattr(e, "size")}


def _safetensors_from_headers(api, model: HubModel, repo: str, sizes: dict, get, token, timeout) -> None:
    """Parameter counts per dtype from safetensors headers (HTTP range reads only)."""
    if "model.safetensors.index.json" in sizes:
        index = _load_json(get("model.safetensors.index.json"), repo, "model.safetensors.index.json")
        shards = sorted(set((index.get("weight_map") or {}).values()))
    elif "model.safetensors" in sizes:
        shards = ["model.safetensors"]
    else:
        shards = sorted(n for n in sizes if n.endswith(".safetensors") and "/" not in n)
    totals: dict[str, int] = {}
    for shard in shards:
        meta = _call(
            lambda s=shard: api.parse_safetensors_file_metadata(repo, s, revision=model.sha, timeout=timeout),
            repo, model.revision, token,
        )
        for dtype, count in meta.parameter_count.items():
            totals[dtype] = totals.get(dtype, 0) + int(count)
    if totals:
        model.safetensors_params, model.safetensors_source = totals, "headers"
        model.notes.append(f"parameter counts read from {len(shards)} safetensors header(s)")


# ---------------------------------------------------------------- cache


_SHA = re.compile(r"^[0-9a-f]{40}$")


def _from_cache(ref: ModelRef, reason: str, on_miss: HubUnavailable | None = None) -> HubModel:
    """The cached snapshot of the repo at the requested revision, or HubUnavailable."""
    rev = ref.revision or "main"
    storage = _cache_dir() / ("models--" + ref.repo_id.replace("/", "--"))
    sha = rev if _SHA.match(rev) else None
    ref_file = storage / "refs" / rev
    if sha is None and ref_file.is_file():
        sha = ref_file.read_text().strip()
    snapshot = storage / "snapshots" / sha if sha else None
    if snapshot is None or not snapshot.is_dir():
        if on_miss is not None:
            raise on_miss
        raise HubUnavailable(f"{reason} and {ref.repo_id}@{rev} is not in the cache at {_cache_dir()}", ref.repo_id)

    files = {p.relative_to(snapshot).as_posix(): p for p in snapshot.rglob("*") if p.is_file()}
    model = HubModel(repo_id=ref.repo_id, revision=rev, sha=sha, source="cache")
    _apply_files(model, files, ref.repo_id)
    ggufs = [(n, p.stat().st_size) for n, p in files.items() if n.lower().endswith(".gguf")]
    model.gguf_files = group_gguf_files(ggufs)
    model.mmproj_files = group_gguf_files(ggufs, mmproj=True)
    if model.config is None and model.params_json is None and not model.gguf_files:
        if on_miss is not None:
            raise on_miss
        raise HubUnavailable(f"{reason} and the cache holds no config for {ref.repo_id}@{rev}", ref.repo_id)
    model.notes.append(f"from the local Hugging Face cache: {reason}")
    model.notes.append("cache: safetensors parameter counts and the full file listing are not available offline")
    return model


# ---------------------------------------------------------------- GGUF repo search


def find_gguf_repos(
    base_repo_id: str, token: str | None = None, limit: int = 20
) -> list[GgufRepoCandidate]:
    """GGUF quant repos for a base model: tagged `base_model:quantized:<id>`, else a name search."""
    from huggingface_hub import HfApi

    if _offline():
        raise HubUnavailable(f"offline mode (HF_HUB_OFFLINE): cannot search GGUF repos for {base_repo_id}")
    api = HfApi(endpoint=_endpoint(), token=token, library_name="fitprobe")

    def search(**kw) -> list:
        return _call(lambda: list(api.list_models(sort="downloads", limit=limit, **kw)), base_repo_id, None, token)

    tagged = search(filter=["gguf", f"base_model:quantized:{base_repo_id}"])
    if tagged:
        return [GgufRepoCandidate(repo_id=m.id, downloads=m.downloads, likes=m.likes, match="base_model") for m in tagged]
    name = base_repo_id.split("/")[-1]
    found = search(search=name, filter="gguf")
    return [
        GgufRepoCandidate(repo_id=m.id, downloads=m.downloads, likes=m.likes, match="name")
        for m in found
        if name.lower() in m.id.lower()
    ]
