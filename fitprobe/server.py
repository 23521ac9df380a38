"""`fitprobe serve`: the HTTP JSON API of the local agent (Starlette; run by uvicorn in cmd_serve).

Every endpoint calls the Python API (`fitprobe.api`), which runs the same use cases as the CLI, and
answers with the same JSON contract; errors are RFC 9457 problem details carrying the CLI's error kind
and exit code. Sizing runs in worker threads under a capacity limit and a deadline; the probe and Hub
lookups are cached and deduplicated, so a burst of requests probes once and asks the Hub once per model.
"""
from __future__ import annotations

import hmac
import json
import logging
import threading
import time
from dataclasses import dataclass, field

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from fitprobe import __version__
from fitprobe import errors
from fitprobe.errors import FitprobeError, UsageError

log = logging.getLogger("fitprobe.serve")

# The HTTP status of each error kind (the CLI's exit code stays in the problem's `exit_code`).
HTTP_STATUS = {"usage": (400, "bad request"), "model_not_found": (404, "model not found"),
               "model_unreadable": (422, "model unreadable"), "hardware": (503, "hardware not probeable"),
               "retry_later": (503, "retry later"), "output": (500, "output failed"),
               "internal": (500, "internal error"), "interrupted": (503, "interrupted")}
PROBLEM_TYPE = "urn:fitprobe:error:"


@dataclass
class ServeSettings:
    """Limits of one server; the defaults suit one host's agent (docs/serve.md)."""

    token: str | None = None  # bearer token every endpoint but /healthz requires (when set)
    probe_ttl_s: float = 5.0  # a probe is reused this long (GET /v1/probe?refresh=1 takes a fresh one)
    model_ttl_s: float = 600.0  # a resolved model (Hub lookup) is reused this long
    concurrency: int = 4  # sizing requests run at once (worker threads)
    queue: int = 64  # requests that may wait for a worker; more get 503 and Retry-After
    request_timeout_s: float = 30.0  # then 504 (the Hub lookup has its own, shorter deadline)
    max_body_bytes: int = 64 * 1024
    watch: list[str] = field(default_factory=list)  # models whose fit right now /metrics reports


class Problem(Exception):
    """An HTTP-level error (401, 404, 405, 413, 503 busy, 504) as a problem with a kind."""

    def __init__(self, status: int, title: str, detail: str, kind: errors.Kind, headers: dict | None = None):
        super().__init__(detail)
        self.status, self.title, self.detail, self.kind, self.headers = status, title, detail, kind, headers or {}


def problem_response(status: int, title: str, detail: str, kind: errors.Kind, instance: str,
                     headers: dict | None = None) -> JSONResponse:
    body = {"type": PROBLEM_TYPE + kind.name, "title": title, "status": status, "detail": detail,
            "instance": instance, "kind": kind.name, "exit_code": kind.code}
    return JSONResponse(body, status_code=status, media_type="application/problem+json", headers=headers)


def error_response(exc: FitprobeError, instance: str) -> JSONResponse:
    status, title = HTTP_STATUS.get(exc.kind.name, (500, "internal error"))
    cause = type(exc.__cause__).__mro__ if exc.__cause__ is not None else ()
    if exc.kind is errors.RETRY_LATER and any(c.__name__ in ("TimeoutError", "HubTimeout") for c in cause):
        status, title = 504, "deadline passed"  # the Hub did not answer in time
    return problem_response(status, title, str(exc), exc.kind, instance,
                            {"Retry-After": "5"} if status in (503, 504) else None)


class Once:
    """A value computed by one caller at a time per key and reused for `ttl_s`: concurrent callers of
    the same key wait for the one computation (errors are not cached)."""

    def __init__(self, ttl_s: float, max_entries: int = 256):
        self.ttl_s, self.max_entries = ttl_s, max_entries
        self._lock = threading.Lock()
        self._keys: dict = {}  # key -> lock, so two models are computed in parallel
        self._values: dict = {}  # key -> (monotonic time, value)

    def get(self, key, compute, refresh: bool = False):
        with self._lock:
            key_lock = self._keys.setdefault(key, threading.Lock())
        with key_lock:
            hit = self._values.get(key)
            if hit and not refresh and time.monotonic() - hit[0] < self.ttl_s:
                return hit[1]
            try:
                value = compute()
            except BaseException:
                with self._lock:
                    if key not in self._values:  # a stream of bad names leaves nothing behind
                        self._keys.pop(key, None)
                raise
            with self._lock:
                if key not in self._values and len(self._values) >= self.max_entries:
                    oldest = next(iter(self._values))
                    self._values.pop(oldest)
                    self._keys.pop(oldest, None)
                self._values[key] = (time.monotonic(), value)
            return value

    def age(self, key) -> float | None:
        hit = self._values.get(key)
        return None if hit is None else time.monotonic() - hit[0]


class Agent:
    """What the endpoints share: settings, the probe and model caches, the worker limit, the metrics."""

    def __init__(self, settings: ServeSettings):
        from fitprobe.server_metrics import Metrics

        self.settings = settings
        self.probes = Once(settings.probe_ttl_s)
        self.models = Once(settings.model_ttl_s)
        self.watched = Once(settings.probe_ttl_s)  # a watched model's fit, judged on the probe of that moment
        self.workers = anyio.CapacityLimiter(settings.concurrency)
        self.metrics = Metrics()

    def probe(self, refresh: bool = False):
        """This machine, probed at most once per probe_ttl_s (fitprobe.usecases.Probed)."""
        return self.probes.get("probe", self._probe_now, refresh=refresh)

    def _probe_now(self):
        from fitprobe import usecases

        started = time.perf_counter()
        try:
            here = usecases.probed()
        except FitprobeError:
            self.metrics.probe_failures.inc()
            raise
        finally:
            self.metrics.probe_duration.observe(time.perf_counter() - started)
        self.metrics.set_gpus(here.report)
        return here

    def resolve(self, model: str, *, token: str | None = None, revision: str | None = None, lookup=None):
        """catalogs.resolve.resolve, cached: one Hub lookup (under its deadline) per (model, revision) for
        model_ttl_s; concurrent requests for the same model wait for that one."""
        from fitprobe.catalogs.resolve import resolve

        return self.models.get((model.strip(), revision),
                               lambda: resolve(model, token=token, revision=revision, lookup=lookup))

    async def run(self, fn, *args):
        """fn(*args) in a worker thread, under the capacity limit and the request deadline."""
        stats = self.workers.statistics()
        if stats.borrowed_tokens >= stats.total_tokens and stats.tasks_waiting >= self.settings.queue:
            raise Problem(503, "busy", f"{stats.tasks_waiting} requests are waiting: retry shortly",
                          errors.RETRY_LATER, {"Retry-After": "1"})
        try:
            with anyio.fail_after(self.settings.request_timeout_s):
                return await anyio.to_thread.run_sync(fn, *args, limiter=self.workers, abandon_on_cancel=True)
        except TimeoutError:
            raise Problem(504, "deadline passed", f"no answer within {self.settings.request_timeout_s:g} s "
                          "(server --timeout): retry later", errors.RETRY_LATER, {"Retry-After": "5"}) from None


def agent_of(request: Request) -> Agent:
    return request.app.state.agent


async def read_body(request: Request, schema: str = "PlanRequest"):
    """The body as a request record (PlanRequest or FitRequest): size-capped JSON, validated against the
    contract's request schema."""
    from pydantic import ValidationError

    from fitprobe.contract import request_adapter

    limit = agent_of(request).settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise Problem(413, "request too large", f"the body has {declared} bytes; at most {limit}", errors.USAGE)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise Problem(413, "request too large", f"the body has more than {limit} bytes", errors.USAGE)
    try:
        data = json.loads(body or b"null")
    except ValueError as exc:
        raise UsageError(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"the body must be a JSON object: a {schema} (GET /openapi.json)")
    try:
        return request_adapter(schema).validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise UsageError(f"{where}: {first['msg']}" + (f" (and {exc.error_count() - 1} more)"
                                                       if exc.error_count() > 1 else "")) from None


async def read_request(request: Request, *, need_gpu: bool):
    """The body as a PlanRequest (a catalog name or Hub id: no local paths)."""
    from fitprobe.api import request as plan_request

    req = await read_body(request)
    if need_gpu and not req.gpu:
        raise UsageError("plan needs gpu (a catalog GPU name or 'cpu'); POST /v1/check sizes on this machine")
    _refuse_local_paths(req.model)
    return plan_request(req, None, {})


def _refuse_local_paths(model: str) -> None:
    """The server sizes catalog names and Hub ids: a path would let a caller read this host's files."""
    text = model.strip()
    if text.startswith(("/", "~", ".", "\\")) or text.lower().endswith((".gguf", ".json")) or ":\\" in text:
        raise UsageError(f"'{text[:80]}' is a local path: the server sizes catalog names and Hub ids "
                         "(run the CLI on the file instead)")


def contract_response(output, gate_on: str = "idle") -> Response:
    """The PlanOutput as the CLI's --json prints it, with the CLI's exit code in a header."""
    from fitprobe.api import exit_code
    from fitprobe.contract import to_json

    return Response(to_json(output, indent=None), media_type="application/json",
                    headers={"X-Fitprobe-Exit-Code": str(exit_code(output, gate_on))})


async def healthz(request: Request) -> Response:
    from fitprobe.schema import SCHEMA_VERSION

    return JSONResponse({"status": "ok", "version": __version__, "schema_version": SCHEMA_VERSION})


async def get_probe(request: Request) -> Response:
    agent = agent_of(request)
    refresh = request.query_params.get("refresh", "") in ("1", "true", "yes")
    here = await agent.run(agent.probe, refresh)
    age = agent.probes.age("probe") or 0.0
    from fitprobe.record_json import dumps, record_data

    return Response(dumps(record_data(here.report), indent=None), media_type="application/json",
                    headers={"Age": str(int(age)), "Cache-Control": f"max-age={int(agent.settings.probe_ttl_s)}"})


async def post_plan(request: Request) -> Response:
    from fitprobe import api

    agent = agent_of(request)
    req = await read_request(request, need_gpu=True)
    return contract_response(await agent.run(lambda: api.plan(req, resolver=agent.resolve)))


async def post_check(request: Request) -> Response:
    from fitprobe import api

    agent = agent_of(request)
    req = await read_request(request, need_gpu=False)

    def answer():  # a named GPU (or 'cpu', whose RAM check reads itself) needs no probe
        here = None if req.gpu else agent.probe()
        return api.check(req, probe_result=here, resolver=agent.resolve)

    return contract_response(await agent.run(answer), req.gate_on)


async def post_fit(request: Request) -> Response:
    from fitprobe import api
    from fitprobe.contract import fit_to_json

    agent = agent_of(request)
    req = await read_body(request, "FitRequest")
    out = await agent.run(lambda: api.fit(req, probe_result=None if req.gpu else agent.probe()))
    runs = any(row.runs for row in out.rows)  # `fitprobe fit` exits 0 when a model runs, else 1
    return Response(fit_to_json(out, indent=None), media_type="application/json",
                    headers={"X-Fitprobe-Exit-Code": "0" if runs else "1"})


async def get_schema(request: Request) -> Response:
    from fitprobe.contract import json_schema

    return JSONResponse(json_schema())


async def get_openapi(request: Request) -> Response:
    from fitprobe.openapi import openapi_document

    return JSONResponse(openapi_document())


async def get_docs(request: Request) -> Response:
    from fitprobe.openapi import docs_page

    return HTMLResponse(docs_page())


async def get_metrics(request: Request) -> Response:
    agent = agent_of(request)
    await agent.run(refresh_metrics, agent)
    body, content_type = agent.metrics.exposition()
    return Response(body, media_type=content_type)


def refresh_metrics(agent: Agent) -> None:
    """Probe (cached) and judge each watched model right now, so a scrape sees this moment."""
    from fitprobe import api

    try:
        here = agent.probe()
    except FitprobeError:
        return  # counted in probe failures; the GPU gauges keep their last reading
    for model in agent.settings.watch:
        try:
            out = agent.watched.get(model, lambda m=model: api.check(m, probe_result=here,
                                                                             resolver=agent.resolve))
        except FitprobeError:
            agent.metrics.watch_failed(model)
            continue
        agent.metrics.set_watch(model, out)


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/v1/probe", get_probe, methods=["GET"]),
    Route("/v1/plan", post_plan, methods=["POST"]),
    Route("/v1/check", post_check, methods=["POST"]),
    Route("/v1/fit", post_fit, methods=["POST"]),
    Route("/v1/schema", get_schema, methods=["GET"]),
    Route("/openapi.json", get_openapi, methods=["GET"]),
    Route("/docs", get_docs, methods=["GET"]),
    Route("/metrics", get_metrics, methods=["GET"]),
]
PUBLIC_PATHS = ("/healthz",)  # no token needed: a liveness probe learns nothing about the host


class Guard:
    """ASGI middleware: bearer token, errors as problem details, access log and request metrics."""

    def __init__(self, app, agent: Agent):
        self.app, self.agent = app, agent
        self.token = agent.settings.token.encode() if agent.settings.token else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        path = scope["path"]
        route = path if any(r.path == path for r in ROUTES) else "other"
        sent = {"status": 500}

        async def tracking_send(message):
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
            await send(message)

        try:
            if self.token is not None and path not in PUBLIC_PATHS and not self._authorized(scope):
                raise Problem(401, "unauthorized", "this endpoint needs 'Authorization: Bearer <token>'",
                              errors.USAGE, {"WWW-Authenticate": 'Bearer realm="fitprobe"'})
            await self.app(scope, receive, tracking_send)
        except Problem as exc:
            await problem_response(exc.status, exc.title, exc.detail, exc.kind, path, exc.headers)(
                scope, receive, tracking_send)
        except FitprobeError as exc:
            await error_response(exc, path)(scope, receive, tracking_send)
        except Exception as exc:  # noqa: BLE001 - a bug: one problem document, the traceback in the log
            log.exception("internal error on %s", path)
            await problem_response(500, "internal error", f"{type(exc).__name__}: {exc}", errors.INTERNAL,
                                   path)(scope, receive, tracking_send)
        finally:
            elapsed = time.perf_counter() - started
            self.agent.metrics.observe_request(scope["method"], route, sent["status"], elapsed)
            client = scope.get("client") or ("-", 0)
            log.info(json.dumps({"event": "access", "client": client[0], "method": scope["method"], "path": path,
                                 "status": sent["status"], "ms": round(elapsed * 1000, 1)}))

    def _authorized(self, scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, given = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token)
        return False


def create_app(settings: ServeSettings | None = None) -> Starlette:
    """The ASGI application (uvicorn runs it; tests may too)."""
    agent = Agent(settings or ServeSettings())

    async def not_found(request: Request, exc) -> Response:
        status = getattr(exc, "status_code", 404)
        title = "method not allowed" if status == 405 else "not found"
        return problem_response(status, title, f"{request.method} {request.url.path}: {title} (GET /docs lists "
                                "the endpoints)", errors.USAGE, request.url.path)

    app = Starlette(routes=ROUTES, exception_handlers={404: not_found, 405: not_found})
    app.state.agent = agent
    app.add_middleware(Guard, agent=agent)
    return app
