"""The observer interface (llmfix/events.py) and the lines that call it: LLMFix's request hook and report, the
WebSocket addon's request messages, the retry log, the Redis link's state and fail-open, the SQLite backend."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from llmfix import engine, events
from llmfix.dialects.registry import MESSAGES
from llmfix.memory import backend
from llmfix.memory.redis_link import RedisLink
from llmfix.report.changes import Change
from llmfix.websocket import ResponsesWebSocket
from tests.conftest import fixture_bytes, llmfix_with, make_flow
from tests.redis_server import until
from tests.unit.test_websocket import broken, client, socket_flow

XAI = fixture_bytes("pi-ai/xai_responses.json")


@pytest.fixture
def seen() -> Iterator[list[events.Event]]:
    got: list[events.Event] = []
    stop = events.subscribe(got.append)
    yield got
    stop()


def of[T](got: list[events.Event], kind: type[T]) -> list[T]:
    return [e for e in got if isinstance(e, kind)]


async def test_an_http_request_is_seen_and_its_repair_reported(seen) -> None:
    with llmfix_with() as (fix, _):
        f = make_flow(XAI)
        await fix.request(f)
        await fix.request(make_flow({"model": "m", "input": "hi"}, host="api.openai.com"))
        await fix.request(make_flow(b"{not json", host="api.openai.com", path="/v1/chat/completions"))
        await fix.request(make_flow(b"x", path="/upload"))  # not an LLM request: nothing
    first, second, third = of(seen, events.RequestSeen)
    assert (first.transport, first.dialect, first.profile, first.outcome) == ("http", "responses", "xai", "repaired")
    assert (first.bytes_in, first.bytes_out) == (len(XAI), len(f.request.raw_content))
    assert first.bytes_out != first.bytes_in and 0 < first.seconds < 30
    assert (second.profile, second.outcome, second.bytes_in == second.bytes_out) == ("openai", "untouched", True)
    assert (third.dialect, third.profile, third.outcome) == ("chat", None, "failed")
    [repaired] = of(seen, events.Repaired)
    assert (repaired.transport, repaired.profile, repaired.mode, repaired.repairs) == (
        "http", "xai", "repair", ("hoist-tool-media",))
    assert repaired.changes == ("hoist-tool-media",) * len(repaired.changes) and repaired.changes


async def test_report_mode_is_reported_not_repaired(seen) -> None:
    with llmfix_with() as (fix, tctx):
        tctx.configure(fix, llmfix_mode="report")
        await fix.request(make_flow(XAI))
    [request] = of(seen, events.RequestSeen)
    assert (request.outcome, request.bytes_out) == ("reported", len(XAI))
    assert of(seen, events.Repaired)[0].mode == "report"


async def test_a_websocket_request_message_is_seen_and_its_repair_reported(seen) -> None:
    with llmfix_with(ResponsesWebSocket) as (_fix, ws, _):
        f = socket_flow()
        ws.websocket_start(f)
        await client(ws, f, broken())
    [request] = of(seen, events.RequestSeen)
    assert (request.transport, request.dialect, request.outcome) == ("websocket", "responses", "repaired")
    [repaired] = of(seen, events.Repaired)
    assert (repaired.transport, repaired.repairs) == ("websocket", ("pair-tool-calls",))


def test_images_fitted_and_omitted_are_read_from_the_change_records(seen) -> None:
    changes = (Change("fit-images", "a", "image fitted"),
               Change("fit-images", "b", "image → placeholder", dropped=("<image/png 3 B sha256:0>: undecodable",)),
               Change("omit-unsupported-media", "c", "x", dropped=("<image url h sha256:1>: text only",
                                                                   "<audio/wav 1 B sha256:2>: text only")))
    outcome = engine.Outcome("repaired", changes=changes, profile="anthropic")
    req = engine.Request(MESSAGES, "api.anthropic.com", 443, b"{}")
    events.repaired(req, outcome, "repair", message=3)
    [e] = seen
    assert (e.transport, e.images_fitted, e.images_omitted) == ("websocket", 1, 2)
    assert e.repairs == ("fit-images", "omit-unsupported-media") and len(e.changes) == 3


@pytest.mark.parametrize(
    ("event", "websocket", "outcome"),
    [({"resent": False}, False, "not_resent"), ({"resent": True, "outcome": 200}, False, "succeeded"),
     ({"resent": True, "outcome": 422}, False, "still_rejected"), ({"resent": True, "outcome": "error"}, False,
                                                                   "failed"),
     ({"resent": True, "outcome": "completed"}, True, "succeeded"), ({"resent": True, "outcome": "error"}, True,
                                                                     "still_rejected"),
     ({"resent": True, "outcome": "incomplete"}, True, "succeeded"), ({"resent": True, "outcome": "failed"}, True,
                                                                      "failed")],
)
def test_retry_outcome(event, websocket, outcome) -> None:
    assert events.retry_outcome(event, websocket) == outcome


def test_a_retry_and_only_its_new_lessons(seen) -> None:
    record = {"rejection": "xai-model-input", "resent": True, "outcome": 200, "learned": [
        {"flag": "responses_tool_output_array", "value": False, "new": True},
        {"flag": "responses_image_requires_url", "value": True, "new": False},
        {"fact": "responses.sealed", "key": "abc", "new": True}]}
    events.retried("responses", record, websocket=False)
    assert seen == [events.Retried("http", "responses", "xai-model-input", "succeeded"),
                    events.QuirkLearned("http", "responses", "responses_tool_output_array"),
                    events.QuirkLearned("http", "responses", "responses.sealed")]


def test_without_a_listener_nothing_is_built() -> None:
    assert not events._listeners
    events.request_seen("http", None, None, "repair", 0.0)  # type: ignore[arg-type]  # never read
    events.repaired(None, None, "repair")  # type: ignore[arg-type]
    events.retried("chat", None, False)  # type: ignore[arg-type]


def test_a_failing_listener_is_logged_once_and_the_others_still_hear(seen, caplog) -> None:
    def broken_listener(event: events.Event) -> None:
        raise RuntimeError("observer bug")

    stop = events.subscribe(broken_listener)
    try:
        with caplog.at_level(logging.WARNING, logger="llmfix"):
            for _ in range(3):
                events.memory_failed("redis", timed_out=True)
    finally:
        stop()
    assert len(seen) == 3
    [line] = [r for r in caplog.records if "observer" in r.getMessage()]
    assert "RuntimeError: observer bug" in line.getMessage() and "logged once" in line.getMessage()


def test_memory_state_is_kept_for_a_late_listener_in_order() -> None:
    events.memory_state("sqlite", True)
    first = events.last_memory_state()
    events.memory_state("redis", False)
    last = events.last_memory_state()
    assert first is not None and last is not None and last.seq > first.seq
    assert (last.backend, last.up) == ("redis", False)


def test_the_sqlite_backend_says_it_is_up(seen) -> None:
    backend.open_memory(":memory:", max_age_s=60, max_entries=10, timeout_s=1.0).close()
    last = of(seen, events.MemoryState)[-1]
    assert (last.backend, last.up) == ("sqlite", True)


def test_a_redis_link_says_when_redis_is_unreachable_and_counts_what_went_on_without_it(seen) -> None:
    link = RedisLink("redis://127.0.0.1:1/0", timeout_s=1.0)  # nothing listens on port 1: refused at once
    try:
        assert until(lambda: not link.up, 5.0)  # the link's first probe
        assert [(e.backend, e.up) for e in of(seen, events.MemoryState)][-1] == ("redis", False)
        assert link.call(lambda r: r.ping(), "default") == "default"  # a read: its default at once
        assert link.submit(lambda r: r.ping()) is False  # a write: dropped
        assert of(seen, events.MemoryFailOpen) == [events.MemoryFailOpen("redis", "down")] * 2
    finally:
        link.close()
