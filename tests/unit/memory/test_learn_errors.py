"""The stream learner hands each error event of an SSE answer to ``on_error``: a ``data:`` event holding
``{"error": …}`` and the bare JSON chunk Gemini ends a 200 stream with (no ``data:``, compact or pretty-printed, an
object or Google's array of one), however the chunks split it; ordinary events, and events that only mention an
error, never. What came before the error is still learned."""

from __future__ import annotations

import json
import logging

import pytest

from llmfix.memory.learn import StreamLearner, is_error_event
from llmfix.memory.store import ToolCall
from tests.upstreams.gemini_canned import sse_text

ERROR = {"error": {"code": 400, "message": "Function call is missing a thought_signature in functionCall parts.",
                   "status": "INVALID_ARGUMENT"}}
CALL = {"candidates": [{"content": {"role": "model", "parts": [
    {"functionCall": {"id": "call_1", "name": "read_file", "args": {"file_path": "a.md"}}}]}, "index": 0}]}
TEXT = {"candidates": [{"content": {"role": "model", "parts": [{"text": '{"error": {"code": 1}} is what it says'}]},
                        "index": 0}]}


def learner(errors: list[bytes], calls: list[ToolCall] | None = None) -> StreamLearner:
    return StreamLearner("gemini", (calls if calls is not None else []).extend, on_error=errors.append,
                         label="test stream")


def feed(target: StreamLearner, text: str, step: int = 0) -> None:
    data = text.encode()
    for i in range(0, len(data), step or len(data) or 1):
        target.feed(data[i:i + (step or len(data))])
    target.feed(b"")


@pytest.mark.parametrize("step", [0, 1, 7])
def test_the_bare_error_chunk_that_ends_a_200_stream(step: int) -> None:
    errors: list[bytes] = []
    calls: list[ToolCall] = []
    feed(learner(errors, calls), sse_text([CALL, TEXT], error=ERROR), step)
    assert [json.loads(e) for e in errors] == [ERROR]
    assert [c.call_id for c in calls] == ["call_1"]  # what came before it is learned as ever


@pytest.mark.parametrize("event", [
    f"data: {json.dumps(ERROR)}\n\n",  # in a data: event
    json.dumps(ERROR, indent=2) + "\n",  # pretty-printed, as Google prints its error bodies
    json.dumps([ERROR]),  # Google's array of one (Code Assist, the OpenAI-compatible door)
    "data: " + json.dumps([ERROR]) + "\r\n\r\n",
])
def test_each_form_of_an_error_event(event: str) -> None:
    errors: list[bytes] = []
    feed(learner(errors), sse_text([TEXT]) + event, 5)
    assert len(errors) == 1
    value = json.loads(errors[0])
    assert (value[0] if isinstance(value, list) else value) == ERROR


@pytest.mark.parametrize("data", [
    json.dumps(TEXT), json.dumps(CALL), '{"error": "a string, not an object"}', '{"text": "error"}', "[DONE]",
    '{"error": {', "not json at all", "",
])
def test_what_is_not_an_error_event(data: str) -> None:
    assert not is_error_event(data.encode())


def test_an_error_named_far_down_an_event_is_not_looked_for() -> None:
    """Only the head is looked at: an answer's part that happens to hold an error key deep inside is not parsed."""
    late = json.dumps({"padding": "x" * 300, "error": ERROR["error"]}).encode()
    assert not is_error_event(late)


def test_without_on_error_the_learner_reads_as_before(caplog) -> None:
    calls: list[ToolCall] = []
    target = StreamLearner("gemini", calls.extend, label="test stream")
    with caplog.at_level(logging.WARNING):
        feed(target, sse_text([CALL], error=ERROR), 3)
    assert [c.call_id for c in calls] == ["call_1"] and not target.stopped and caplog.text == ""


def test_a_raising_on_error_stops_learning_with_one_warning_and_never_raises(caplog) -> None:
    def boom(_: bytes) -> None:
        raise RuntimeError("watcher broke")

    target = StreamLearner("gemini", lambda _: None, on_error=boom, label="flow 1234 POST x")
    with caplog.at_level(logging.WARNING):
        feed(target, sse_text([TEXT], error=ERROR) + "\n\n" + sse_text([CALL]), 4)
    assert target.stopped
    assert caplog.text.count("stopped learning tool calls from flow 1234 POST x: RuntimeError: watcher broke") == 1
