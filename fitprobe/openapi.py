"""The server's OpenAPI 3.1 document, built from the contract's own schemas (PlanRequest, PlanOutput,
FitRequest, FitOutput, ProbeReport) so the API documents exactly what `--json` prints, and a self-contained docs page
(no scripts or assets from elsewhere: the agent may run on a host without internet)."""
from __future__ import annotations

import html
import json
from functools import lru_cache

from fitprobe import __version__

REF = "#/components/schemas/{model}"

PROBLEM = {
    "type": "object", "title": "Problem",
    "description": "RFC 9457 problem details, with the CLI's error kind and exit code",
    "required": ["type", "title", "status", "detail", "kind", "exit_code"],
    "properties": {
        "type": {"type": "string", "description": "urn:fitprobe:error:<kind>"},
        "title": {"type": "string"}, "status": {"type": "integer"},
        "detail": {"type": "string", "description": "the one-line message the CLI prints"},
        "instance": {"type": "string", "description": "the request path"},
        "kind": {"type": "string", "description": "usage, model_not_found, model_unreadable, hardware, "
                                                  "retry_later, output, internal (fitprobe/errors.py)"},
        "exit_code": {"type": "integer", "description": "what the CLI exits with for this kind"},
    },
    "additionalProperties": False,
}

HEALTH = {"type": "object", "title": "Health", "required": ["status", "version", "schema_version"],
          "properties": {"status": {"const": "ok"}, "version": {"type": "string"},
                         "schema_version": {"type": "string"}}}

# (method, path, summary, request schema, 200 schema, media type, error statuses)
ENDPOINTS = [
    ("get", "/healthz", "Liveness: the server answers (no token needed).", None, "Health", "application/json", []),
    ("get", "/v1/probe", "What this machine has (cached for --probe-ttl seconds; ?refresh=1 probes now).", None,
     "ProbeReport", "application/json", [401, 503, 504]),
    ("post", "/v1/plan", "Size a model on named hardware: `fitprobe plan --json`.", "PlanRequest", "PlanOutput",
     "application/json", [400, 401, 404, 413, 422, 503, 504]),
    ("post", "/v1/check", "Size a model on this machine, idle and right now, with the gate's requirements and "
                          "verdict: `fitprobe check --json`.", "PlanRequest", "PlanOutput", "application/json",
     [400, 401, 404, 413, 422, 503, 504]),
    ("post", "/v1/fit", "Which catalog models run on named hardware or this machine, ranked: `fitprobe fit "
                        "--json`.", "FitRequest", "FitOutput", "application/json", [400, 401, 413, 503, 504]),
    ("get", "/v1/schema", "The JSON Schema of PlanOutput: `fitprobe schema`.", None, None, "application/json",
     [401]),
    ("get", "/metrics", "Prometheus metrics: GPU memory, probe, requests, --watch models' fit right now.", None,
     None, "text/plain", [401]),
    ("get", "/openapi.json", "This document.", None, None, "application/json", [401]),
    ("get", "/docs", "The endpoints, as a page.", None, None, "text/html", [401]),
]


def _hoist(schema: dict, components: dict) -> dict:
    """Move a pydantic schema's $defs into the components; return the schema itself."""
    components.update(schema.pop("$defs", {}))
    return schema


@lru_cache(maxsize=1)
def openapi_document() -> dict:
    from pydantic import TypeAdapter

    from fitprobe.contract import adapter, fit_adapter, request_adapter
    from fitprobe.probe.types import ProbeReport
    from fitprobe.schema import SCHEMA_VERSION

    components: dict = {"Problem": PROBLEM, "Health": HEALTH}
    components["PlanRequest"] = _hoist(request_adapter().json_schema(ref_template=REF), components)
    components["PlanOutput"] = _hoist(adapter().json_schema(ref_template=REF, mode="serialization"), components)
    components["FitRequest"] = _hoist(request_adapter("FitRequest").json_schema(ref_template=REF), components)
    components["FitOutput"] = _hoist(fit_adapter().json_schema(ref_template=REF, mode="serialization"), components)
    components["ProbeReport"] = _hoist(TypeAdapter(ProbeReport).json_schema(ref_template=REF, mode="serialization"),
                                       components)
    paths: dict = {}
    for method, path, summary, body, ok, media, failures in ENDPOINTS:
        ok_content = {media: {"schema": {"$ref": REF.format(model=ok)} if ok else {}}}
        op = {"summary": summary, "operationId": f"{method}_{path.strip('/').replace('/', '_').replace('.', '_')}",
              "responses": {"200": {"description": "OK", "content": ok_content}}}
        if body:
            op["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": REF.format(model=body)}}}}
            op["responses"]["200"]["headers"] = {"X-Fitprobe-Exit-Code": {
                "description": "the CLI's exit code for this answer: 0 fits or tight, 1 does not fit or a "
                               "requirement fails", "schema": {"type": "integer"}}}
        if path == "/v1/probe":
            op["parameters"] = [{"name": "refresh", "in": "query", "required": False,
                                 "description": "1: probe now instead of reusing the cached probe",
                                 "schema": {"type": "string", "enum": ["0", "1"]}}]
        for status in failures:
            op["responses"][str(status)] = {"description": STATUS_TEXT[status], "content": {
                "application/problem+json": {"schema": {"$ref": REF.format(model="Problem")}}}}
        if path != "/healthz":
            op["security"] = [{"bearer": []}]
        paths.setdefault(path, {})[method] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "fitprobe agent", "version": __version__,
                 "description": f"Will this LLM run on this host? JSON contract {SCHEMA_VERSION} "
                                "(docs/json-contract.md); errors are RFC 9457 problem details."},
        "paths": paths,
        "components": {"schemas": components,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                      "description": "required when the server was started "
                                                                     "with --token / FITPROBE_TOKEN"}}},
    }


STATUS_TEXT = {400: "usage error (kind usage)", 401: "missing or wrong bearer token",
               404: "model not found (kind model_not_found)", 413: "body larger than the server's limit",
               422: "model files unreadable (kind model_unreadable)",
               503: "hardware not probeable, Hub unavailable, or the server is busy",
               504: "the request's deadline passed"}


def docs_page() -> str:
    doc = openapi_document()
    rows = []
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            codes = ", ".join(op["responses"])
            rows.append(f"<tr><td><code>{method.upper()} {html.escape(path)}</code></td>"
                        f"<td>{html.escape(op['summary'])}</td><td>{html.escape(body.get('$ref', '-').split('/')[-1])}"
                        f"</td><td>{codes}</td></tr>")
    example = json.dumps({"model": "qwen3-8b", "gpu": "RTX 4090", "context": "max"})
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>fitprobe agent API</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
td,th{{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}}
pre{{background:#f4f4f4;padding:.6em}}</style></head><body>
<h1>fitprobe agent {html.escape(doc['info']['version'])}</h1><p>{html.escape(doc['info']['description'])}</p>
<table><tr><th>endpoint</th><th>what</th><th>body</th><th>responses</th></tr>{''.join(rows)}</table>
<h2>Example</h2>
<pre>curl -s -H 'Content-Type: application/json' -d '{html.escape(example)}' http://127.0.0.1:8765/v1/plan</pre>
<p>The full schemas: <a href="/openapi.json">/openapi.json</a> (request: PlanRequest, answer: PlanOutput,
errors: Problem).</p></body></html>"""
