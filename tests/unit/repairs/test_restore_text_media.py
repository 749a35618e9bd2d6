"""restore-text-media on opencode's xAI capture and in every dialect, and the texts it must leave alone."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.profiles import parse_table
from tests.conftest import fixture_bytes, fixture_json
from tests.images import png_b64
from tests.upstreams import rules

XAI = "opencode/xai-builtin__grok-4__two_png__turn2.json"
PNG = png_b64(0)
SERIALIZED = json.dumps([{"type": "text", "text": "Image read successfully"},
                         {"type": "image-data", "data": PNG, "mediaType": "image/png"}], separators=(",", ":"))


def run(dialect: Dialect, host: str, body: bytes | dict[str, Any]) -> engine.Outcome:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return engine.process(engine.Request(dialect, host, 443, raw), engine.Settings())


def with_model(name: str, model: str) -> bytes:
    body = fixture_json(name)
    body["model"] = model
    return json.dumps(body).encode()


def client_images() -> list[str]:
    """The base64 the client had put in each tool message's text, in call order."""
    tools = [m for m in fixture_json(XAI)["messages"] if m["role"] == "tool"]
    return [p["data"] for m in tools for p in json.loads(m["content"]) if p["type"] == "image-data"]


def test_xai_vision_model_gets_each_image_once_after_the_run_with_the_text_kept() -> None:
    outcome = run(CHAT, "api.x.ai", with_model(XAI, "grok-4.3"))
    got = json.loads(outcome.body)["messages"]
    assert [m["role"] for m in got[3:]] == ["tool", "tool", "user"]
    for m in got[3:5]:
        assert [p["text"] for p in m["content"]] == ["Image read successfully"]
    urls = [p["image_url"]["url"] for p in got[5]["content"] if p["type"] == "image_url"]
    payloads = [u.removeprefix("data:image/png;base64,") for u in urls]
    assert [hashlib.sha256(p.encode()).hexdigest() for p in payloads] == \
        [hashlib.sha256(p.encode()).hexdigest() for p in client_images()]
    texts = [p["text"] for m in got for p in (m["content"] if isinstance(m["content"], list) else [])
             if p["type"] == "text"] + [m["content"] for m in got if isinstance(m["content"], str)]
    assert not any(b64 in t for t in texts for b64 in client_images())
    assert rules.check("xai", "/v1/chat/completions", {"messages": got}) is None
    assert [c.repair for c in outcome.changes][:2] == ["restore-text-media", "restore-text-media"]
    assert {c.repair for c in outcome.changes} == {"restore-text-media", "hoist-tool-media"}


def test_xai_text_only_model_gets_placeholders_and_dropped_records() -> None:
    outcome = run(CHAT, "api.x.ai", fixture_bytes(XAI))  # model grok-4: text-only per models.dev
    body = outcome.body.decode()
    assert not any(b64 in body for b64 in client_images())
    got = json.loads(body)["messages"]
    for m in got[3:]:
        assert m["role"] == "tool"
        assert [p["text"] for p in m["content"]] == [
            "Image read successfully",
            "[1 image from this tool result omitted: model grok-4 does not take image input]"]
    dropped = [d for c in outcome.changes for d in c.dropped]
    assert len(dropped) == 2 and all("<image/png" in d and "grok-4" in d for d in dropped)


def test_the_repaired_request_is_left_alone_the_second_time() -> None:
    once = run(CHAT, "api.x.ai", with_model(XAI, "grok-4.3"))
    assert run(CHAT, "api.x.ai", once.body).status == "untouched"


def test_change_records_carry_no_base64() -> None:
    outcome = run(CHAT, "api.x.ai", with_model(XAI, "grok-4.3"))
    logged = json.dumps([*outcome.lines, *outcome.records])
    assert "iVBOR" not in logged and "sha256:" in logged


def chat(content: Any, model: str = "grok-4.3") -> dict[str, Any]:
    return {"model": model, "messages": [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": content}]}


def test_a_text_part_holding_the_array_is_restored_too() -> None:
    got = json.loads(run(CHAT, "api.x.ai", chat([{"type": "text", "text": SERIALIZED}])).body)
    assert got["messages"][-1]["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG}"


def test_a_whole_data_url_is_restored() -> None:
    got = json.loads(run(CHAT, "api.x.ai", chat(f"data:image/png;base64,{PNG}")).body)
    assert got["messages"][2]["content"] == [{"type": "text", "text": "[1 image from this tool result attached in the "
                                                                      "next user message]"}]
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert got["messages"][3]["content"][1] == image


def responses(model: str) -> dict[str, Any]:
    """A Responses request whose ``read`` call was answered with the serialized image array."""
    return {"model": model, "input": [
        {"role": "user", "content": "look"},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": SERIALIZED}]}


def test_responses_openai_gets_input_image_parts_in_the_output() -> None:
    got = json.loads(run(RESPONSES, "api.openai.com", responses("gpt-4.1")).body)
    assert got["input"][2]["output"] == [
        {"type": "input_text", "text": "Image read successfully"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"}]
    assert rules.check("openai", "/v1/responses", got) is None


def test_responses_xai_gets_them_hoisted_into_one_user_message() -> None:
    got = json.loads(run(RESPONSES, "api.x.ai", responses("grok-4.3")).body)
    assert got["input"][2]["output"] == "Image read successfully"
    assert got["input"][3]["role"] == "user" and got["input"][3]["content"][1]["type"] == "input_image"
    assert rules.check("xai", "/v1/responses", got) is None


def test_anthropic_tool_result_gets_a_base64_image_block() -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": SERIALIZED}]}]}
    got = json.loads(run(MESSAGES, "api.anthropic.com", body).body)
    assert got["messages"][2]["content"][0]["content"] == [
        {"type": "text", "text": "Image read successfully"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]


ICON_CONFIG = json.dumps({"name": "app", "icon": f"data:image/png;base64,{PNG}"}, indent=2)


@pytest.mark.parametrize("content", [
    PNG,  # a file read of a .b64 file
    ICON_CONFIG,  # a JSON config with an embedded icon
    f"cat icon.txt\ndata:image/png;base64,{PNG}\n",
    "Image read successfully",
    SERIALIZED + " ",
], ids=["b64-file", "json-config-icon", "log-with-data-url", "plain", "array-plus-space"])
@pytest.mark.parametrize(("dialect", "host", "model"), [
    (CHAT, "api.x.ai", "grok-4.3"), (CHAT, "api.openai.com", "gpt-4.1"),
    (CHAT, "api.deepseek.com", "deepseek-chat"), (CHAT, "llm.example", "mock"),
    (RESPONSES, "api.openai.com", "gpt-4.1"), (RESPONSES, "api.x.ai", "grok-4.3"),
    (MESSAGES, "api.anthropic.com", "claude-sonnet-4-5"),
])
def test_base64_inside_other_text_leaves_byte_identical(content: str, dialect: Dialect, host: str, model: str) -> None:
    if dialect is CHAT:
        body = chat(content, model)
    elif dialect is RESPONSES:
        body = {"model": model, "input": [
            {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": content}]}
    else:
        body = {"model": model, "max_tokens": 100, "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": content}]}]}
    assert run(dialect, host, body).status == "untouched"


def test_opencode_chat_capture_to_openai_is_untouched() -> None:
    raw = fixture_bytes("opencode/chat__mock-vision__two_png__turn2.json")
    assert run(CHAT, "api.openai.com", raw).status == "untouched"


def test_disabled_it_does_nothing() -> None:
    settings = engine.Settings(enabled=frozenset({"hoist-tool-media"}))
    raw = with_model(XAI, "grok-4.3")
    assert engine.process(engine.Request(CHAT, "api.x.ai", 443, raw), settings).status == "untouched"


def test_an_anthropic_upstream_without_tool_result_media_is_left_alone() -> None:
    table = parse_table({"hosts": {"anthropic.compat.example": {"base": "anthropic",
                                                                "anthropic_tool_result_media": False}}})
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": SERIALIZED}]}]}
    raw = json.dumps(body).encode()
    outcome = engine.process(engine.Request(MESSAGES, "anthropic.compat.example", 443, raw),
                             engine.Settings(table=table))
    assert outcome.status == "untouched"
