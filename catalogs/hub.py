"""Hugging Face Hub lookups: model reference -> config, exact weight sizes, GGUF files.

Talks to the Hub only through `huggingface_hub`'s shared HTTP client (imported lazily: CLI start-up
stays fast), without its `hf_api` module: the routes are in `hub_http`.
Endpoint, cache folder and offline mode are read from the environment at call time and
passed explicitly, because `huggingface_hub.constants` freezes them at import time.
Nothing here downloads weights: sizes come from the model-info answer, the tree listing
and safetensors header range reads.

A lookup has one total deadline (`Lookup.timeout`, 15 s by default): the requests run in daemon
threads (config.json beside the model info, then the other small files and the safetensors headers
all at once), and whatever has not answered when the deadline passes is abandoned, so the client's
own retries (up to ~90 s on a slow server) and a body trickled byte by byte cannot hold the answer.
The client's log lines stay off the screen unless `Lookup.verbose`.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from fitprobe import errors
from fitprobe.deadline import DEFAULT_LOOKUP_TIMEOUT_S, Deadline, DeadlinePassed, Job, Lookup, run_within  # noqa: F401
from fitprobe.estimator.fields import doc, record
from fitprobe.estimator.message import Num, msg

from .hub_files import GgufQuantFile, group_gguf_files

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT = DEFAULT_LOOKUP_TIMEOUT_S

# Side files that carry the quantization config when config.json does not; the quant_method
# each implies is the one vLLM reads them as (GPTQ: quantize_config.json, AWQ: quant_config.json,
# NVIDIA ModelOpt: hf_quant_config.json).
_QUANT_SIDE_FILES = {
    "hf_quant_config.json": "modelopt",
    "quantize_config.json": "gptq",
    "quant_config.json": "awq",
}


# ---------------------------------------------------------------- errors


class HubError(errors.FitprobeError):
    """Base of every Hub failure; the message is one line and never holds a token."""

    kind = errors.MODEL_NOT_FOUND

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
    """A file from the repo (config.json, params.json, a safetensors header...) does not parse."""

    kind = errors.MODEL_UNREADABLE


class HubFileMissing(HubError):
    """The repo lists a file the Hub then does not serve (404 on the file alone)."""

    kind = errors.MODEL_UNREADABLE


class HubSetupError(HubError):
    """This machine's Hub setup is wrong: HF_ENDPOINT, the token, or a cache folder that cannot be written."""

    kind = errors.USAGE


class HubUnavailable(HubError):
    """No Hub (offline, no network, server error, unreadable answer) and nothing usable in the cache.

    The caller falls back to the bundled catalog and says so; without one it is 'retry later'.
    """

    kind = errors.RETRY_LATER


class HubTimeout(HubUnavailable):
    """The Hub did not answer within the lookup's deadline."""


# ---------------------------------------------------------------- the shared client


MAX_ATTEMPTS = 2  # per request of a lookup: one retry, never the client's five with back-off
_counter_lock = threading.Lock()
_lookup_of_thread = threading.local()  # the budget of the lookup this thread is working for


class _Budget:
    """One lookup's deadline, and the requests its threads sent (per URL, to refuse a third attempt)."""

    def __init__(self, deadline: Deadline):
        self.deadline, self.attempts = deadline, {}

    @property
    def requests(self) -> int:
        return sum(self.attempts.values())


def _in_lookup(budget: _Budget, fn):
    """fn, run in a thread that works for this lookup: its requests obey the lookup's budget."""
    def run():
        _lookup_of_thread.budget = budget
        try:
            return fn()
        finally:
            _lookup_of_thread.budget = None
    return run


def _on_request(request) -> None:
    """Request hook of the shared client: in a lookup's thread, count the request, and refuse one
    past the deadline or a third attempt at the same URL (the client retries 5 times with
    back-off, ~90 s, on a server that is down or slow). Raising here ends the client call at once."""
    budget = getattr(_lookup_of_thread, "budget", None)
    if budget is None:
        return
    with _counter_lock:
        key = (request.method, str(request.url))
        attempts = budget.attempts[key] = budget.attempts.get(key, 0) + 1
    if budget.deadline.remaining() <= 0:
        raise HubTimeout(msg("the lookup's deadline passed"))  # its caller has already reported the timeout
    if attempts > MAX_ATTEMPTS:
        raise HubUnavailable(msg("%(host)s was asked for %(path)s %(max_attempts)s times without an answer (server "
                                 "down, or a retry or redirect loop)",
                                 host=request.url.host, path=request.url.path, max_attempts=MAX_ATTEMPTS))


def _prepare_client(verbose: bool) -> None:
    """Count every request the shared client sends, and keep the library's logs and warnings (retry
    notices) off the user's screen unless verbose. Nothing a lookup does draws a progress bar."""
    import warnings

    from huggingface_hub.utils import logging

    from .hub_http import shared_session

    session = shared_session()
    hooks = session.event_hooks
    if _on_request not in hooks["request"]:
        session.event_hooks = {**hooks, "request": [*hooks["request"], _on_request]}
    logging.set_verbosity(logging.INFO if verbose else logging.CRITICAL + 1)
    if not verbose:
        warnings.filterwarnings("ignore", module="huggingface_hub")


def clean_token(token: str | None) -> str | None:
    """The token as huggingface_hub reads one (utils/_auth.py `_clean_token`): CR/LF removed,
    spaces stripped, empty = none. A mounted secret often ends in a newline."""
    if token is None:
        return None
    token = token.replace("\r", "").replace("\n", "").strip() or None
    if token is not None and not token.isascii():
        raise HubSetupError(msg("the Hugging Face token holds non-ASCII characters: check HF_TOKEN or --token"))
    return token


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
            raise BadModelRef(msg("'%(raw)s' is a %(parts)s page, not a model repo", raw=raw, parts=parts[0][:-1]))
        if len(parts) < 2:
            raise BadModelRef(msg("'%(raw)s' does not name a model repo (expected https://huggingface.co/org/name)",
                                  raw=raw))
        raw_ref = f"{parts[0]}/{parts[1]}"
        if len(parts) >= 4 and parts[2] in ("tree", "blob", "resolve"):
            raw_ref += f"@{unquote(parts[3])}"
        raw = raw_ref
    m = _REF.match(raw)
    if not m or "--" in m.group("repo") or ".." in m.group("repo") or m.group("repo").endswith((".", "-")):
        raise BadModelRef(
            msg("'%(text)s' is not a Hugging Face model id (expected org/name, org/name:QUANT, org/name@revision or "
                "a URL)", text=text)
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
    url = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise HubSetupError(msg("HF_ENDPOINT '%(url)s' is not a valid URL (%(exc)s)", url=url, exc=exc)) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HubSetupError(msg("HF_ENDPOINT '%(url)s' is not an http(s) URL with a host", url=url))
    return url


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


def _translate(exc: BaseException, repo_id: str, revision: str | None, token: str | None) -> HubError:
    """Map a huggingface_hub / HTTP-client / filesystem exception to one of ours, named for what it is."""
    from huggingface_hub import errors as hf_errors

    page = f"{_endpoint()}/{repo_id}"
    if isinstance(exc, hf_errors.GatedRepoError):
        if token:
            text = msg("%(repo_id)s is gated and this token has no access: accept its licence at %(page)s with the "
                       "token's account", repo_id=repo_id, page=page)
        else:
            text = msg("%(repo_id)s is gated: accept its licence at %(page)s, then pass a token with HF_TOKEN=... or "
                       "--token", repo_id=repo_id, page=page)
        return HubAuthError(text, repo_id, token)
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return HubNotFound(msg("revision '%(revision)s' not found in %(repo_id)s",
                               revision=revision, repo_id=repo_id), repo_id, token)
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return HubNotFound(msg("model repo %(repo_id)s not found on %(endpoint)s", repo_id=repo_id,
                               endpoint=_endpoint()) if token else
                           msg("model repo %(repo_id)s not found on %(endpoint)s (if it is private or gated, pass a "
                               "token with HF_TOKEN=... or --token)", repo_id=repo_id, endpoint=_endpoint()),
                           repo_id, token)
    if isinstance(exc, hf_errors.OfflineModeIsEnabled):
        return HubUnavailable(msg("offline mode (HF_HUB_OFFLINE) and %(repo_id)s is not in the cache",
                                  repo_id=repo_id), repo_id, token)
    if isinstance(exc, hf_errors.LocalEntryNotFoundError):
        return HubUnavailable(msg("cannot reach %(endpoint)s and %(repo_id)s is not in the cache",
                                  endpoint=_endpoint(), repo_id=repo_id), repo_id, token)
    if isinstance(exc, hf_errors.EntryNotFoundError):
        return HubFileMissing(msg("%(repo_id)s lists a file the Hub does not serve (404): %(exc)s",
                                  repo_id=repo_id, exc=_short(exc)), repo_id, token)
    if isinstance(exc, hf_errors.SafetensorsParsingError):
        return HubMalformedFile(msg("a safetensors header in %(repo_id)s is corrupt: %(exc)s",
                                    repo_id=repo_id, exc=_short(exc)), repo_id, token)
    if isinstance(exc, hf_errors.HfHubHTTPError) and exc.response is not None:
        status = exc.response.status_code
        if status == 401:
            text = (msg("the Hub rejected the token for %(repo_id)s (401): check HF_TOKEN or --token", repo_id=repo_id)
                    if token else msg("%(repo_id)s needs authentication (401): pass a token with HF_TOKEN=... or "
                                      "--token", repo_id=repo_id))
            return HubAuthError(text, repo_id, token)
        if status == 403:
            return HubAuthError(
                msg("access to %(repo_id)s refused (403): accept its licence at %(page)s and use a token with read "
                    "access", repo_id=repo_id, page=page),
                repo_id, token)
        if status == 404:
            return HubNotFound(msg("model repo %(repo_id)s not found on %(endpoint)s",
                                   repo_id=repo_id, endpoint=_endpoint()), repo_id, token)
        kind = "server error" if status >= 500 else "rate limited" if status == 429 else "refused the request"
        return HubUnavailable(msg("the Hub answered HTTP %(status)s (%(kind)s) for %(repo_id)s",
                                  status=status, kind=kind, repo_id=repo_id), repo_id, token)
    if isinstance(exc, hf_errors.FileMetadataError):
        return HubUnavailable(msg("%(endpoint)s does not answer like a Hugging Face Hub (check HF_ENDPOINT)",
                                  endpoint=_endpoint()), repo_id, token)
    if isinstance(exc, OSError) and exc.filename is not None:  # the cache, not the network
        return HubSetupError(msg("cannot write the Hugging Face cache at %(filename)s: %(reason)s (set HF_HOME or "
                                 "HF_HUB_CACHE to a writable folder)", filename=exc.filename, reason=exc.strerror), repo_id, token)
    # HTTP-client errors are matched by class name: huggingface_hub 2.x raises httpx2's, older ones httpx/requests.
    names = {c.__name__ for c in type(exc).__mro__}
    if isinstance(exc, TimeoutError) or any("Timeout" in n for n in names):
        return HubTimeout(msg("the Hub at %(endpoint)s did not answer in time for %(repo_id)s",
                              endpoint=_endpoint(), repo_id=repo_id), repo_id, token)
    if "TooManyRedirects" in names:
        return HubUnavailable(msg("%(endpoint)s redirects in a loop for %(repo_id)s (check HF_ENDPOINT)",
                                  endpoint=_endpoint(), repo_id=repo_id), repo_id, token)
    if "DecodingError" in names:
        return HubUnavailable(msg("%(endpoint)s sent a body it declared in an encoding it did not use, for "
                                  "%(repo_id)s", endpoint=_endpoint(), repo_id=repo_id),
                              repo_id, token)
    if names & {"InvalidURL", "UnsupportedProtocol"}:
        return HubSetupError(msg("HF_ENDPOINT '%(endpoint)s' cannot be used: %(exc)s",
                                 endpoint=_endpoint(), exc=_short(exc)), repo_id, token)
    if isinstance(exc, OSError) or names & {"TransportError", "NetworkError", "ConnectError", "ConnectionError",
                                            "RemoteProtocolError", "ProtocolError"}:
        return HubUnavailable(msg("cannot reach %(endpoint)s for %(repo_id)s (no network?)",
                                  endpoint=_endpoint(), repo_id=repo_id), repo_id, token)
    # Anything else came from reading the answer (non-JSON, `{}`, a list where an object belongs):
    # the server at HF_ENDPOINT does not talk like the Hub right now.
    return HubUnavailable(msg("%(endpoint)s answered something that is not a Hub answer for %(repo_id)s "
                              "(%(error_type)s: %(exc)s)",
                              endpoint=_endpoint(), repo_id=repo_id, error_type=type(exc).__name__, exc=_short(exc)), repo_id, token)


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:160]


def _call(fn, repo_id: str, revision: str | None, token: str | None):
    """Call the Hub client; every failure comes out as a HubError."""
    try:
        return fn()
    except HubError:
        raise
    except Exception as exc:  # noqa: BLE001 - translated below
        raise _translate(exc, repo_id, revision, token) from None


def _load_json(path: str | Path, repo_id: str, filename: str) -> dict:
    from fitprobe.estimator.config import MAX_CONFIG_BYTES, SpecError, parse_config_bytes

    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
        return parse_config_bytes(raw, f"{filename} of {repo_id}")
    except SpecError as exc:
        raise HubMalformedFile(str(exc), repo_id) from None
    except OSError as exc:
        raise HubSetupError(msg("cannot read %(filename)s of %(repo_id)s from the cache: %(reason)s",
                                filename=filename, repo_id=repo_id, reason=exc.strerror), repo_id) from None


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
            model.notes.append(msg("no config.json: Mistral-native params.json only"))
    model.quantization_config = _quant_config(model.config)
    if model.quantization_config is None:
        for name, method in _QUANT_SIDE_FILES.items():
            if name in files:
                qc = _load_json(files[name], repo_id, name)
                if name == "hf_quant_config.json" and isinstance(qc.get("quantization"), dict):
                    qc = {**qc["quantization"], "producer": qc.get("producer")}
                model.quantization_config = {"quant_method": method, **qc}
                model.notes.append(msg("quantization config from %(file)s", file=name))
                break


# ---------------------------------------------------------------- fetch


def fetch_model(ref: ModelRef | str, token: str | None = None, lookup: Lookup | None = None, *,
                timeout: float | None = None) -> HubModel:
    """Everything sizing needs about a Hub model, without downloading weights.

    Online: model info (with file sizes), config files through the hub cache, safetensors
    parameter counts, within the lookup's deadline. Offline or unreachable: the cached snapshot
    (source "cache"), else HubUnavailable. Auth, not-found, malformed-file and setup errors are
    raised, never masked.
    """
    if isinstance(ref, str):
        ref = parse_model_ref(ref)
    lookup = lookup or Lookup(timeout=timeout or DEFAULT_TIMEOUT)
    token = clean_token(token)
    if _offline():
        return _from_cache(ref, reason="offline mode (HF_HUB_OFFLINE)")
    endpoint = _endpoint()
    deadline = lookup.start()
    _prepare_client(lookup.verbose)
    budget = _Budget(deadline)
    # the fallback is a snapshot cached before this lookup: a config.json this failed lookup fetched
    # beside a model info that never came is not a sized model
    cached_before = _snapshot_dir(ref) is not None
    try:
        return run_within(deadline, _in_lookup(budget, lambda: _from_hub(ref, token, budget)), on_slow=lookup.on_slow,
                          slow_after=max(0.0, lookup.slow_after - deadline.elapsed()))
    except DeadlinePassed:
        exc = HubTimeout(msg("the Hub at %(endpoint)s did not answer within %(timeout)s s for %(repo_id)s (the "
                             "lookup's deadline, --timeout)",
                             endpoint=endpoint, timeout=Num(lookup.timeout, "g"), repo_id=ref.repo_id), ref.repo_id)
        if not cached_before:
            raise exc from None
        return _from_cache(ref, reason=str(exc), on_miss=exc)
    except HubUnavailable as exc:
        if not cached_before:
            raise
        return _from_cache(ref, reason=str(exc), on_miss=exc)
    finally:
        lookup.requests += budget.requests


def _from_hub(ref: ModelRef, token: str | None, budget: _Budget) -> HubModel:
    """Model info (with every file's size) and config.json at once, then the other small files and
    the safetensors headers at once: two round trips whatever the repo holds, each request made once
    (catalogs.hub_http: the client's shared session without its hf_api module)."""
    from fitprobe.estimator.config import MAX_CONFIG_BYTES

    from . import hub_http

    deadline = budget.deadline

    def start(fn) -> Job:
        return Job(_in_lookup(budget, fn))

    endpoint, cache_dir = _endpoint(), _writable_cache()
    repo, rev = ref.repo_id, ref.revision

    def wait() -> float:  # per-request timeout: what is left of the lookup
        return max(0.1, deadline.remaining())

    def get(filename: str, repo_id: str = repo) -> Path:
        return _call(lambda: hub_http.download(endpoint, repo_id, rev, filename, token, wait(), cache_dir,
                                               limit=MAX_CONFIG_BYTES), repo_id, rev, token)

    config_job = start(lambda: get("config.json"))  # nearly every repo has one: fetch it beside the info
    info = _call(lambda: hub_http.model_info(endpoint, repo, rev, token, wait()), repo, rev, token)
    sha, info_id = info["sha"], info.get("id") if isinstance(info.get("id"), str) else None
    model = HubModel(repo_id=info_id or repo, revision=rev or "main", sha=sha, gated=bool(info.get("gated")),
                     base_models=base_models_from_tags([t for t in info.get("tags") or [] if isinstance(t, str)]))
    if info_id and info_id.lower() != repo.lower():
        model.notes.append(msg("%(repo)s was renamed to %(new)s", repo=repo, new=info_id))
        repo = info_id
    sizes = {s["rfilename"]: _sibling_size(s) for s in info["siblings"]}
    _check_counts(sizes, msg("file size"), repo)
    if any(n.endswith(".gguf") and sizes[n] is None for n in sizes):
        sizes = _call(lambda: hub_http.tree_sizes(endpoint, repo, sha, token, wait()), repo, rev, token)
        _check_counts(sizes, msg("file size"), repo)

    jobs: dict[str, Job] = {}
    for name in ("params.json", "model.safetensors.index.json", *_QUANT_SIDE_FILES):
        if name in sizes:
            jobs[name] = start(lambda n=name: get(n, repo))
    counted = info.get("safetensors") if isinstance(info.get("safetensors"), dict) else {}
    parameters = counted.get("parameters")
    shards = _safetensors_shards(sizes) if not parameters else []
    headers = {shard: start(lambda s=shard: _call(lambda: _header_counts(hub_http, endpoint, repo, sha, s, token,
                                                                         wait()), repo, rev, token))
               for shard in shards}
    files = {}
    if "config.json" in sizes:
        files["config.json"] = _result(config_job, deadline)
    for name, job in jobs.items():
        files[name] = _result(job, deadline)
    _apply_files(model, {n: p for n, p in files.items() if n != "model.safetensors.index.json"}, repo)
    if model.config is None and model.params_json is None and not any(n.endswith(".gguf") for n in sizes):
        model.notes.append(msg("repo has no config.json, params.json or GGUF file"))

    ggufs = [(n, s) for n, s in sizes.items() if n.lower().endswith(".gguf")]
    model.gguf_files = group_gguf_files(ggufs)
    model.mmproj_files = group_gguf_files(ggufs, mmproj=True)
    for g in model.gguf_files:
        if not g.complete:
            model.notes.append(msg("GGUF %(quant)s: only %(listed)s of %(parts)s split parts listed", quant=g.quant,
                                   listed=len(g.filenames), parts=g.parts_expected))

    if parameters:
        if not isinstance(parameters, dict):
            raise HubUnavailable(msg("%(endpoint)s answered a safetensors summary that is not one for %(repo)s",
                                     endpoint=endpoint, repo=repo), repo)
        _check_counts(parameters, msg("parameter count"), repo)
        model.safetensors_params = {k: int(v) for k, v in parameters.items()}
        model.safetensors_source = "model-info"
    elif shards:
        if "model.safetensors.index.json" in files:  # the index names the shards that hold weights
            index = _load_json(files["model.safetensors.index.json"], repo, "model.safetensors.index.json")
            weight_map = index.get("weight_map") or {}
            wanted = set(weight_map.values()) if isinstance(weight_map, dict) else set(shards)
            headers = {s: j for s, j in headers.items() if s in wanted}
        totals: dict[str, int] = {}
        for shard, job in headers.items():
            counts = _result(job, deadline)
            _check_counts(counts, msg("parameter count in %(file)s", file=shard), repo)
            for dtype, count in counts.items():
                totals[dtype] = totals.get(dtype, 0) + int(count)
        if totals:
            model.safetensors_params, model.safetensors_source = totals, "headers"
            model.notes.append(msg("parameter counts read from %(n)s safetensors header(s)", n=len(headers)))
    return model


def _sibling_size(sibling: dict):
    """A file's size in the model info: its LFS object's for large files, else the blob's (None: not given)."""
    lfs = sibling.get("lfs")
    return lfs.get("size") if isinstance(lfs, dict) else sibling.get("size")


def _header_counts(hub_http, endpoint: str, repo: str, revision: str, shard: str, token: str | None,
                   timeout: float) -> dict[str, int]:
    try:
        return hub_http.safetensors_counts(endpoint, repo, revision, shard, token, timeout)
    except hub_http.SafetensorsHeaderError as exc:
        raise HubMalformedFile(msg("a safetensors header in %(repo)s is corrupt: %(exc)s", repo=repo, exc=exc), repo,
                               token) from None


_MAX_COUNT = 10**15  # bytes or parameters: a quadrillion is beyond any model file or checkpoint


def _check_counts(values: dict, what: str, repo: str) -> None:
    """Sizes and parameter counts from the Hub are sized from: non-negative integers below 10^15."""
    for name, value in values.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _MAX_COUNT):
            raise HubUnavailable(msg("%(endpoint)s answered an impossible %(what)s for %(name)s in %(repo)s: "
                                     "%(value)s",
                                     endpoint=_endpoint(), what=what, name=name, repo=repo, value=str(value)[:30]),
                                 repo)


def _result(job: Job, deadline: Deadline):
    """A parallel request's answer; past the deadline the whole lookup is abandoned by its caller."""
    return job.result(deadline.remaining() + 1.0)


def _safetensors_shards(sizes: dict) -> list[str]:
    """Top-level safetensors files (an index, when present, later narrows them to its weight map)."""
    if "model.safetensors" in sizes and "model.safetensors.index.json" not in sizes:
        return ["model.safetensors"]
    return sorted(n for n in sizes if n.endswith(".safetensors") and "/" not in n)


def _writable_cache() -> str:
    """The hub cache folder, created if needed; HubSetupError when it cannot be written."""
    cache = _cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        writable = os.access(cache, os.W_OK | os.X_OK)
    except OSError as exc:
        raise HubSetupError(msg("cannot create the Hugging Face cache at %(cache)s: %(reason)s (set HF_HOME or "
                                "HF_HUB_CACHE to a writable folder)", cache=cache, reason=exc.strerror)) from None
    if not writable:
        raise HubSetupError(msg("the Hugging Face cache at %(cache)s is not writable (set HF_HOME or HF_HUB_CACHE to "
                                "a writable folder)", cache=cache))
    return str(cache)


def base_models_from_tags(tags: list[str]) -> list[str]:
    """`base_model:quantized:org/name`, `base_model:org/name` (the Hub derives them from the card)."""
    out = []
    for tag in tags:
        if tag.startswith("base_model:"):
            repo = tag.split(":")[-1]
            if "/" in repo and repo not in out:
                out.append(repo)
    return out


# ---------------------------------------------------------------- cache


_SHA = re.compile(r"^[0-9a-f]{40}$")


def _snapshot_dir(ref: ModelRef) -> Path | None:
    """The cached snapshot folder of the repo at the requested revision, if there is one."""
    rev = ref.revision or "main"
    storage = _cache_dir() / ("models--" + ref.repo_id.replace("/", "--"))
    sha = rev if _SHA.match(rev) else None
    ref_file = storage / "refs" / rev
    try:
        if sha is None and ref_file.is_file():
            sha = ref_file.read_text().strip()
        snapshot = storage / "snapshots" / sha if sha else None
        return snapshot if snapshot is not None and snapshot.is_dir() else None
    except OSError:
        return None


def _from_cache(ref: ModelRef, reason: str, on_miss: HubUnavailable | None = None) -> HubModel:
    """The cached snapshot of the repo at the requested revision, or HubUnavailable."""
    rev = ref.revision or "main"
    snapshot = _snapshot_dir(ref)
    sha = snapshot.name if snapshot is not None else None
    if snapshot is None:
        if on_miss is not None:
            raise on_miss
        raise HubUnavailable(msg("%(reason)s and %(repo_id)s@%(rev)s is not in the cache at %(cache_dir)s",
                                 reason=reason, repo_id=ref.repo_id, rev=rev, cache_dir=_cache_dir()), ref.repo_id)

    files = {p.relative_to(snapshot).as_posix(): p for p in snapshot.rglob("*") if p.is_file()}
    model = HubModel(repo_id=ref.repo_id, revision=rev, sha=sha, source="cache")
    _apply_files(model, files, ref.repo_id)
    ggufs = [(n, p.stat().st_size) for n, p in files.items() if n.lower().endswith(".gguf")]
    model.gguf_files = group_gguf_files(ggufs)
    model.mmproj_files = group_gguf_files(ggufs, mmproj=True)
    if model.config is None and model.params_json is None and not model.gguf_files:
        if on_miss is not None:
            raise on_miss
        raise HubUnavailable(msg("%(reason)s and the cache holds no config for %(repo_id)s@%(rev)s",
                                 reason=reason, repo_id=ref.repo_id, rev=rev), ref.repo_id)
    model.notes.append(msg("from the local Hugging Face cache: %(reason)s", reason=reason))
    model.notes.append(msg("cache: safetensors parameter counts and the full file listing are not available offline"))
    return model


# ---------------------------------------------------------------- GGUF repo search


def find_gguf_repos(
    base_repo_id: str, token: str | None = None, limit: int = 20, lookup: Lookup | None = None
) -> list[GgufRepoCandidate]:
    """GGUF quant repos for a base model: tagged `base_model:quantized:<id>`, else a name search."""
    from . import hub_http

    if _offline():
        raise HubUnavailable(msg("offline mode (HF_HUB_OFFLINE): cannot search GGUF repos for %(base_repo_id)s",
                                 base_repo_id=base_repo_id))
    lookup = lookup or Lookup()
    token, deadline = clean_token(token), lookup.start()
    _prepare_client(lookup.verbose)
    endpoint = _endpoint()

    def search(**params) -> list[dict]:
        budget = _Budget(deadline)
        try:
            return run_within(deadline, _in_lookup(budget, lambda: _call(lambda: hub_http.list_models(
                endpoint, token, max(0.1, deadline.remaining()), limit=limit, sort="downloads", **params),
                base_repo_id, None, token)))
        except DeadlinePassed:
            raise HubTimeout(msg("the Hub search for GGUF repos of %(base_repo_id)s did not answer within "
                                 "%(timeout)s s (--timeout)",
                                 base_repo_id=base_repo_id, timeout=Num(lookup.timeout, "g")), base_repo_id) from None
        finally:
            lookup.requests += budget.requests

    def candidate(m: dict, match: str) -> GgufRepoCandidate:
        def count(key: str) -> int | None:
            value = m.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        return GgufRepoCandidate(repo_id=m["id"], downloads=count("downloads"), likes=count("likes"), match=match)

    tagged = search(filter=["gguf", f"base_model:quantized:{base_repo_id}"])
    if tagged:
        return [candidate(m, "base_model") for m in tagged]
    name = base_repo_id.split("/")[-1]
    found = search(search=name, filter="gguf")
    return [candidate(m, "name") for m in found if name.lower() in m["id"].lower()]
