"""Learning the thought signature of each tool call from the answers of Gemini's OpenAI-compatible door: streamed
(every documented style: the signature on a trailing index-less delta or on the call's own, the index the same,
left out or incremented; however the stream is cut) and JSON, on the call or on the message, ``google`` or
``vertex``; nothing partial, nothing for a call that carried none."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmfix.dialects.chat import learn as learn_module
from llmfix.dialects.chat.learn_signatures import KIND, signature_key
from llmfix.memory.learn import StreamLearner, learn_json_response
from llmfix.memory.learn_base import Asked
from llmfix.memory.store import SINGLE_VALUED, Reasoning, ToolCall
from tests.upstreams.gemini_canned import function_calls
from tests.upstreams.gemini_door import DoorStyle, chunks, completion, sse_text
from tests.upstreams.gemini_signatures import SignatureLedger

UP = "generativelanguage.googleapis.com:443/chat"
MODEL = "gemini-3-flash-preview"
A, B = {"path": "a.md"}, {"path": "b.md"}
REQUEST = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "read both"}]}


def learn(chunks_: list[bytes], upstream: str = UP) -> tuple[list[ToolCall], list[Reasoning]]:
    calls: list[ToolCall] = []
    records: list[Reasoning] = []
    learner = StreamLearner("chat", calls.extend, on_reasoning=records.extend, upstream=upstream)
    for chunk in chunks_:
        learner.feed(chunk)
    learner.feed(b"")
    return calls, records


def door_stream(style: DoorStyle, *, sequential: bool = False) -> tuple[bytes, list[dict[str, Any]]]:
    """A door answer of two parallel calls (``sequential``: both signed), and the calls it issued."""
    answer = function_calls(("read_file", A), ("read_file", B), sequential=sequential)
    text = sse_text(chunks(answer, SignatureLedger(), REQUEST, style))
    return text.encode(), answer.issued


def key_of(call: dict[str, Any], upstream: str = UP) -> str:
    fn = call["function"]
    return signature_key(upstream, call["id"], fn["name"], "function", fn["arguments"])


def sig(call: dict[str, Any]) -> str:
    return call["extra_content"]["google"]["thought_signature"]


@pytest.mark.parametrize("index", ["same", "omit", "increment"])
@pytest.mark.parametrize("where", ["trailing", "inline"])
def test_a_streamed_signature_is_learned_under_the_call_it_came_with(index: str, where: str) -> None:
    raw, issued = door_stream(DoorStyle(index, where))  # type: ignore[arg-type]
    calls, records = learn([raw])
    assert [c.call_id for c in calls] == [c["id"] for c in issued]  # the calls as before
    assert records == [Reasoning(KIND, key_of(issued[0]), sig(issued[0]), UP)]  # only the first was signed


@pytest.mark.parametrize("index", ["same", "omit", "increment"])
def test_each_signed_call_of_a_stream_gets_its_own(index: str) -> None:
    raw, issued = door_stream(DoorStyle(index, "trailing"), sequential=True)  # type: ignore[arg-type]
    _, records = learn([raw])
    assert [(r.key, r.value) for r in records] == [(key_of(c), sig(c)) for c in issued]
    assert sig(issued[0]) != sig(issued[1])


@given(cuts=st.lists(st.integers(0, 3000), max_size=10))
def test_the_signature_is_byte_exact_however_the_stream_is_cut(cuts: list[int]) -> None:
    raw, issued = door_stream(DoorStyle())
    points = sorted({min(c, len(raw)) for c in cuts})
    pieces = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True) if b > a]
    assert [r.value for r in learn(pieces)[1]] == [sig(issued[0])]


def test_a_json_answer_teaches_the_same() -> None:
    answer = function_calls(("read_file", A), ("read_file", B))
    body = json.dumps(completion(answer, SignatureLedger(), REQUEST)).encode()
    records: list[Reasoning] = []
    calls = learn_json_response("chat", body, upstream=UP, on_reasoning=records.extend)
    assert [c.call_id for c in calls] == [c["id"] for c in answer.issued]
    assert records == [Reasoning(KIND, key_of(answer.issued[0]), sig(answer.issued[0]), UP)]


def call(call_id: str, args: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": call_id, "type": "function",
                           "function": {"name": "read_file", "arguments": json.dumps(args)}}
    return out | ({"extra_content": extra} if extra is not None else {})


def json_answer(message: dict[str, Any]) -> list[Reasoning]:
    records: list[Reasoning] = []
    body = json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}).encode()
    learn_json_response("chat", body, upstream=UP, on_reasoning=records.extend)
    return records


def test_a_signature_on_the_message_is_the_first_call_s_and_vertex_s_namespace_is_read() -> None:
    message = {"role": "assistant", "extra_content": {"google": {"thought_signature": "on-the-message"}},
               "tool_calls": [call("c1", A), call("c2", B)]}
    assert [(r.key, r.value) for r in json_answer(message)] == [(key_of(call("c1", A)), "on-the-message")]
    vertex = {"role": "assistant", "tool_calls": [call("c1", A, {"vertex": {"thought_signature": "from-vertex"}})]}
    assert [r.value for r in json_answer(vertex)] == ["from-vertex"]
    # a call that carries one keeps it: the message's is not taken for another call
    both = {**message, "tool_calls": [call("c1", A), call("c2", B, {"google": {"thought_signature": "own"}})]}
    assert [(r.key, r.value) for r in json_answer(both)] == [(key_of(call("c2", B)), "own")]


def test_a_streamed_signature_on_the_delta_itself_is_the_first_call_s() -> None:
    head = {"id": "x", "object": "chat.completion.chunk", "model": MODEL}
    deltas = [{"role": "assistant", "tool_calls": [{"index": 0, **call("c1", A)}]},
              {"extra_content": {"google": {"thought_signature": "on-the-delta"}}}]
    events = [{**head, "choices": [{"index": 0, "delta": d}]} for d in deltas]
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    _, records = learn([sse_text(events).encode()])
    assert [(r.key, r.value) for r in records] == [(key_of(call("c1", A)), "on-the-delta")]


def test_unsigned_calls_teach_no_signature_and_a_lost_event_teaches_nothing_partial() -> None:
    assert json_answer({"role": "assistant", "tool_calls": [call("c1", A)]}) == []
    raw, _ = door_stream(DoorStyle())
    events = [json.loads(e[6:]) for e in raw.decode().split("\n\n") if e.startswith("data: {")]
    assembler = learn_module.Assembler(Asked(UP))
    out: list[Any] = []
    assembler.on_event(events[0], out)  # the first call
    assembler.forget_partial()  # an event was lost (too large): which call the next signature is for is not sure
    for event in events[1:]:
        assembler.on_event(event, out)
    assembler.finish(out)
    assert [r for r in out if isinstance(r, Reasoning)] == []


def test_the_kind_is_single_valued() -> None:
    assert KIND in SINGLE_VALUED
