"""The strict mock of Gemini's OpenAI-compatible door: signatures on tool calls, its list-wrapped errors, its Schema."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.upstreams.gemini_canned import function_calls, text_answer
from tests.upstreams.gemini_errors import CORRUPTED, COUNT_MISMATCH, missing_signature
from tests.upstreams.mock import MockUpstream

DOOR = "/v1beta/openai/chat/completions"
MODEL = "gemini-3-flash-preview"
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
A, B = {"path": "a.md"}, {"path": "b.md"}


@pytest.fixture
def up() -> Iterator[MockUpstream]:
    with MockUpstream(rules="by-host") as mock:  # the door's host names the gemini rules
        yield mock


def post(up: MockUpstream, body: dict[str, Any]) -> httpx.Response:
    headers = {"host": "generativelanguage.googleapis.com", "authorization": "Bearer fake"}
    return httpx.post(up.url + DOOR, json=body, headers=headers, timeout=30)


def chunks(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.split("\n\n") if line.startswith("data: {")]


def turn2(calls: list[dict[str, Any]], *, results: int | None = None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "read"},
                                      {"role": "assistant", "content": None, "tool_calls": calls}]
    messages += [{"role": "tool", "tool_call_id": c["id"], "content": "text"} for c in calls[:results]]
    return {"model": MODEL, "messages": messages, "tools": TOOLS}


def test_non_streamed_calls_carry_the_signature_on_the_first_call(up: MockUpstream) -> None:
    up.gemini.queue(function_calls(("read_file", A), ("read_file", B)))
    got = post(up, {"model": MODEL, "messages": [{"role": "user", "content": "read"}], "tools": TOOLS})
    message = got.json()["choices"][0]["message"]
    first, second = message["tool_calls"]
    assert first["extra_content"]["google"]["thought_signature"] and "extra_content" not in second
    assert json.loads(first["function"]["arguments"]) == A and first["id"].startswith("function-call-")
    assert got.json()["choices"][0]["finish_reason"] == "tool_calls"
    assert post(up, turn2([first, second])).status_code == 200  # replayed with extra_content: accepted
    stripped = [{k: v for k, v in c.items() if k != "extra_content"} for c in (first, second)]
    refused = post(up, turn2(stripped))
    assert refused.status_code == 400
    assert refused.json() == [{"error": {"code": 400, "message": missing_signature("door", "read_file", 2),
                                         "status": "INVALID_ARGUMENT"}}]  # list-wrapped, the Gemini API's text


def test_streamed_calls_each_whole_index_not_incremented_signature_on_a_trailing_delta(up: MockUpstream) -> None:
    up.gemini.queue(function_calls(("read_file", A), ("read_file", B)))
    got = post(up, {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "read"}], "tools": TOOLS})
    assert got.text.endswith("data: [DONE]\n\n")
    deltas = [c["choices"][0]["delta"] for c in chunks(got.text)]
    call_a, trailing, call_b, finish = deltas
    assert [d["tool_calls"][0].get("index") for d in (call_a, trailing, call_b)] == [0, None, 0]
    assert trailing == {"tool_calls": [{"extra_content": {"google": {"thought_signature": trailing[
        "tool_calls"][0]["extra_content"]["google"]["thought_signature"]}}}]}
    assert finish == {} and chunks(got.text)[-1]["choices"][0]["finish_reason"] == "tool_calls"
    signature = trailing["tool_calls"][0]["extra_content"]
    calls = [{**{k: v for k, v in call_a["tool_calls"][0].items() if k != "index"}, "extra_content": signature},
             {k: v for k, v in call_b["tool_calls"][0].items() if k != "index"}]
    assert post(up, turn2(calls)).status_code == 200


def test_the_other_documented_stream_styles(up: MockUpstream) -> None:
    up.gemini.door.tool_index, up.gemini.door.signature_delta = "omit", "inline"
    up.gemini.queue(function_calls(("read_file", A), ("read_file", B)))
    got = post(up, {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "read"}]})
    first, second = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks(got.text)[:2]]
    assert "index" not in first and first["extra_content"]["google"]["thought_signature"]
    assert "extra_content" not in second


def test_dummies_current_turn_foreign_signatures_and_pairing(up: MockUpstream) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps(A)}}
    dummy = {**call, "extra_content": {"google": {"thought_signature": "skip_thought_signature_validator"}}}
    assert post(up, turn2([dummy])).status_code == 200
    older = turn2([call])
    older["messages"] += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]
    assert post(up, older).status_code == 200  # unsigned, but not in the current turn
    foreign = {**call, "extra_content": {"google": {"thought_signature": up.gemini.ledger.sign_call(
        "read_file", A, signer="vertex")}}}
    assert post(up, turn2([foreign])).json()[0]["error"]["message"] == CORRUPTED
    missing_result = post(up, turn2([dummy, {**call, "id": "c2"}], results=1))
    assert missing_result.json()[0]["error"]["message"] == COUNT_MISMATCH


def test_tool_parameters_meet_gemini_schema_rules(up: MockUpstream) -> None:
    tools = [copy.deepcopy(TOOLS[0]) for _ in range(2)]
    tools[1]["function"]["parameters"] = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                                          "properties": {"q": {"type": "string"}}}
    got = post(up, {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": tools})
    assert got.status_code == 400
    [error] = got.json()
    line = ("Invalid JSON payload received. Unknown name \"$schema\" at 'tools[0].function_declarations[1]"
            ".parameters': Cannot find field.")
    assert error["error"]["message"] == line
    assert error["error"]["details"][0]["fieldViolations"] == [{"description": line}]


def test_text_answers_stream_and_an_unknown_host_is_not_gemini(up: MockUpstream) -> None:
    up.gemini.queue(text_answer("hello from the door", chunks=3))
    got = post(up, {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks(got.text)) == "hello from the door"
    other = httpx.post(up.url + DOOR, json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert other.status_code == 200 and up.requests[-1].rules == "spec"  # a Chat upstream like any other
