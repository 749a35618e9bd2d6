"""body/fields.py: which request fields may be named and stripped, and that stripping never reaches the conversation."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from llmfix.body import fields
from llmfix.body.conversation import loads
from tests.conftest import fixture_bytes, fixture_json

CC = "claude-code/single_png__turn2.json"


def strip(body: dict[str, Any], *names: str) -> tuple[dict[str, Any], list[fields.Stripped]]:
    parsed = [fields.parse(n) for n in names]
    assert all(parsed), names
    return fields.strip(body, [f for f in parsed if f is not None])


@pytest.mark.parametrize(("name", "kind"), [
    ("context_management", "member"), ("output_config", "member"), ("prompt_cache_key", "member"),
    ("output_config.format", "member"), ("thinking.disabled.display", "member"), ("promptCacheKey", "member"),
    ("cache_control", "marker"), ("cache_control.ttl", "marker-key"), ("cache_control.scope", "marker-key"),
    ("thinking.cache_control", "typed-marker"), ("tools.cache_control", "scoped-marker"),
    ("system.cache_control", "scoped-marker"),
])
def test_names_of_fields_outside_the_conversation(name: str, kind: str) -> None:
    parsed = fields.parse(name)
    assert parsed is not None and parsed.kind == kind


@pytest.mark.parametrize("name", [
    "messages", "messages.0.content", "input", "system", "instructions", "tools", "tools.0.custom", "model", "stream",
    "previous_response_id", "conversation", "functions", "prompt", "cache_control.type", "content.cache_control",
    "", "a..b", "a b", "x" * 300, "a.b.c.d.e.f.g", "cache_control.ttl.x",
])
def test_the_conversation_and_odd_names_are_never_strippable(name: str) -> None:
    assert fields.parse(name) is None


def test_a_top_level_knob_goes_and_nothing_else_changes() -> None:
    body = fixture_json(CC)
    kept = copy.deepcopy(body)
    out, gone = strip(body, "context_management")
    assert [(g.where, g.field) for g in gone] == [("context_management", "context_management")]
    assert gone[0].value == {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    assert out == {k: v for k, v in kept.items() if k != "context_management"}
    assert list(out) == [k for k in kept if k != "context_management"]  # order kept
    assert body == kept  # the input is never changed
    assert all(out[k] is body[k] for k in out)  # the rest: the very same objects


def test_nothing_to_strip_gives_the_same_object() -> None:
    body = fixture_json(CC)
    out, gone = strip(body, "prompt_cache_key", "cache_control.ttl", "thinking.cache_control", "service_tier")
    assert out is body and gone == []


def test_a_key_inside_a_knob_and_a_union_tag_in_the_path() -> None:
    body = {"model": "m", "output_config": {"effort": "high", "format": {"type": "json_schema"}},
            "thinking": {"type": "disabled", "display": "omitted"}, "messages": []}
    out, gone = strip(body, "output_config.format", "thinking.disabled.display")
    assert out["output_config"] == {"effort": "high"} and out["thinking"] == {"type": "disabled"}
    assert [g.where for g in gone] == ["output_config.format", "thinking.display"]
    enabled = {**body, "thinking": {"type": "enabled", "display": "omitted"}}
    assert strip(enabled, "thinking.disabled.display")[0]["thinking"] == enabled["thinking"]  # another tag: kept


def test_a_marker_key_goes_everywhere_and_a_typed_marker_only_on_its_type() -> None:
    ttl = {"type": "ephemeral", "ttl": "1h"}
    body = {"system": [{"type": "text", "text": "s", "cache_control": ttl}],
            "messages": [{"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": "sig", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "a", "cache_control": ttl}]}]}
    out, gone = strip(body, "cache_control.ttl")
    assert out["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert out["messages"][0]["content"][1]["cache_control"] == {"type": "ephemeral"}
    assert [g.where for g in gone] == ["system[0].cache_control.ttl", "messages[0].content[1].cache_control.ttl"]
    out, gone = strip(body, "thinking.cache_control")
    assert "cache_control" not in out["messages"][0]["content"][0]
    assert out["messages"][0]["content"][1] is body["messages"][0]["content"][1]
    assert out["system"] is body["system"]


def test_a_scoped_marker_goes_from_its_member_only() -> None:
    body = {"tools": [{"name": "Read", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
            "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]}
    out, _ = strip(body, "tools.cache_control")
    assert out["tools"] == [{"name": "Read", "input_schema": {"type": "object"}}]
    assert out["system"] is body["system"]


def test_someones_data_named_cache_control_stays() -> None:
    """A call's arguments, a tool's schema, a string value: never markers."""
    call = {"type": "tool_use", "id": "t", "name": "cache", "input": {"cache_control": {"type": "ephemeral"}}}
    tool = {"name": "cache", "input_schema": {"type": "object", "properties": {"cache_control": {"type": "object"}}}}
    chat_tool = {"type": "function", "function": {"name": "f", "parameters": {
        "properties": {"cache_control": {"type": "string"}}}}}
    odd = {"type": "text", "text": "x", "cache_control": "no"}
    body = {"messages": [{"role": "assistant", "content": [call, odd]}], "tools": [tool, chat_tool],
            "metadata": {"note": "cache_control"}}
    out, gone = strip(body, "cache_control", "tools.cache_control")
    assert out is body and gone == []


def members(raw: bytes, *names: str) -> tuple[bytes, list[str]] | None:
    got = fields.strip_members(raw, [f for n in names if (f := fields.parse(n)) is not None], loads, orjson.dumps)
    return None if got is None else (got[0], [g.where for g in got[1]])


@pytest.mark.parametrize(("raw", "names", "out"), [
    (b'{"model":"m","messages":[1],"context_management":{"a":1}}', ["context_management"],
     b'{"model":"m","messages":[1]}'),
    (b'{"model":"m","messages":[1],"context_management":{"a":1} ,\n "stream":true}', ["context_management"],
     b'{"model":"m","messages":[1],"stream":true}'),
    (b'{ "context_management" : {"a":1} }', ["context_management"], b"{}"),
    (b'{"a":1,\n "prompt_cache_key": "k"\n}', ["prompt_cache_key"], b'{"a":1}'),
    (b'{"output_config":{"effort":"high","format":{}},\n  "messages":[] }', ["output_config.format"],
     b'{"output_config":{"effort":"high"},"messages":[]}'),
    # the name inside the conversation, as a value and inside a string: only the top-level member goes
    (b'{"messages":[{"context_management":1}],"x":"context_management","t":"\\"context_management\\":1",'
     b'"context_management":2}', ["context_management"],
     b'{"messages":[{"context_management":1}],"x":"context_management","t":"\\"context_management\\":1"}'),
    (b'{"messages":[{"context_management":1}]}', ["context_management"], b'{"messages":[{"context_management":1}]}'),
])
def test_a_top_level_knob_is_taken_out_of_the_bytes(raw: bytes, names: list[str], out: bytes) -> None:
    got = members(raw, *names)
    assert got is not None and got[0] == out
    body, _ = strip(loads(raw), *names)
    assert loads(got[0]) == body  # what parsing the whole body would have given


@pytest.mark.parametrize("name", ["claude-code/single_png__turn2.json", "codex/turn2_request.json",
                                  "pi-ai/openai_responses.json"])
def test_the_bytes_route_gives_what_the_whole_parse_gives_on_the_captures(name: str) -> None:
    raw = fixture_bytes(name)
    for key in loads(raw):
        if fields.parse(key) is not None:
            got = members(raw, key)
            assert got is not None and loads(got[0]) == strip(loads(raw), key)[0], key
            sep = raw.rfind(b",", 0, raw.rfind(orjson.dumps(key)))
            assert got[0][:sep] == raw[:sep], key  # the bytes before it, as they came


def test_too_many_lookalikes_give_up_to_the_whole_parse() -> None:
    raw = b'{"metadata":{},"messages":[' + b",".join([b'{"metadata":1}'] * 6) + b"]}"
    assert members(raw, "metadata") is None
    raw = b'{"metadata":{},"messages":[' + b",".join([b'{"metadata":1}'] * 3) + b"]}"
    assert members(raw, "metadata") == (raw.replace(b'"metadata":{},', b""), ["metadata"])
