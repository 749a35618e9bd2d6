"""Typed parsing keeps every field: untouched requests round-trip exactly, edits keep key order."""

from __future__ import annotations

import json

import pytest

from llmfix.body.conversation import BadBody, parse, serialize, to_body
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.dialects.responses import wire as rs
from llmfix.wire.base import evolve
from tests.conftest import FIXTURES, fixture_json

CAPTURES = sorted(p for p in FIXTURES.rglob("*.json") if p.parent.name != "gemini-cli"
                  and not p.stem.endswith(("_meta", "_answer_calls")))
"""Every captured request body of the Chat, Responses and Messages APIs (codex-ws/: each WebSocket message Codex
sent is one); not the meta files beside some captures, nor what a mock answered."""


def dialect_of(body: dict) -> Dialect:
    if "input" in body:
        return RESPONSES
    first_tool = any(isinstance(m.get("content"), list) and any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in m["content"])
        for m in body["messages"])
    return MESSAGES if "max_tokens" in body and (first_tool or "system" in body) else CHAT


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_capture_round_trips_to_the_same_value(path) -> None:
    body = json.loads(path.read_bytes())
    conv = parse(dialect_of(body), body)
    assert conv is not None
    assert to_body(conv) == body
    assert json.loads(serialize(conv)) == body


def test_an_edited_item_keeps_its_keys_and_unknown_fields_and_untouched_items_stay_verbatim() -> None:
    body = fixture_json("codex/turn2_request.json")
    conv = parse(RESPONSES, body)
    out = conv.items[-1]
    assert isinstance(out, rs.ToolOutput)
    edited = conv.with_items([*conv.items[:-1], evolve(out, output="text")])
    got = to_body(edited, conv)
    assert set(got["input"][-1]) == set(body["input"][-1])  # type, id, call_id, output
    assert got["input"][-1]["id"].startswith("fco_")  # Codex's own field, unknown to the model, kept
    assert got["input"][-1]["output"] == "text"
    assert all(a is b for a, b in zip(got["input"][:-1], body["input"][:-1], strict=True))  # the very same dicts


def test_a_part_moved_into_a_new_message_is_emitted_verbatim() -> None:
    body = fixture_json("pi-ai/xai_responses.json")
    conv = parse(RESPONSES, body)
    image = conv.items[3].output[1]
    moved = rs.Message(type="message", role="user", content=[image])
    got = to_body(conv.with_items([*conv.items, moved]), conv)
    assert got["input"][-1] == {"type": "message", "role": "user", "content": [body["input"][3]["output"][1]]}
    assert got["input"][-1]["content"][0] is body["input"][3]["output"][1]


def test_unknown_item_and_part_types_are_kept() -> None:
    body = {"input": [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
        {"type": "message", "role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "x"}}]},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ], "model": "m"}
    conv = parse(RESPONSES, body)
    assert to_body(conv) == body


@pytest.mark.parametrize(
    ("dialect", "body", "reason"),
    [
        (CHAT, [], "not an object"),
        (CHAT, {"model": "m"}, "no 'messages' field"),
        (CHAT, {"messages": {"role": "user"}}, "not an array"),
        (CHAT, {"messages": [{"content": "hi"}]}, r"messages\[0\].role"),
        (CHAT, {"messages": [{"role": "tool", "content": 7}]}, r"messages\[0\].content"),
        (RESPONSES, {"input": [{"type": "function_call_output", "call_id": "c"}]}, r"input\[0\].output"),
        (MESSAGES, {"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}, "tool_use_id"),
    ],
)
def test_wrong_shapes_are_reported_with_their_location(dialect, body, reason) -> None:
    with pytest.raises(BadBody, match=reason):
        parse(dialect, body)


def test_string_input_has_nothing_to_repair() -> None:
    assert parse(RESPONSES, {"input": "hello", "model": "m"}) is None
