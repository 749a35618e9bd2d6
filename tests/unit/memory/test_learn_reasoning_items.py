"""What llmfix learns about Responses reasoning items from an answer: which item followed which reasoning item,
and the id of each sealed content — the same from SSE however it is cut, from events fed one by one (the WebSocket
transport), and from a JSON answer; from the ``.done`` copies, never the incomplete ``.added`` ones."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmfix.dialects.responses import learn as lr
from llmfix.memory.learn import StreamLearner, learn_json_response
from llmfix.memory.store import Reasoning, ToolCall
from tests.upstreams.reasoned import codex_answer, reasoning_item, responses_sse
from tests.upstreams.reasoning_items_rules import Organization

ORG = Organization("org-test")
UP = "api.openai.com:443/responses"


def order(value: str) -> tuple[str | None, str | None, bool]:
    return lr.read_order(value)


def learned(records: list[Reasoning]) -> dict[tuple[str, str], str]:
    return {(r.kind, r.key): r.value for r in records}


def expected_for(output: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """Written out by hand for the shapes below: each item → the last reasoning item before it; each reasoning
    item → the item right after it; each sealed content → its item."""
    out: dict[tuple[str, str], str] = {}
    last = None
    for i, item in enumerate(output):
        nxt = output[i + 1]["id"] if item["type"] == "reasoning" and i + 1 < len(output) else None
        if last or nxt:
            out[lr.ORDER, item["id"]] = lr.order_value(last, nxt)
        if item["type"] == "reasoning":
            out[lr.SEALED, lr.sealed_key(item["encrypted_content"])] = item["id"]
            last = item["id"]
    return out


def stream(response: dict[str, Any], how: str) -> tuple[list[ToolCall], list[Reasoning]]:
    calls: list[ToolCall] = []
    thoughts: list[Reasoning] = []
    learner = StreamLearner("responses", calls.extend, on_reasoning=thoughts.extend, upstream=UP)
    raw = responses_sse(response).encode()
    if how == "events":  # the WebSocket transport: one message per event
        for block in raw.decode().split("\n\n"):
            data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
            if data:
                learner.feed_event(data[0])
        learner.end()
    else:
        size = {"whole": len(raw), "bytes": 1, "pieces": 7}[how]
        for i in range(0, len(raw), size):
            learner.feed(raw[i : i + size])
        learner.feed(b"")
    return calls, thoughts


def fc(n: int) -> dict[str, Any]:
    return {"id": f"fc_{n}", "type": "function_call", "status": "completed", "call_id": f"call_{n}", "name": "Read",
            "arguments": json.dumps({"path": f"{n}.png"})}


def msg(n: int) -> dict[str, Any]:
    return {"id": f"msg_{n}", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": f"text {n}", "annotations": []}]}


SHAPES = {
    "codex call": codex_answer(1, ORG, "learn")["output"],
    "codex message": codex_answer(2, ORG, "learn")["output"],
    "parallel calls": [reasoning_item(ORG, "rs_1"), fc(1), fc(2)],
    "two reasoning items": [reasoning_item(ORG, "rs_1"), fc(1), reasoning_item(ORG, "rs_2", "why"), msg(2)],
    "message then call": [reasoning_item(ORG, "rs_1"), msg(1), fc(1)],
}


@pytest.mark.parametrize("how", ["whole", "bytes", "pieces", "events"])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_order_of_an_answer_is_learned_however_it_arrives(shape: str, how: str) -> None:
    output = SHAPES[shape]
    calls, thoughts = stream({"id": "resp_1", "object": "response", "model": "gpt-5.5", "output": output}, how)
    assert learned(thoughts) == expected_for(output)
    assert {r.upstream for r in thoughts} == {UP}
    assert [c.call_id for c in calls] == [i["call_id"] for i in output if i["type"] == "function_call"]


def test_the_sealed_content_is_the_whole_one_of_the_done_event_not_the_added_prefix() -> None:
    output = SHAPES["codex call"]
    raw = responses_sse({"id": "resp_1", "output": output})
    added = json.loads(raw.split("\n\n")[2].split("data: ", 1)[1])
    assert added["type"] == "response.output_item.added"
    whole = output[0]["encrypted_content"]
    assert whole.startswith(added["item"]["encrypted_content"]) and added["item"]["encrypted_content"] != whole
    _, thoughts = stream({"id": "resp_1", "output": output}, "whole")
    assert learned(thoughts)[lr.SEALED, lr.sealed_key(whole)] == output[0]["id"]


def test_a_json_answer_teaches_the_same() -> None:
    output = SHAPES["two reasoning items"]
    thoughts: list[Reasoning] = []
    body = json.dumps({"id": "resp_1", "object": "response", "output": output}).encode()
    calls = learn_json_response("responses", body, upstream=UP, on_reasoning=thoughts.extend)
    assert calls == [ToolCall("call_1", "Read", '{"path": "1.png"}', "responses")]
    assert learned(thoughts) == expected_for(output)


def test_a_socket_carrying_two_responses_learns_each_apart() -> None:
    thoughts: list[Reasoning] = []
    learner = StreamLearner("responses", lambda _: None, on_reasoning=thoughts.extend, upstream=UP)
    first, second = [reasoning_item(ORG, "rs_1"), fc(1)], [msg(2)]
    for response in ({"id": "r1", "output": first}, {"id": "r2", "output": second}):
        for block in responses_sse(response).split("\n\n"):
            if block:
                learner.feed_event(block.split("data: ", 1)[1])
    learner.end()
    assert learned(thoughts) == expected_for(first)  # msg_2 came in another response: it followed nothing


def test_a_stream_cut_before_its_end_teaches_what_was_done_and_nothing_after_a_gap() -> None:
    output = [reasoning_item(ORG, "rs_1"), fc(1), reasoning_item(ORG, "rs_2"), fc(2)]
    events = [e for e in responses_sse({"id": "r", "output": output}).split("\n\n") if e]
    cut = [e for e in events if '"response.completed"' not in e]
    _, thoughts = stream_events(cut[: -2])  # the last call's done never came
    got = learned(thoughts)
    assert order(got[lr.ORDER, "rs_1"]) == (None, "fc_1", False)
    assert order(got[lr.ORDER, "fc_1"]) == ("rs_1", None, False)
    assert order(got[lr.ORDER, "rs_2"]) == ("rs_1", None, False)  # its follower is not known: no "next"
    # an event lost in the middle (too large to keep): the order of that response is not learned at all
    thoughts = []
    learner = StreamLearner("responses", lambda _: None, on_reasoning=thoughts.extend, upstream=UP, max_buffer=4096)
    lost = next(e for e in cut if 'output_item.done"' in e and '"output_index":2' in e)
    for e in cut:
        learner.feed_event("x" * 5000 if e is lost else e.split("data: ", 1)[1])
    learner.end()
    assert not [r for r in thoughts if r.kind == lr.ORDER]


def stream_events(events: list[str]) -> tuple[list[ToolCall], list[Reasoning]]:
    calls: list[ToolCall] = []
    thoughts: list[Reasoning] = []
    learner = StreamLearner("responses", calls.extend, on_reasoning=thoughts.extend, upstream=UP)
    for e in events:
        learner.feed_event(e.split("data: ", 1)[1])
    learner.end()
    return calls, thoughts


def test_an_answer_without_reasoning_teaches_no_order() -> None:
    _, thoughts = stream({"id": "r", "output": [fc(1), msg(1)]}, "whole")
    assert thoughts == []


def test_taught_records_read_back() -> None:
    record = lr.taught_order("fc_1", "rs_1", UP)
    assert (record.kind, record.key, record.upstream) == (lr.ORDER, "fc_1", UP)
    assert order(record.value) == ("rs_1", None, True)
    assert order(lr.taught_order("rs_1", None, UP).value) == (None, None, True)
    assert order("not json") == (None, None, False) and order('["x"]') == (None, None, False)
