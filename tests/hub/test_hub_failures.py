"""A misbehaving Hub, through the real client: every failure ends in time, with its own exit code and
one line naming it (issue #12, kind 4), and a lookup fetches what it needs at once (issue #18)."""
import json
import os
import time

import pytest
from click.testing import CliRunner

from fitprobe.cli import main

from .conftest import SHA_A, fixture_bytes, safetensors_bytes
from .hubserver import FakeRepo, Fault

REPO = "someorg/Qwen3-0.6B-copy"  # not in the bundled catalog: no fallback hides a failure
CONFIG = fixture_bytes("qwen3-0.6b.config.json")


def add(hub, **files):
    return hub.add(FakeRepo(REPO, SHA_A, files={"config.json": CONFIG, **files},
                            safetensors={"parameters": {"BF16": 751_632_384}, "total": 751_632_384}))


def plan(*extra, env=None):
    t0 = time.monotonic()
    r = CliRunner().invoke(main, ["plan", REPO, "--gpu", "RTX 4090", *extra], env=env)
    return r, time.monotonic() - t0


def one_line(r) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert "Traceback" not in r.output
    return lines[0]


def test_slow_config_ends_at_the_deadline_with_retry_later(hub):
    add(hub)
    hub.faults.append(Fault(path="/resolve/main/config.json", delay=14))
    r, took = plan("--timeout", "1")
    assert r.exit_code == 75 and "did not answer within 1 s" in one_line(r)
    assert took < 8  # not the ~90 s of the client's own retries (slack for a loaded test machine)


def test_trickled_body_ends_at_the_deadline(hub):
    add(hub)
    hub.faults.append(Fault(path="/resolve/main/config.json", method="GET", body=CONFIG, trickle=0.5))
    r, took = plan("--timeout", "1.5")
    assert r.exit_code == 75 and "did not answer within 1.5 s" in one_line(r) and took < 9


@pytest.mark.parametrize("body", [b"{}", b"[]", b'{"id": 5, "siblings": "none"}', b"<html>proxy login</html>"])
def test_model_info_that_is_not_model_info_is_retry_later(hub, body):
    add(hub)
    hub.faults.append(Fault(path="^/api/models/", body=body))
    r, _ = plan()
    line = one_line(r)
    assert r.exit_code == 75 and ("not a Hub answer" in line or "non-JSON" in line), line


def test_redirect_loop(hub):
    add(hub)
    hub.faults.append(Fault(path="^/api/models/", redirect_loop=True))
    r, _ = plan()
    line = one_line(r)
    assert r.exit_code == 75 and ("loop" in line), line


def test_content_encoding_the_body_does_not_have(hub):
    add(hub)
    hub.faults.append(Fault(path="^/api/models/", body=b'{"id": "x"}', encoding="gzip"))
    r, _ = plan()
    line = one_line(r)
    assert r.exit_code == 75 and "encoding" in line, line


def test_server_error_is_retry_later_and_named(hub):
    add(hub)
    hub.faults.append(Fault(path="^/api/models/", status=503))
    r, _ = plan()
    line = one_line(r)
    assert r.exit_code == 75 and "HTTP 503 (server error)" in line and "retry later" in line


def test_config_missing_from_a_repo_that_lists_it(hub):
    add(hub)
    hub.faults.append(Fault(path="/resolve/main/config.json", status=404, error_code="EntryNotFound"))
    r, _ = plan()
    line = one_line(r)
    assert r.exit_code == 3 and "does not serve (404)" in line and REPO in line


def test_corrupt_safetensors_header_names_the_repo(hub):
    good = safetensors_bytes({"w": ("BF16", [4, 4])})
    hub.add(FakeRepo(REPO, SHA_A, files={"config.json": CONFIG, "model.safetensors": good[:8] + b"{not json" + good[17:]}))
    r, _ = plan()
    line = one_line(r)
    assert r.exit_code == 3 and "safetensors header" in line and "corrupt" in line


def test_endpoint_with_a_port_out_of_range_is_a_usage_error(hub):
    r, _ = plan(env={"HF_ENDPOINT": "http://127.0.0.1:99999"})
    assert r.exit_code == 2 and "HF_ENDPOINT" in one_line(r)


def test_token_is_normalised_like_huggingface_hub(hub):
    repo = add(hub)
    repo.gated = True
    hub.accepted_tokens.add("hf_mounted_secret")
    r, _ = plan(env={"HF_TOKEN": "hf_mounted_secret\n"})  # a mounted secret ends in a newline
    assert r.exit_code == 0, r.output
    r, _ = plan("--token", "hf_tökén")
    line = one_line(r)
    assert r.exit_code == 2 and "non-ASCII" in line and "tökén" not in r.output


def test_unwritable_cache_is_named(hub, tmp_path):
    add(hub)
    home = tmp_path / "ro-home"
    home.mkdir()
    home.chmod(0o500)
    try:
        if os.access(home, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        r, _ = plan(env={"HF_HOME": str(home)})
        line = one_line(r)
        assert r.exit_code == 2 and "Hugging Face cache" in line and "HF_HOME" in line
    finally:
        home.chmod(0o700)


def test_unwritable_cache_as_root_is_named_too(hub, tmp_path):
    """Root ignores permissions: a cache path through a regular file cannot be created by anyone."""
    add(hub)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r, _ = plan(env={"HF_HOME": str(blocker / "hf")})
    line = one_line(r)
    assert r.exit_code == 2 and "Hugging Face cache" in line


def test_client_logs_stay_off_screen_and_verbose_counts_requests(hub):
    add(hub)
    r, _ = plan("-v")
    assert r.exit_code == 0
    # model info (file sizes and safetensors counts in it) and config.json, at once: two requests, one round trip
    assert "hub: 2 request(s) in" in r.stderr
    assert [(m, p.split("?")[0]) for m, p, _ in hub.requests] in (
        [("GET", f"/api/models/{REPO}"), ("GET", f"/{REPO}/resolve/main/config.json")],
        [("GET", f"/{REPO}/resolve/main/config.json"), ("GET", f"/api/models/{REPO}")])
    r, _ = plan("-v")
    assert "hub: 2 request(s) in" in r.stderr
    hub.faults.append(Fault(path="/resolve/main/config.json", status=500))  # the client logs its fallback
    r, _ = plan("--json")
    assert r.exit_code == 0 and r.stderr == ""  # the cached config.json serves; nothing else on screen
    json.loads(r.stdout)


def test_config_and_model_info_are_fetched_at_once(hub):
    """Each answer waits until the other request has arrived: one after the other would deadlock (503)."""
    add(hub)
    hub.faults += [Fault(path="^/api/models/", wait_for="/resolve/main/config.json"),
                   Fault(path="/resolve/main/config.json", method="HEAD", wait_for="^/api/models/")]
    r, _ = plan("--json")
    assert r.exit_code == 0, r.output


def test_safetensors_headers_are_read_at_once(hub):
    shards = {f"model-0000{i}-of-00003.safetensors": safetensors_bytes({f"w{i}": ("BF16", [1024, 1024])})
              for i in (1, 2, 3)}
    index = {"weight_map": {f"w{i}": name for i, name in enumerate(shards, 1)}}
    hub.add(FakeRepo(REPO, SHA_A, files={"config.json": CONFIG, "model.safetensors.index.json":
                                         json.dumps(index).encode(), **shards}))
    for i in (1, 2, 3):  # shard i answers only once shard i+1 was asked for
        hub.faults.append(Fault(path=f"model-0000{i}-of", method="GET",
                                wait_for=f"model-0000{i % 3 + 1}-of"))
    r, _ = plan("--json", "--quant", "BF16")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["memory"]["weights_source"] == "exact from checkpoint"
    assert any("3 safetensors header(s)" in n for n in data["notes"])


def test_a_failing_hub_prints_one_line_in_a_real_process(hub):
    """The client's own log lines go to the process's stderr (not CliRunner's): run fitprobe for real.
    config.json answers 503: the client would log retries for ~90 s; fitprobe gives up after two attempts."""
    import subprocess
    import sys

    add(hub)
    hub.faults.append(Fault(path="/resolve/main/config.json", status=503))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "fitprobe", "plan", REPO, "--gpu", "RTX 4090"], capture_output=True,
                          text=True, timeout=120, env={**os.environ})
    took = time.monotonic() - t0
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 75 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert took < 10 and proc.stdout == ""


def test_a_slow_lookup_calls_its_progress_callback_once(hub):
    from fitprobe.catalogs.hub import fetch_model
    from fitprobe.deadline import Lookup

    add(hub)
    calls = []
    fetch_model(REPO, lookup=Lookup(on_slow=lambda: calls.append(1), slow_after=5.0))
    assert calls == []  # a fast lookup prints nothing
    hub.faults.append(Fault(path="^/api/models/", delay=0.6))
    lookup = Lookup(on_slow=lambda: calls.append(1), slow_after=0.2)
    fetch_model(REPO, lookup=lookup)
    assert calls == [1] and lookup.requests == 2  # model info, config.json HEAD (cached since the first)


def test_the_progress_line_is_for_terminals_only(monkeypatch):
    import io

    from fitprobe import commands

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    lookup = commands.hub_lookup("org/name", {"hub_timeout": 15.0})
    lookup.on_slow()
    lookup.start()
    commands.end_lookup(lookup)
    assert err.getvalue().startswith("asking the Hugging Face Hub about org/name (at most 15 s, --timeout)")
    assert err.getvalue().endswith("\r\033[K")
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert commands.hub_lookup("org/name", {}).on_slow is None


def test_impossible_sizes_in_a_hub_answer_are_not_sized(hub):
    repo = add(hub)
    repo.safetensors = {"parameters": {"BF16": -751_632_384}, "total": -1}
    r, _ = plan("--quant", "BF16")
    assert r.exit_code == 75 and "impossible parameter count" in one_line(r)
    repo.safetensors = {"parameters": {"BF16": 751_632_384}, "total": 751_632_384}
    r, _ = plan("--quant", "BF16", "--json")  # now a good answer: its config.json is cached
    assert r.exit_code == 0
    repo.safetensors = {"parameters": {"BF16": 10**20}, "total": 10**20}
    r, _ = plan("--quant", "BF16", "--json")  # refused again: the snapshot cached before serves, sized by formula
    data = json.loads(r.stdout)
    assert r.exit_code == 0 and data["memory"]["weights_source"] != "exact from checkpoint"
    assert any("impossible parameter count" in n for n in data["notes"])
