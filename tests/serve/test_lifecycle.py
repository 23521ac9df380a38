"""The server as an operator meets it: the token off loopback, a port already taken, SIGTERM, and Hub
lookups through the loopback Hub (deduplicated, bounded by the request deadline, unavailable)."""
from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from hub.hubserver import FakeHub, FakeRepo

from .conftest import HOST, Server

TOKEN = "s3cret-token-for-tests-0123456789"
QWEN_CONFIG = Path(__file__).parent.parent / "hub" / "fixtures" / "qwen3-0.6b.config.json"


def run_host(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k != "FITPROBE_TOKEN" or env}
    return subprocess.run([sys.executable, str(HOST), *args], capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture(scope="module")
def guarded():
    s = Server(env={"FITPROBE_TOKEN": TOKEN})
    yield s
    s.stop()


def test_token_guards_every_endpoint_but_healthz(guarded):
    with guarded.client() as c:
        assert c.get("/healthz").status_code == 200
        for path in ("/v1/probe", "/metrics", "/openapi.json", "/v1/schema"):
            r = c.get(path)
            assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
            assert r.json()["kind"] == "usage"
        assert c.get("/v1/probe", headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code == 401
        assert c.get("/v1/probe", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
        ok = c.post("/v1/plan", json={"model": "qwen3-8b", "gpu": "RTX 4090"},
                    headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200
    assert guarded.log() and not any(TOKEN in line for line in guarded.lines)  # never logged


def test_a_second_server_on_the_same_port_fails_in_one_line(guarded):
    port = guarded.url.rsplit(":", 1)[1]
    r = run_host("--port", port)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"error: 127.0.0.1:{port} is already in use (another fitprobe serve?): "
                                             "stop it or choose --port"]


def test_sigterm_stops_gracefully():
    s = Server()
    with s.client() as c:
        assert c.get("/healthz").status_code == 200
    assert s.stop() == 0
    assert s.log()[-1] == {"event": "stopped"}


@pytest.mark.parametrize("args, words", [
    (["--host", "0.0.0.0"], "set a bearer token"),
    (["--host", "0.0.0.0", "--token", "short"], "at least 16 characters"),
])
def test_other_addresses_need_a_token(args, words):
    r = run_host(*args, "--port", "0")
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def hub():
    h = FakeHub().start()
    h.add(FakeRepo("Qwen/Qwen3-0.6B", "a" * 40, files={"config.json": QWEN_CONFIG.read_bytes()}))
    yield h
    h.stop()


@pytest.fixture(scope="module")
def hub_server(hub, tmp_path_factory):
    env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path_factory.mktemp("hf-home")),
           "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "0"}
    s = Server("--timeout", "3", env=env)
    yield s
    s.stop()


def test_hub_lookups_are_deduplicated_and_cached(hub, hub_server):
    body = {"model": "Qwen/Qwen3-0.6B", "gpu": "RTX 4090"}

    async def burst() -> list[int]:
        async with httpx.AsyncClient(base_url=hub_server.url, timeout=60) as c:
            return [r.status_code for r in await asyncio.gather(*(c.post("/v1/plan", json=body) for _ in range(12)))]

    assert asyncio.run(burst()) == [200] * 12
    configs = [r for r in hub.requests if r[0] == "GET" and r[1].endswith("/config.json")]
    assert len(configs) == 1  # twelve requests, one Hub lookup


def test_a_slow_hub_ends_in_504(hub, hub_server):
    hub.add(FakeRepo("Qwen/Qwen3-0.6B-Slow", "b" * 40, files={"config.json": QWEN_CONFIG.read_bytes()}))
    hub.info_delay = 30
    try:
        with hub_server.client() as c:
            r = c.post("/v1/plan", json={"model": "Qwen/Qwen3-0.6B-Slow", "gpu": "RTX 4090"})
    finally:
        hub.info_delay = 0
    assert r.status_code == 504 and r.headers["Retry-After"]
    assert r.json()["kind"] == "retry_later" and r.json()["exit_code"] == 75


def test_no_hub_is_503_retry_later(hub, hub_server):
    hub.stop()
    with hub_server.client() as c:
        r = c.post("/v1/plan", json={"model": "someorg/not-cached-model", "gpu": "RTX 4090"})
        cached = c.post("/v1/plan", json={"model": "Qwen/Qwen3-0.6B", "gpu": "RTX 4090"})
    assert r.status_code == 503, r.text
    assert r.json()["kind"] == "retry_later" and r.json()["exit_code"] == 75
    assert cached.status_code == 200  # resolved before the Hub went away
