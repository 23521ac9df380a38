"""The shared client loads its TLS trust store at the first TLS handshake (catalogs/hub_http.py):
a lookup on an http:// endpoint never loads it, and an https:// one still verifies the server."""
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from .conftest import SHA_A, fixture_bytes
from .hubserver import FakeRepo

RUN = """
import gc, json, os, sys
from fitprobe import cli
from fitprobe.catalogs import hub_http
from huggingface_hub import set_client_factory

def contexts():
    gc.unfreeze()  # cli.entry froze every object on its way out
    return [o for o in gc.get_objects() if isinstance(o, hub_http._TrustOnFirstHandshake)]

try:
    cli.entry()
except SystemExit as exc:
    code = exc.code
loaded_for_http = [c._context is not None for c in contexts()]
results = {}
for name, env_file in (("trusted", os.environ["TEST_CERT"]), ("untrusted", "")):
    if env_file:
        os.environ["SSL_CERT_FILE"] = env_file
    try:
        r = hub_http.shared_session().get(os.environ["TEST_URL"], timeout=10)
        results[name] = r.status_code
    except Exception as exc:
        results[name] = type(exc).__name__
    # the context is made once, with the environment of its first handshake: start over for the next
    set_client_factory(hub_http._client_trusting_on_first_handshake)
    os.environ.pop("SSL_CERT_FILE", None)
print(json.dumps({"code": code, "loaded_for_http": loaded_for_http, "https": results}), file=sys.stderr)
"""


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def https_server(tmp_path):
    """A loopback HTTPS server with a self-signed certificate for 127.0.0.1 (made with openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make the test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    server = HTTPServer(("127.0.0.1", 0), _Ok)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield cert, f"https://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def test_an_http_lookup_never_loads_the_trust_store_and_https_still_verifies(hub, https_server):
    cert, url = https_server
    hub.add(FakeRepo("Qwen/Qwen3-0.6B", SHA_A, files={"config.json": fixture_bytes("qwen3-0.6b.config.json")},
                     safetensors={"parameters": {"BF16": 751_632_384}, "total": 751_632_384}))
    argv = ["fitprobe", "plan", "Qwen/Qwen3-0.6B", "--gpu", "RTX 4090", "--json"]
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    proc = subprocess.run([sys.executable, "-c", f"import sys; sys.argv = {argv!r}\n" + RUN], capture_output=True,
                          text=True, timeout=120, env={**env, "TEST_CERT": str(cert), "TEST_URL": url})
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stderr
    assert result["loaded_for_http"] == [False]  # the lookup made the client, and never needed its trust store
    assert result["https"]["trusted"] == 200  # SSL_CERT_FILE read at the first handshake, as httpx reads it
    assert result["https"]["untrusted"] == "ConnectError"  # certificate verify failed: verification is on
