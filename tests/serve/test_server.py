"""Every endpoint of the real server and its error paths, checked against the served OpenAPI schemas and
against the CLI's own output for the same request (one contract, one path)."""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from click.testing import CliRunner

from fitprobe.cli import main
from fitprobe.probe.types import MiB

H200_TOTAL = 143771 * MiB
BUSY_USED = 130_000 * MiB


def cli_json(*args) -> tuple[int, dict]:
    result = CliRunner().invoke(main, [*args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def without_notes_order(doc: dict) -> dict:
    return {**doc, "notes": sorted(doc["notes"])}


def test_healthz(client, conforms):
    r = client.get("/healthz")
    assert r.status_code == 200
    assert conforms(r.json(), "Health")["status"] == "ok"


def test_plan_is_the_cli_contract(client, conforms):
    body = {"model": "qwen3-8b", "gpu": "RTX 4090", "context": "max", "kv_cache": "q8_0"}
    r = client.post("/v1/plan", json=body)
    assert r.status_code == 200, r.text
    doc = conforms(r.json(), "PlanOutput")
    code, cli = cli_json("plan", "qwen3-8b", "--gpu", "RTX 4090", "--ctx", "max", "--kv-cache", "q8_0")
    assert doc == cli  # the same JSON the CLI prints
    assert r.headers["X-Fitprobe-Exit-Code"] == str(code) == "0"
    assert doc["recommended"]["context"] == doc["recommended"]["max_context"] > 8192


def test_plan_that_does_not_fit_says_so_in_the_exit_code_header(client, conforms):
    r = client.post("/v1/plan", json={"model": "llama-3.1-70b-instruct", "gpu": "RTX 3060", "quant": "BF16"})
    assert r.status_code == 200
    doc = conforms(r.json(), "PlanOutput")
    assert doc["verdict"]["status"] == "exceeds" and r.headers["X-Fitprobe-Exit-Code"] == "1"


def test_check_sizes_on_the_probed_gpu_idle_and_right_now(client, conforms):
    r = client.post("/v1/check", json={"model": "qwen3-30b-a3b", "require_context": 16384})
    assert r.status_code == 200, r.text
    doc = conforms(r.json(), "PlanOutput")
    dev = doc["hardware"]["devices"][0]
    assert doc["hardware"]["source"] == "probe" and dev["catalog_key"] == "h200-sxm"
    assert dev["memory_bytes"] == H200_TOTAL and dev["readings"]["memory_used_bytes"] == BUSY_USED
    assert doc["verdict"]["status"] == "fits"  # the idle H200 holds it
    assert doc["verdict_now"]["status"] == "exceeds"  # 130 GB are taken right now
    assert doc["gate"] is not None and any(c["name"] == "context" for c in doc["gate"]["checks"])
    assert r.headers["X-Fitprobe-Exit-Code"] == ("0" if doc["gate"]["passed"] else "1")


def test_probe_is_cached_and_refreshable(client, conforms):
    first = client.get("/v1/probe")
    assert first.status_code == 200
    report = conforms(first.json(), "ProbeReport")
    gpu = report["gpus"][0]
    assert gpu["name"] == "NVIDIA H200" and gpu["source"] == "nvml" and gpu["memory_used_bytes"] == BUSY_USED
    assert int(first.headers["Age"]) >= 0 and "max-age" in first.headers["Cache-Control"]
    fresh = client.get("/v1/probe", params={"refresh": "1"})
    assert fresh.status_code == 200 and fresh.headers["Age"] == "0"


def test_schema_is_the_cli_schema(client):
    r = client.get("/v1/schema")
    result = CliRunner().invoke(main, ["schema"])
    assert r.status_code == 200 and r.json() == json.loads(result.stdout)


def test_openapi_document_and_docs_page(client, openapi):
    assert openapi["openapi"].startswith("3.1")
    assert {"/healthz", "/v1/probe", "/v1/plan", "/v1/check", "/v1/schema", "/metrics"} <= set(openapi["paths"])
    plan = openapi["paths"]["/v1/plan"]["post"]
    assert plan["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/PlanRequest")
    assert {"400", "404", "413", "503", "504"} <= set(plan["responses"])
    page = client.get("/docs")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "POST /v1/check" in page.text and "<script" not in page.text  # self-contained


def test_metrics_report_gpus_requests_and_watched_models(client):
    client.post("/v1/plan", json={"model": "qwen3-8b", "gpu": "RTX 4090"})
    text = client.get("/metrics").text
    from prometheus_client.parser import text_string_to_metric_families

    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(text) for s in fam.samples}

    def value(metric, **labels):
        return samples[(metric, tuple(sorted(labels.items())))]

    gpu = {"gpu": "0", "name": "NVIDIA H200", "uuid": "GPU-00000000-0000-0000-0000-000000000000"}
    assert value("fitprobe_gpu_memory_total_bytes", **gpu) == H200_TOTAL
    assert value("fitprobe_gpu_memory_used_bytes", **gpu) == BUSY_USED
    assert value("fitprobe_gpu_memory_free_bytes", **gpu) == H200_TOTAL - 614 * MiB - BUSY_USED
    assert value("fitprobe_probe_duration_seconds_count") >= 1
    assert value("fitprobe_http_requests_total", method="POST", route="/v1/plan", status="200") >= 1
    assert value("fitprobe_http_request_duration_seconds_count", method="POST", route="/v1/plan") >= 1
    # the 8B model fits in the 13 GB left; the 30B MoE does not; an unknown name is an error state
    assert value("fitprobe_model_fit", model="qwen3-8b", fitprobe_model_fit="fits") == 1
    assert value("fitprobe_model_margin_bytes", model="qwen3-8b") > 0
    assert value("fitprobe_model_fit", model="qwen3-30b-a3b", fitprobe_model_fit="exceeds") == 1
    assert value("fitprobe_model_margin_bytes", model="qwen3-30b-a3b") < 0
    assert value("fitprobe_model_fit", model="no-such-model-xyz", fitprobe_model_fit="error") == 1


@pytest.mark.parametrize("body, status, kind, cli_args", [
    ({"model": "no-such-model-xyz", "gpu": "RTX 4090"}, 404, "model_not_found",
     ["plan", "no-such-model-xyz", "--gpu", "RTX 4090"]),
    ({"model": "qwen3-8b", "gpu": "RTX 4060 Ti"}, 400, "usage", ["plan", "qwen3-8b", "--gpu", "RTX 4060 Ti"]),
    ({"model": "qwen3-8b", "gpu": "RTX 4090", "quant": "Q9_Z"}, 400, "usage",
     ["plan", "qwen3-8b", "--gpu", "RTX 4090", "-q", "Q9_Z"]),
    ({"model": "qwen3-8b", "gpu": "cpu", "engine": "vllm"}, 400, "usage",
     ["plan", "qwen3-8b", "--gpu", "cpu", "--engine", "vllm"]),
    ({"model": "qwen3-8b", "gpu": "RTX 4090", "context": 0}, 400, "usage",
     ["plan", "qwen3-8b", "--gpu", "RTX 4090", "--ctx", "0"]),
])
def test_errors_match_the_cli(client, conforms, body, status, kind, cli_args):
    r = client.post("/v1/plan", json=body)
    assert r.status_code == status and r.headers["content-type"] == "application/problem+json"
    problem = conforms(r.json(), "Problem")
    result = CliRunner().invoke(main, cli_args)
    assert problem["kind"] == kind and problem["exit_code"] == result.exit_code
    assert problem["status"] == status and problem["type"] == f"urn:fitprobe:error:{kind}"
    assert result.stderr.strip() == f"error: {problem['detail']}"  # the CLI's very line


@pytest.mark.parametrize("path, content, status, words", [
    ("/v1/plan", b"{not json", 400, "not JSON"),
    ("/v1/plan", b"[1, 2]", 400, "JSON object"),
    ("/v1/plan", json.dumps({"model": "qwen3-8b"}).encode(), 400, "plan needs gpu"),
    ("/v1/plan", json.dumps({"model": "qwen3-8b", "gpu": "RTX 4090", "gpus": "two"}).encode(), 400, "gpus"),
    ("/v1/plan", json.dumps({"model": "qwen3-8b", "gpu": "RTX 4090", "colour": "red"}).encode(), 400, "colour"),
    ("/v1/check", json.dumps({"model": "/etc/passwd.json"}).encode(), 400, "local path"),
    ("/v1/check", json.dumps({"model": "x" * 70_000}).encode(), 413, "at most"),
])
def test_bad_requests(client, conforms, path, content, status, words):
    r = client.post(path, content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == status, r.text
    problem = conforms(r.json(), "Problem")
    assert words in problem["detail"] and problem["kind"] == "usage" and problem["exit_code"] == 2


def test_unknown_route_and_method(client, conforms):
    assert conforms(client.get("/v2/plan").json(), "Problem")["status"] == 404
    r = client.get("/v1/plan")
    assert r.status_code == 405 and conforms(r.json(), "Problem")["kind"] == "usage"


def test_access_log_is_structured(server, client):
    client.get("/healthz")
    lines = [x for x in server.log() if x.get("event") == "access"]
    assert any(x["path"] == "/healthz" and x["status"] == 200 and x["ms"] >= 0 for x in lines)
    assert all(set(x) == {"event", "client", "method", "path", "status", "ms"} for x in lines)


def test_concurrent_plans_all_succeed(server):
    """A bounded burst (the full 2,000-request run is scripts/serve_load.py)."""
    body = {"model": "llama-3.1-8b-instruct", "gpu": "RTX 4090"}

    async def burst(n: int, width: int) -> list[int]:
        limit = asyncio.Semaphore(width)
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as c:
            async def one():
                async with limit:
                    return (await c.post("/v1/plan", json=body)).status_code
            return await asyncio.gather(*(one() for _ in range(n)))

    codes = asyncio.run(burst(64, 32))
    assert codes == [200] * 64


def test_fit_is_the_cli_contract(client, conforms):
    r = client.post("/v1/fit", json={"gpu": "RTX 4090", "ram_gib": 64, "use_case": "coding", "limit": 5})
    assert r.status_code == 200, r.text
    doc = conforms(r.json(), "FitOutput")
    code, cli = cli_json("fit", "--gpu", "RTX 4090", "--ram-gib", "64", "--use-case", "coding", "--limit", "5")
    assert doc == cli and r.headers["X-Fitprobe-Exit-Code"] == str(code) == "0"
    assert 0 < len(doc["rows"]) <= 5 and all("coding" in row["tags"] for row in doc["rows"])


def test_fit_on_the_probed_gpu(client, conforms):
    r = client.post("/v1/fit", json={"limit": 3})
    doc = conforms(r.json(), "FitOutput")
    assert doc["hardware"]["source"] == "probe" and doc["hardware"]["name"].endswith("H200")
    bad = client.post("/v1/fit", json={"sort": "colour"})
    assert bad.status_code == 400 and "--sort must be one of" in conforms(bad.json(), "Problem")["detail"]


def test_check_hardware_gate_and_idle_gating(client, conforms):
    r = client.post("/v1/check", json={"model": "qwen3-8b", "expect_gpus": 2})
    assert r.status_code == 503
    problem = conforms(r.json(), "Problem")
    assert problem["kind"] == "hardware" and problem["exit_code"] == 4 and "--expect-gpus 2" in problem["detail"]
    busy = {"model": "qwen3-30b-a3b"}
    now = client.post("/v1/check", json=busy)
    idle = client.post("/v1/check", json={**busy, "gate_on": "idle"})
    assert now.json()["verdict_now"]["status"] == "exceeds" and now.headers["X-Fitprobe-Exit-Code"] == "1"
    assert idle.headers["X-Fitprobe-Exit-Code"] == "0"  # judged on the idle H200, as --gate-on idle
