"""The four Hub routes a model lookup needs, sent through huggingface_hub's own shared HTTP client.

huggingface_hub's `hf_api` and `file_download` modules cost about three times a whole catalog answer to
import (`fitprobe plan` from a catalog name); a lookup needs none of their machinery, only
`huggingface_hub.utils.get_session` (the shared client: its request hooks, offline guard and
transport), `hf_raise_for_status` (the client's reading of a failed answer: gated, not found,
revision or entry missing), and `huggingface_hub.constants`. Routes and headers are those of the
client's own calls (huggingface_hub 2.x): `HfApi.model_info(files_metadata=True)`, `hf_hub_download`
(into the Hub cache, in its layout), `HfApi.parse_safetensors_file_metadata` (range reads) and
`HfApi.list_repo_tree`. The token comes as the client finds one: the one passed (`--token`/HF_TOKEN,
cleaned as the client cleans it), else, unless HF_HUB_DISABLE_IMPLICIT_TOKEN, the client's own
`get_token()` chain when it has something to find (a stored token file, OIDC, Colab).
"""
from __future__ import annotations

import json
import os
import struct
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import quote

from fitprobe import __version__

SAFETENSORS_FIRST_READ = 100_000  # bytes the client reads first (parse_safetensors_file_metadata)
_FACTORY_LOCK = threading.Lock()


def shared_session():
    """The client's shared session. Unless the caller installed its own client factory, it is built
    as the client's default one but with its TLS trust store loaded at the first TLS handshake."""
    from huggingface_hub.utils import _http

    with _FACTORY_LOCK:  # lookups call this from several threads at once
        if getattr(_http, "_GLOBAL_CLIENT", True) is None \
                and getattr(_http, "_GLOBAL_CLIENT_FACTORY", None) is getattr(_http, "default_client_factory", False):
            _http.set_client_factory(_client_trusting_on_first_handshake)
    return _http.get_session()


def _client_trusting_on_first_handshake():
    """huggingface_hub's `default_client_factory` (utils/_http.py: its request hook, redirects
    followed, no client-wide timeout), whose SSL context loads the system CA store (about as long
    as a whole catalog answer, scripts/bench.py) on the first TLS handshake rather than when the
    client is made: an http:// endpoint (a mirror, the loopback Hub) never needs it."""
    import httpx2
    from huggingface_hub.utils._http import hf_request_event_hook

    return httpx2.Client(event_hooks={"request": [hf_request_event_hook]}, follow_redirects=True, timeout=None,
                         verify=_TrustOnFirstHandshake())


class _TrustOnFirstHandshake:
    """Stands for the SSL context httpx would make (`httpcore2.default_ssl_context()`: SSL_CERT_FILE,
    SSL_CERT_DIR, else the system store; truststore on macOS and Windows), making it on first use.
    The transport only calls its methods (set_alpn_protocols, wrap_socket, wrap_bio), once it connects."""

    def __init__(self):
        self._context, self._lock = None, threading.Lock()

    def __getattr__(self, name: str):
        if name.startswith("_"):  # not an SSLContext method (and never recurse before __init__ ran)
            raise AttributeError(name)
        with self._lock:
            if self._context is None:
                import httpcore2

                self._context = httpcore2.default_ssl_context()
        return getattr(self._context, name)


def _raise_for_status(response) -> None:
    from huggingface_hub.utils import hf_raise_for_status

    hf_raise_for_status(response)


def headers(token: str | None) -> dict[str, str]:
    """user-agent and authorization as `build_hf_headers` sends them."""
    import huggingface_hub

    agent = f"fitprobe/{__version__}; hf_hub/{huggingface_hub.__version__}; python/{sys.version.split()[0]}"
    out = {"user-agent": agent}
    token = token or _implicit_token()
    if token:
        out["authorization"] = f"Bearer {token}"
    return out


def _implicit_token() -> str | None:
    """The token the client would send unasked: none when implicit tokens are off; else its own
    `get_token()` (OIDC, HF_TOKEN, the stored token file, Colab secrets), asked only when one of
    them can answer (its module imports a file-lock and YAML stack a lookup does not otherwise need)."""
    from huggingface_hub import constants

    if constants.HF_HUB_DISABLE_IMPLICIT_TOKEN:
        return None
    env = (os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or "")
    env = env.replace("\r", "").replace("\n", "").strip()  # as the client's _clean_token
    if env:
        return env
    if not (os.path.exists(constants.HF_TOKEN_PATH) or os.environ.get("HF_OIDC_RESOURCE")
            or "google.colab" in sys.modules):
        return None
    from huggingface_hub.utils import get_token

    return get_token()


def _revision_path(revision: str | None) -> str:
    return quote(revision or "main", safe="")


def model_info(endpoint: str, repo: str, revision: str | None, token: str | None, timeout: float) -> dict:
    """GET /api/models/{repo}[/revision/{rev}]?blobs=true: sha, siblings with sizes, safetensors counts,
    gated, tags: everything a lookup needs in one request."""
    url = f"{endpoint}/api/models/{repo}" + (f"/revision/{_revision_path(revision)}" if revision else "")
    r = shared_session().get(url, params={"blobs": True}, headers=headers(token), timeout=timeout)
    _raise_for_status(r)
    info = r.json()
    if not isinstance(info, dict) or not isinstance(info.get("sha"), str) or not isinstance(info.get("siblings"), list) \
            or not all(isinstance(s, dict) and isinstance(s.get("rfilename"), str) for s in info["siblings"]):
        raise ValueError(f"model info of {repo} has no sha or file list")
    return info


def resolve_url(endpoint: str, repo: str, revision: str | None, filename: str) -> str:
    """constants.HUGGINGFACE_CO_URL_TEMPLATE, on the endpoint read at call time (as hf_hub_url builds it)."""
    return f"{endpoint}/{repo}/resolve/{_revision_path(revision)}/{quote(filename)}"


def download(endpoint: str, repo: str, revision: str | None, filename: str, token: str | None, timeout: float,
             cache_dir: str, *, limit: int) -> Path:
    """One small file (config.json and side files) into the Hub cache as hf_hub_download lays it out
    (blobs/<etag>, snapshots/<commit>/<file> linking to it, refs/<revision>), so offline mode and the
    client itself find it there. At most `limit` + 1 bytes are read: the parser refuses more."""
    with shared_session().stream("GET", resolve_url(endpoint, repo, revision, filename), headers=headers(token),
                           timeout=timeout, follow_redirects=True) as r:
        if r.status_code >= 400:
            r.read()
            _raise_for_status(r)
        body = bytearray()
        for chunk in r.iter_bytes():
            body += chunk
            if len(body) > limit:
                break
        commit = r.headers.get("X-Repo-Commit")
        etag = (r.headers.get("X-Linked-Etag") or r.headers.get("ETag") or "").removeprefix("W/").strip('"')
    if not commit:
        raise ValueError(f"{filename} of {repo} came without its commit (X-Repo-Commit)")
    return _store(Path(cache_dir), repo, revision or "main", commit, filename, etag, bytes(body))


def _store(cache: Path, repo: str, revision: str, commit: str, filename: str, etag: str, body: bytes) -> Path:
    storage = cache / ("models--" + repo.replace("/", "--"))
    snapshot = storage / "snapshots" / commit / filename
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    if etag and "/" not in etag and etag not in (".", ".."):
        blob = storage / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(blob, body)
        link = snapshot.with_name(f".{snapshot.name}.fitprobe-{os.getpid()}")
        try:  # a new link replaces the old one at once: a reader never finds the file missing
            link.unlink(missing_ok=True)
            link.symlink_to(os.path.relpath(blob, snapshot.parent))
            os.replace(link, snapshot)
        except OSError:  # no symlinks here (the client copies then too)
            link.unlink(missing_ok=True)
            _write_atomic(snapshot, body)
    else:
        _write_atomic(snapshot, body)
    if revision != commit:
        ref = storage / "refs" / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(ref, commit.encode())
    return snapshot


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".fitprobe-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class SafetensorsHeaderError(ValueError):
    """A safetensors header that does not parse (the caller names the repo)."""


def safetensors_counts(endpoint: str, repo: str, revision: str | None, filename: str, token: str | None,
                       timeout: float) -> dict[str, int]:
    """Parameters per dtype in one safetensors file, from its header alone: a range read of the first
    100 kB, and a second one when the header is longer (as parse_safetensors_file_metadata reads it)."""
    from huggingface_hub import constants

    url, sent = resolve_url(endpoint, repo, revision, filename), headers(token)
    r = shared_session().get(url, headers={**sent, "range": f"bytes=0-{SAFETENSORS_FIRST_READ}"}, timeout=timeout)
    _raise_for_status(r)
    if len(r.content) < 8:
        raise SafetensorsHeaderError(f"{filename} is shorter than its header length")
    (size,) = struct.unpack("<Q", r.content[:8])
    if size > constants.SAFETENSORS_MAX_HEADER_LENGTH:
        raise SafetensorsHeaderError(f"{filename} declares a {size:,}-byte header")
    raw = r.content[8:8 + size]
    if len(raw) < size:
        r = shared_session().get(url, headers={**sent, "range": f"bytes=8-{size + 7}"}, timeout=timeout)
        _raise_for_status(r)
        raw = r.content
    try:
        header = json.loads(raw)
        counts: dict[str, int] = {}
        for name, tensor in header.items():
            if name == "__metadata__":
                continue
            n = 1
            for d in tensor["shape"]:
                n *= int(d)
            counts[tensor["dtype"]] = counts.get(tensor["dtype"], 0) + n
        return counts
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SafetensorsHeaderError(f"{filename}: {type(exc).__name__}: {exc}") from None


def tree_sizes(endpoint: str, repo: str, revision: str | None, token: str | None, timeout: float) -> dict:
    """Every file's size from the recursive tree listing (list_repo_tree), following its pages; for
    endpoints whose model info lacks sizes."""
    url = f"{endpoint}/api/models/{repo}/tree/{_revision_path(revision)}"
    params: dict | None = {"recursive": True, "expand": False}
    sizes: dict[str, int | None] = {}
    while url:
        r = shared_session().get(url, params=params, headers=headers(token), timeout=timeout)
        _raise_for_status(r)
        for entry in r.json():
            if entry.get("type") == "file":
                lfs = entry.get("lfs")
                sizes[entry["path"]] = lfs.get("size") if isinstance(lfs, dict) else entry.get("size")
        url, params = r.links.get("next", {}).get("url"), None
    return sizes


def list_models(endpoint: str, token: str | None, timeout: float, *, limit: int, **params) -> list[dict]:
    """GET /api/models with the query HfApi.list_models sends (filter, search, sort, limit), following
    its `Link: rel="next"` pages until `limit` repos."""
    url: str | None = f"{endpoint}/api/models"
    query: dict | None = {**params, "limit": limit}
    out: list[dict] = []
    while url and len(out) < limit:
        r = shared_session().get(url, params=query, headers=headers(token), timeout=timeout)
        _raise_for_status(r)
        page = r.json()
        if not isinstance(page, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in page):
            raise ValueError("a model listing that is not a list of repos")
        out += page
        url, query = r.links.get("next", {}).get("url"), None
    return out[:limit]
