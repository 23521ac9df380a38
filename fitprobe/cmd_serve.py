"""`fitprobe serve`: run the local agent's HTTP API (fitprobe/server.py) under uvicorn.

Only this command imports Starlette, uvicorn and prometheus-client (the `serve` extra), so no other
command pays for them at start-up. Safe by default: it listens on 127.0.0.1; any other address needs
a bearer token. docs/serve.md has the endpoints, a systemd unit and a container recipe.
"""
from __future__ import annotations

import ipaddress

import click

from fitprobe.estimator.message import msg
from fitprobe.i18n import N_

MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


@click.command("serve", help=N_("Serve the HTTP API: /v1/plan, /v1/check, /v1/probe, /v1/schema, /metrics, /docs."))
@click.option("--host", default="127.0.0.1", show_default=True,
              help=N_("address to listen on; anything but loopback needs --token"))
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help=N_("0: any free port"))
@click.option("--token", envvar="FITPROBE_TOKEN", default=None, show_envvar=True,
              help=N_("bearer token every endpoint but /healthz requires (prefer the environment variable)"))
@click.option("--watch", multiple=True, metavar="MODEL",
              help=N_("report this model's fit right now in /metrics (repeat, or comma-separate)"))
@click.option("--probe-ttl", type=click.FloatRange(0, 3600), default=5.0, show_default=True,
              help=N_("seconds a probe is reused"))
@click.option("--concurrency", type=click.IntRange(1, 256), default=4, show_default=True,
              help=N_("sizing requests run at once"))
@click.option("--timeout", "request_timeout", type=click.FloatRange(0.1, 3600), default=30.0, show_default=True,
              help=N_("seconds a request may take (then 504)"))
@click.option("--max-body", type=click.IntRange(256, 16 << 20), default=64 * 1024, show_default=True,
              help=N_("largest request body, bytes (then 413)"))
def serve_command(host, port, token, watch, probe_ttl, concurrency, request_timeout, max_body):
    from fitprobe.cli import EXIT_USAGE, fail

    if token is not None and len(token.strip()) < MIN_TOKEN_CHARS:
        fail(msg("the bearer token must have at least %(min_token_chars)s characters",
                 min_token_chars=MIN_TOKEN_CHARS), EXIT_USAGE)
    if not is_loopback(host) and not token:
        fail(msg("listening on %(host)s exposes this host's hardware and sizing to the network: set a bearer token "
                 "with FITPROBE_TOKEN (or --token), or keep --host 127.0.0.1", host=host), EXIT_USAGE)
    try:
        from fitprobe.server import ServeSettings, create_app
    except ImportError as exc:
        fail(msg("fitprobe serve needs the serve extra (%(name)s is missing): pip install 'fitprobe[serve]'",
                 name=exc.name),
             EXIT_USAGE)
    models = [m.strip() for item in watch for m in item.split(",") if m.strip()]
    settings = ServeSettings(token=token.strip() if token else None, probe_ttl_s=probe_ttl,
                             concurrency=concurrency, request_timeout_s=request_timeout, max_body_bytes=max_body,
                             watch=models)
    sock = listen(host, port)
    run(create_app(settings), sock, settings)


def listen(host: str, port: int):
    """The listening socket, bound here so a port in use is one clear line, not a uvicorn traceback."""
    import errno
    import socket

    from fitprobe.cli import EXIT_USAGE, fail

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart over TIME_WAIT, never over a listener
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            fail(msg("%(host)s:%(port)s is already in use (another fitprobe serve?): stop it or choose --port",
                     host=host, port=port), EXIT_USAGE)
        fail(msg("cannot listen on %(host)s:%(port)s: %(reason)s", host=host, port=port, reason=exc.strerror),
             EXIT_USAGE)
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def run(app, sock, settings) -> None:
    """uvicorn on `sock` until SIGTERM/SIGINT: it stops accepting, finishes requests in flight (up to
    10 s), then exits 0. Logs are JSON lines on stderr, without headers, bodies or tokens."""
    import json
    import logging
    import signal
    import sys

    import uvicorn

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    for name, level in (("fitprobe.serve", logging.INFO), ("uvicorn.error", logging.WARNING)):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    logging.getLogger("fitprobe.serve").info(json.dumps({
        "event": "listening", "url": f"http://{shown}:{port}", "auth": "bearer" if settings.token else "none",
        "watch": settings.watch}))
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", server_header=False,
                            limit_concurrency=settings.concurrency + settings.queue + 16,
                            timeout_graceful_shutdown=10, h11_max_incomplete_event_size=16 * 1024)
    # uvicorn stops gracefully on SIGTERM, then raises the signal again for the handler it found: this
    # one, so a requested stop ends with status 0 and a last log line rather than death by signal.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        logging.getLogger("fitprobe.serve").info(json.dumps({"event": "stopped"}))
