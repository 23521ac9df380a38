"""The worker limit and the request deadline of the server's Agent, on real threads."""
from __future__ import annotations

import threading
import time

import anyio
import pytest

from fitprobe.server import Agent, Once, Problem, ServeSettings


def test_a_full_queue_is_503_busy_and_frees_up():
    agent = Agent(ServeSettings(concurrency=1, queue=0, request_timeout_s=10))
    release = threading.Event()

    async def scenario():
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.run, release.wait)  # holds the only worker
            await anyio.sleep(0.3)
            with pytest.raises(Problem) as busy:
                await agent.run(lambda: None)
            release.set()
        return busy.value, await agent.run(lambda: "done")

    busy, after = anyio.run(scenario)
    assert busy.status == 503 and busy.kind.name == "retry_later" and busy.headers["Retry-After"]
    assert after == "done"


def test_the_request_deadline_is_504():
    agent = Agent(ServeSettings(request_timeout_s=0.2))
    started = time.monotonic()
    with pytest.raises(Problem) as late:
        anyio.run(agent.run, time.sleep, 3)
    assert late.value.status == 504 and time.monotonic() - started < 2


def test_once_computes_a_key_once_for_concurrent_callers():
    once, calls = Once(ttl_s=60), []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return len(calls)

    results = []
    threads = [threading.Thread(target=lambda: results.append(once.get("k", slow))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [1] * 8 and len(calls) == 1
    assert once.get("k", slow, refresh=True) == 2  # refresh computes anew


def test_once_keeps_at_most_its_entries_and_no_failed_keys():
    once = Once(ttl_s=60, max_entries=3)
    for i in range(10):
        once.get(i, lambda i=i: i)
    with pytest.raises(ValueError):
        once.get("bad", lambda: int("x"))
    assert len(once._values) == 3 and set(once._keys) == set(once._values) == {7, 8, 9}
