"""The real server in a subprocess (tests/serve/gpu_host.py: `fitprobe serve` on a stand-in H200),
driven over loopback HTTP with httpx; responses are checked against the server's own OpenAPI schemas."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

HOST = Path(__file__).parent / "gpu_host.py"
START_TIMEOUT_S = 60


class Server:
    """One `fitprobe serve` process; its stderr (JSON log lines) is collected as it runs."""

    def __init__(self, *args: str, env: dict | None = None):
        full_env = {**os.environ, **(env or {})}
        for var in ("FITPROBE_TOKEN", "HF_TOKEN", "CUDA_VISIBLE_DEVICES"):
            if var not in (env or {}):
                full_env.pop(var, None)
        self.proc = subprocess.Popen([sys.executable, str(HOST), "--port", "0", *args], env=full_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.url = None
        ready = threading.Event()

        def drain():
            for line in self.proc.stderr:
                self.lines.append(line.rstrip("\n"))
                if '"event": "listening"' in line:
                    self.url = json.loads(line)["url"]
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        ready.wait(START_TIMEOUT_S)

    def client(self, **kw) -> httpx.Client:
        assert self.url, "\n".join(self.lines)
        return httpx.Client(base_url=self.url, timeout=60, **kw)

    def stop(self, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def log(self) -> list[dict]:
        time.sleep(0.2)  # the access line is written after the response
        return [json.loads(x) for x in self.lines if x.startswith("{")]


@pytest.fixture(scope="module")
def server():
    s = Server("--watch", "qwen3-8b,qwen3-30b-a3b", "--watch", "no-such-model-xyz",
               env={"FAKE_GPU_USED_MIB": "130000"})
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    with server.client() as c:
        yield c


@pytest.fixture(scope="module")
def openapi(client) -> dict:
    return client.get("/openapi.json").json()


@pytest.fixture(scope="module")
def conforms(openapi):
    """conforms(data, "PlanOutput") raises unless `data` matches that schema of the served document."""
    from jsonschema import Draft202012Validator

    def check(data, name: str):
        schema = {"$ref": f"#/components/schemas/{name}", "components": openapi["components"]}
        Draft202012Validator(schema).validate(data)
        return data

    return check
