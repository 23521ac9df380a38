#!/usr/bin/env python3
"""Load test of `fitprobe serve`: N POST /v1/plan requests at C concurrent, against a real server
started here (uvicorn, loopback, any free port). Reports errors and p50/p90/p99/max latency.

    python scripts/serve_load.py [--requests 2000] [--concurrency 32] [--model llama-3.1-8b-instruct]
                                 [--gpu "RTX 4090"] [--server-concurrency 4]

Each request sizes the model for real (the plan path is not cached; the model lookup is), so the
throughput is the sizing core's on this machine's cores, and the latency includes waiting for a worker.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time


def start_server(server_concurrency: int) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "fitprobe", "serve", "--port", "0", "--concurrency", str(server_concurrency),
           "--timeout", "120"]
    env = {k: v for k, v in os.environ.items() if k != "FITPROBE_TOKEN"}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    for line in proc.stderr:
        if '"event": "listening"' in line:
            # keep reading its log (one access line per request), or a full pipe would stall the server
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, json.loads(line)["url"]
    raise SystemExit(f"the server did not start (exit {proc.wait()})")


async def load(url: str, body: dict, requests: int, concurrency: int) -> tuple[list[float], dict[int | str, int]]:
    import httpx

    latencies: list[float] = []
    statuses: dict[int | str, int] = {}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(requests):
        queue.put_nowait(i)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        async def worker():
            while not queue.empty():
                queue.get_nowait()
                started = time.perf_counter()
                try:
                    r = await client.post("/v1/plan", json=body)
                    code = r.status_code
                except httpx.HTTPError as exc:  # counted by kind: ReadTimeout, RemoteProtocolError, ...
                    code = type(exc).__name__
                latencies.append(time.perf_counter() - started)
                statuses[code] = statuses.get(code, 0) + 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, statuses


def percentile(values: list[float], p: float) -> float:
    ranked = sorted(values)
    return ranked[min(len(ranked) - 1, int(round(p / 100 * (len(ranked) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--model", default="llama-3.1-8b-instruct")
    parser.add_argument("--gpu", default="RTX 4090")
    parser.add_argument("--server-concurrency", type=int, default=4, help="the server's --concurrency")
    args = parser.parse_args()
    proc, url = start_server(args.server_concurrency)
    try:
        body = {"model": args.model, "gpu": args.gpu}
        asyncio.run(load(url, body, 8, 1))  # warm: catalog, error band, first sizing
        started = time.perf_counter()
        lat, statuses = asyncio.run(load(url, body, args.requests, args.concurrency))
        wall = time.perf_counter() - started
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    errors = sum(n for s, n in statuses.items() if s != 200)
    ms = [x * 1000 for x in lat]
    print(f"{args.requests} x POST /v1/plan {args.model} on {args.gpu}, {args.concurrency} concurrent "
          f"(server --concurrency {args.server_concurrency}, {os.cpu_count()} CPUs): {errors} errors "
          f"{statuses}; {args.requests / wall:,.0f} req/s over {wall:.1f} s; latency ms "
          f"p50 {statistics.median(ms):.0f}, p90 {percentile(ms, 90):.0f}, p99 {percentile(ms, 99):.0f}, "
          f"max {max(ms):.0f}; server exit {code} after SIGTERM")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
