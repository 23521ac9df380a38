"""A loopback HTTP server that answers the Hub routes huggingface_hub 2.x really calls.

Routes (read from the installed client: hf_api.model_info / list_repo_tree / list_models,
file_download.get_hf_file_metadata + http_get, hf_api.parse_safetensors_file_metadata):
  GET  /api/models?filter=..&pipeline_tag=..&search=..&sort=..&limit=..[&cursor=..]
                                                              model search, `page_size` per page and a
                                                              `Link: <..>; rel="next"` header like the Hub
  GET  /api/models/{repo}[/revision/{rev}]                    model info (?blobs=True adds sizes)
  GET  /api/models/{repo}/tree/{rev}[/{path}]?recursive=..    tree listing
  HEAD /{repo}/resolve/{rev}/{path}                           file metadata (X-Repo-Commit, ETag, X-Linked-Size)
  GET  /{repo}/resolve/{rev}/{path}                           file bytes, honouring `Range: bytes=a-b`
Errors carry the X-Error-Code header huggingface_hub keys on (RepoNotFound, RevisionNotFound,
EntryNotFound, GatedRepo) with the status codes the real Hub uses (401 without a token).
`Fault`s make matching requests misbehave the ways real networks and proxies do: slow answers,
bodies trickled byte by byte, redirect loops, a Content-Encoding the body does not have, server
errors, and bodies that are not what the route promises.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlencode, urlsplit


@dataclass
class Listed:
    """A file known only by its listing (GGUF weights): never served, only sized."""

    size: int
    sha256: str


@dataclass
class FakeRepo:
    repo_id: str
    sha: str
    files: dict[str, bytes | Listed] = field(default_factory=dict)
    gated: bool = False
    safetensors: dict | None = None  # the model-info "safetensors" field
    sizes_in_info: bool = True  # False: model info without sizes (forces the tree listing)
    revisions: dict[str, str] = field(default_factory=dict)  # extra branch/tag -> sha
    tags: list[str] = field(default_factory=list)
    downloads: int = 0
    likes: int = 0
    pipeline_tag: str | None = None


@dataclass
class Fault:
    """How the Hub misbehaves on requests whose path matches `path` (a regex, searched)."""

    path: str
    method: str | None = None  # "GET" / "HEAD"; None: both
    delay: float = 0.0  # seconds before anything is sent
    status: int | None = None  # answer this status (with error_code as X-Error-Code) instead of the route
    error_code: str | None = None
    body: bytes | None = None  # answer 200 with this body instead of the route
    trickle: float = 0.0  # with body: send one byte every `trickle` seconds
    redirect_loop: bool = False  # 302 back to the same path, forever
    encoding: str | None = None  # with body: a Content-Encoding header the body does not have
    wait_for: str | None = None  # answer only once a request matching this regex has arrived (3 s, else 503)
    hits: int = 0


def _git_blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """State of the loopback Hub; tests add repos, tokens and failure switches."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.renamed: dict[str, str] = {}  # old id (lower) -> new id
        self.accepted_tokens: set[str] = set()  # tokens whose owner accepted every gated licence
        self.info_delay = 0.0  # seconds model info waits before answering (timeout tests)
        self.list_delay = 0.0  # seconds the model listing waits before answering
        self.page_size = 1000  # models per listing page (the Hub's own page is 1000)
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, dict]] = []
        self.connections: set = set()  # open client sockets, cut on stop() like a lost network
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    def add(self, repo: FakeRepo) -> FakeRepo:
        self.repos[repo.repo_id.lower()] = repo
        return repo

    # -- lifecycle
    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            state = hub

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping in a timeout test
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for sock in list(self.connections):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        """A client that gave up mid-answer (a deadline test) is expected: no traceback on stderr,
        which CliRunner would mix into the output of whatever test runs next."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: FakeHub

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def setup(self) -> None:
        super().setup()
        self.state.connections.add(self.connection)

    def finish(self) -> None:
        self.state.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:  # the client went away (timeout test)
            pass

    # -- helpers
    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def _json(self, status: int, obj, headers: dict | None = None, head: bool = False) -> None:
        self._send(status, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})}, head)

    def _error(self, status: int, code: str, message: str, head: bool = False, extra: dict | None = None) -> None:
        hdrs = {"X-Error-Code": code, "X-Error-Message": message, **(extra or {})}
        self._json(status, {"error": message}, hdrs, head)

    def _token(self) -> str | None:
        auth = self.headers.get("authorization") or ""
        return auth[7:] if auth.lower().startswith("bearer ") else None

    def _repo(self, repo_id: str, head: bool, new_path: str) -> FakeRepo | None:
        """Resolve a repo id or answer the request (rename redirect, not found)."""
        st = self.state
        if repo_id.lower() in st.renamed:
            target = new_path.replace(repo_id, st.renamed[repo_id.lower()], 1)
            self._send(307, b"", {"Location": target}, head)
            return None
        repo = st.repos.get(repo_id.lower())
        if repo is None:
            # Like the real Hub: anonymous callers get 401 for a missing (or private) repo.
            status = 404 if self._token() else 401
            self._error(status, "RepoNotFound", "Repository not found", head)
        return repo

    def _sha(self, repo: FakeRepo, rev: str, head: bool) -> str | None:
        if rev in ("main", repo.sha):
            return repo.sha
        if rev in repo.revisions:
            return repo.revisions[rev]
        self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        return None

    # -- routes
    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_GET(self) -> None:
        self._route(head=False)

    def _route(self, head: bool) -> None:
        st = self.state
        parts = urlsplit(self.path)
        path, query = parts.path, parse_qs(parts.query)
        st.requests.append((self.command, self.path, dict(self.headers)))
        fault = next((f for f in st.faults if re.search(f.path, path) and f.method in (None, self.command)), None)
        if fault is not None and self._fault(fault, head):
            return

        def g(m, i, default=None):  # revisions like refs/pr/1 arrive %-encoded: decode per segment
            return unquote(m.group(i)) if m.group(i) is not None else default

        if path == "/api/models":
            return self._search(query)
        m = re.match(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?$", path)
        if m:
            return self._tree(g(m, 1), g(m, 2), g(m, 3), query)
        m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?$", path)
        if m:
            return self._info(g(m, 1), g(m, 2, "main"), query)
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            return self._resolve(g(m, 1), g(m, 2), g(m, 3), head)
        self._send(404, b"not found", head=head)

    def _fault(self, fault: Fault, head: bool) -> bool:
        """Misbehave as `fault` says; False when it only delays and the route answers after it."""
        fault.hits += 1
        if fault.wait_for is not None:
            for _ in range(300):  # a client that asks one thing after the other never gets here in time
                if any(re.search(fault.wait_for, urlsplit(p).path) for _, p, _ in list(self.state.requests)):
                    break
                if self.state._stop.wait(0.01):
                    return True
            else:
                self._error(503, "", "the request it waits for never came", head)
                return True
        if fault.delay and self.state._stop.wait(fault.delay):
            return True
        if fault.redirect_loop:
            self._send(302, b"", {"Location": self.path}, head)
            return True
        if fault.status is not None:
            self._error(fault.status, fault.error_code or "", "injected fault", head)
            return True
        if fault.body is None:
            return False
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(fault.body)))
        if fault.encoding:
            self.send_header("Content-Encoding", fault.encoding)
        self.end_headers()
        if head:
            return True
        if not fault.trickle:
            self.wfile.write(fault.body)
            return True
        for i in range(len(fault.body)):
            if self.state._stop.wait(fault.trickle):
                return True
            try:
                self.wfile.write(fault.body[i:i + 1])
                self.wfile.flush()
            except OSError:  # the client gave up
                return True
        return True

    def _info(self, repo_id: str, rev: str, query: dict) -> None:
        st = self.state
        if st.info_delay and st._stop.wait(st.info_delay):
            return
        repo = self._repo(repo_id, False, self.path)
        if repo is None or (sha := self._sha(repo, rev, False)) is None:
            return
        blobs = query.get("blobs", ["False"])[0].lower() == "true"
        siblings = []
        for name, content in sorted(repo.files.items()):
            sib: dict = {"rfilename": name}
            if blobs and repo.sizes_in_info:
                if isinstance(content, Listed):
                    sib.update(size=content.size, blobId=content.sha256[:40],
                               lfs={"size": content.size, "sha256": content.sha256, "pointerSize": 135})
                else:
                    sib.update(size=len(content), blobId=_git_blob_sha(content))
            siblings.append(sib)
        body = {"_id": sha[:24], "id": repo.repo_id, "modelId": repo.repo_id, "sha": sha, "private": False,
                "gated": "manual" if repo.gated else False, "disabled": False, "tags": repo.tags,
                "downloads": repo.downloads, "likes": repo.likes, "siblings": siblings}
        if repo.safetensors is not None:
            body["safetensors"] = repo.safetensors
        self._json(200, body)

    def _tree(self, repo_id: str, rev: str, sub: str | None, query: dict) -> None:
        repo = self._repo(repo_id, False, self.path)
        if repo is None or self._sha(repo, rev, False) is None:
            return
        recursive = query.get("recursive", ["False"])[0].lower() == "true"
        prefix = (sub.rstrip("/") + "/") if sub else ""
        entries, folders = [], set()
        for name, content in sorted(repo.files.items()):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix):]
            if "/" in rest and not recursive:
                folders.add(prefix + rest.split("/")[0])
                continue
            if isinstance(content, Listed):
                entries.append({"type": "file", "oid": content.sha256[:40], "size": content.size, "path": name,
                                "lfs": {"oid": content.sha256, "size": content.size, "pointerSize": 135}})
            else:
                entries.append({"type": "file", "oid": _git_blob_sha(content), "size": len(content), "path": name})
        entries += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": f} for f in sorted(folders)]
        self._json(200, entries)

    def _resolve(self, repo_id: str, rev: str, filename: str, head: bool) -> None:
        st = self.state
        repo = self._repo(repo_id, head, self.path)
        if repo is None or (sha := self._sha(repo, rev, head)) is None:
            return
        if repo.gated and self._token() not in st.accepted_tokens:
            if self._token():
                msg = f"Access to model {repo.repo_id} is restricted and you are not in the authorized list."
                return self._error(403, "GatedRepo", msg, head)
            msg = f"Access to model {repo.repo_id} is restricted. You must be authenticated to access it."
            return self._error(401, "GatedRepo", msg, head)
        content = repo.files.get(filename)
        if content is None:
            return self._error(404, "EntryNotFound", "Entry not found", head, {"X-Repo-Commit": sha})
        if isinstance(content, Listed):
            return self._error(416, "RangeNotSatisfiable", "listed-only file (fixture has no bytes)", head)
        headers = {"X-Repo-Commit": sha, "ETag": f'"{_git_blob_sha(content)}"', "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream"}
        rng = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
        if rng and not head:
            start = int(rng.group(1))
            end = min(int(rng.group(2)) if rng.group(2) else len(content) - 1, len(content) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(content)}"
            return self._send(206, content[start:end + 1], headers)
        if head:
            self.send_response(200)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            return
        self._send(200, content, headers)

    def _search(self, query: dict) -> None:
        st = self.state
        if st.list_delay and st._stop.wait(st.list_delay):
            return
        filters = [f.lower() for f in query.get("filter", [])]
        text = (query.get("search") or [""])[0].lower()
        pipeline = (query.get("pipeline_tag") or [""])[0]
        hits = [r for r in st.repos.values()
                if all(f in [t.lower() for t in r.tags] for f in filters) and text in r.repo_id.lower()
                and (not pipeline or r.pipeline_tag == pipeline)]
        if (query.get("sort") or [""])[0] == "downloads":
            hits.sort(key=lambda r: -r.downloads)
        limit = int((query.get("limit") or ["1000"])[0])
        start = int((query.get("cursor") or ["0"])[0])
        end = min(limit, start + st.page_size, len(hits))
        headers = {}
        if end < min(limit, len(hits)):  # more to come: the next page's URL carries every parameter
            params = [(k, v) for k, vs in query.items() if k != "cursor" for v in vs] + [("cursor", str(end))]
            headers["Link"] = f'<{st.url}/api/models?{urlencode(params)}>; rel="next"'
        self._json(200, [{"_id": r.sha[:24], "id": r.repo_id, "modelId": r.repo_id, "downloads": r.downloads,
                          "likes": r.likes, "tags": r.tags, "private": False, "pipeline_tag": r.pipeline_tag}
                         for r in hits[start:end]], headers)


def listing_repos(configs: dict[str, dict], count: int) -> list[FakeRepo]:
    """`count` text-generation repos cycling over real configs (name -> config.json), most downloaded
    first: org{i}/{name}-v{k}, each with its config.json and the Hub tags a transformers repo carries."""
    names = sorted(configs)
    repos = []
    for i in range(count):
        name = names[i % len(names)]
        data = json.dumps(configs[name]).encode()
        sha = hashlib.sha1(f"listing-{i}".encode()).hexdigest()
        repos.append(FakeRepo(f"org{i % 7}/{name}-v{i // len(names)}", sha, files={"config.json": data},
                              tags=["transformers", "safetensors", "text-generation", "conversational"],
                              downloads=10_000_000 - i * 1000, likes=count - i, pipeline_tag="text-generation"))
    return repos
