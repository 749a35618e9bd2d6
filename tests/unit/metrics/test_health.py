"""What /healthz answers: 200 while the event loop answers, whatever the memory; 503 starting, stalled, stopping."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from llmfix import events
from llmfix.metrics.health import Health


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running on a thread of its own, stopped and closed after the test."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_starting_until_the_proxy_runs() -> None:
    assert Health(lambda: None).check() == (503, {"status": "starting", "memory": {"backend": None, "up": None}})


def test_ok_while_the_loop_answers_and_a_down_memory_does_not_fail_it(loop) -> None:
    state: list[events.MemoryState] = [events.MemoryState("redis", True)]
    health = Health(lambda: state[0])
    health.loop = loop
    assert health.check() == (200, {"status": "ok", "memory": {"backend": "redis", "up": True}})
    state[0] = events.MemoryState("redis", False)
    assert health.check() == (200, {"status": "ok", "memory": {"backend": "redis", "up": False}})


def test_stalled_when_the_loop_does_not_answer_in_time(loop) -> None:
    health = Health(lambda: None)
    health.loop = loop
    release = threading.Event()
    loop.call_soon_threadsafe(release.wait, 10)  # a hook holding the loop (sync work on it)
    try:
        assert health.check(timeout_s=0.2)[0:1] == (503,)
        assert health.check(timeout_s=0.2)[1]["status"] == "stalled"
    finally:
        release.set()
    assert health.check()[0] == 200  # answers again once the loop is free


def test_stopping_after_done_or_a_closed_loop() -> None:
    health = Health(lambda: None)
    closed = asyncio.new_event_loop()
    closed.close()
    health.loop = closed
    assert health.check()[1]["status"] == "stopping"
    health.stopping = True
    assert health.check() == (503, {"status": "stopping", "memory": {"backend": None, "up": None}})
