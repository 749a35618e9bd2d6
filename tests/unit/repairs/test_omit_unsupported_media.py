"""omit-unsupported-media: a text-only model gets no image or file part anywhere; other models keep theirs."""

from __future__ import annotations

import json
from typing import Any

from llmfix import engine
from llmfix.body.media import digest
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.profiles import parse_table
from tests.conftest import fixture_bytes, fixture_json
from tests.images import png_b64
from tests.property import promises
from tests.upstreams import rules

DEEPSEEK = "opencode/chat__deepseek-chat__single_png__turn2.json"
PAYLOAD = png_b64(0)
IMAGE_URL = f"data:image/png;base64,{PAYLOAD}"


def run(dialect: Dialect, host: str, body: bytes | dict[str, Any], table: Any = None) -> engine.Outcome:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    settings = engine.Settings(table=table) if table is not None else engine.Settings()
    return engine.process(engine.Request(dialect, host, 443, raw), settings)


def media_parts(body: Any) -> list[dict[str, Any]]:
    return list(promises.media(body))


def test_opencode_deepseek_capture_gets_a_placeholder_where_the_image_was() -> None:
    sent = fixture_json(DEEPSEEK)
    assert rules.check("deepseek", "/v1/chat/completions", sent) is not None  # the 400 this repair exists for
    outcome = run(CHAT, "api.deepseek.com", fixture_bytes(DEEPSEEK))
    got = json.loads(outcome.body)
    assert rules.check("deepseek", "/v1/chat/completions", got) is None
    assert not media_parts(got)
    assert got["messages"][4]["content"] == [
        {"type": "text", "text": "Attached media from tool result:"},
        {"type": "text", "text": "[image omitted: model deepseek-chat does not take image input "
                                 "(upstream profile deepseek: no media input)]"}]
    assert got["messages"][:4] == sent["messages"][:4]  # every other message as it was
    [change] = outcome.changes
    assert change.repair == "omit-unsupported-media" and change.location == "messages[4].content"
    [dropped] = change.dropped
    url = sent["messages"][4]["content"][1]["image_url"]["url"]
    assert f"sha256:{digest(url.partition(',')[2])}" in dropped and "deepseek-chat" in dropped


def test_is_idempotent_on_the_deepseek_capture() -> None:
    once = run(CHAT, "api.deepseek.com", fixture_bytes(DEEPSEEK))
    assert run(CHAT, "api.deepseek.com", once.body).status == "untouched"


def test_a_vision_model_keeps_its_user_images() -> None:
    body = fixture_json("opencode/chat__mock-vision__two_png__turn2.json")
    for model in ("mock-vision", "gpt-4.1", "grok-4.3"):
        body["model"] = model
        for host in ("api.openai.com", "api.x.ai", "llm.example"):
            assert run(CHAT, host, body).status == "untouched", (model, host)


def user_chat(model: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": [{"type": "text", "text": "see"}, *parts]}]}


def test_text_only_by_catalogue_drops_user_images_and_files() -> None:
    pdf = {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0x", "filename": "r.pdf"}}
    outcome = run(CHAT, "api.x.ai", user_chat("grok-code-fast-1", {"type": "image_url",
                                                                           "image_url": {"url": IMAGE_URL}}, pdf))
    got = json.loads(outcome.body)
    assert [p["text"] for p in got["messages"][0]["content"]] == [
        "see", "[image omitted: model grok-code-fast-1 does not take image input]",
        "[file omitted: model grok-code-fast-1 does not take file input]"]
    assert len(outcome.changes[0].dropped) == 2


def test_a_model_the_catalogue_does_not_know_keeps_its_images() -> None:
    body = user_chat("my-local-model", {"type": "image_url", "image_url": {"url": IMAGE_URL}})
    assert run(CHAT, "llm.example", body).status == "untouched"


def test_a_profiles_file_input_text_makes_a_model_text_only() -> None:
    table = parse_table({"models": {"my-local-*": {"input": ["text"]}}})
    body = user_chat("my-local-model", {"type": "image_url", "image_url": {"url": IMAGE_URL}})
    got = json.loads(run(CHAT, "llm.example", body, table).body)
    assert not media_parts(got)
    assert "[image omitted: model my-local-model does not take image input]" in json.dumps(got)


def test_a_profiles_file_input_with_image_keeps_images_on_deepseek() -> None:
    table = parse_table({"models": {"deepseek-vision-*": {"input": ["text", "image", "pdf"]}}})
    body = user_chat("deepseek-vision-1", {"type": "image_url", "image_url": {"url": IMAGE_URL}})
    assert run(CHAT, "api.deepseek.com", body, table).status == "untouched"


def test_audio_is_omitted_for_a_model_without_audio_input() -> None:
    body = user_chat("deepseek-chat", {"type": "input_audio", "input_audio": {"data": PAYLOAD, "format": "wav"}})
    got = json.loads(run(CHAT, "api.deepseek.com", body).body)
    assert not media_parts(got) and "[audio omitted: model deepseek-chat" in json.dumps(got)
    assert rules.check("deepseek", "/v1/chat/completions", got) is None


def test_responses_user_image_file_and_tool_output_array_are_all_omitted() -> None:
    body = {"model": "grok-code-fast-1", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "see"},
                                     {"type": "input_image", "image_url": IMAGE_URL, "detail": "auto"},
                                     {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0x",
                                      "filename": "a.pdf"}]},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1",
         "output": [{"type": "input_text", "text": "a.png"},
                    {"type": "input_image", "image_url": IMAGE_URL, "detail": "auto"}]}]}
    outcome = run(RESPONSES, "api.openai.com", body)  # openai takes array outputs: nothing hoists
    got = json.loads(outcome.body)
    assert not media_parts(got)
    assert got["input"][2]["output"][0] == {"type": "input_text", "text": "a.png"}
    assert len([d for c in outcome.changes for d in c.dropped]) == 3
    assert rules.check("openai", "/v1/responses", got) is None


def test_anthropic_image_and_document_blocks_in_messages_and_tool_results() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PAYLOAD}}
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}}
    text_doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}}
    body = {"model": "deepseek-chat", "max_tokens": 100, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "see"}, image, pdf, text_doc]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "a.png"}, image]}]}]}
    outcome = run(MESSAGES, "api.deepseek.com", body)
    got = json.loads(outcome.body)
    kinds = [b["type"] for b in got["messages"][0]["content"]]
    assert kinds == ["text", "text", "text", "document"]  # the plain-text document is text input: kept
    assert got["messages"][0]["content"][3] == text_doc
    assert got["messages"][2]["content"][0]["content"][1]["text"].startswith("[image omitted: model deepseek-chat")
    assert len([d for c in outcome.changes for d in c.dropped]) == 3
    assert [c.location for c in outcome.changes] == ["messages[0].content", "messages[2].content[0].content"]


def test_a_claude_model_keeps_its_anthropic_images() -> None:
    raw = fixture_bytes("claude-code/single_png__turn2.json")
    assert run(MESSAGES, "api.anthropic.com", raw).status == "untouched"


def test_can_be_disabled() -> None:
    settings = engine.Settings(enabled=frozenset({"hoist-tool-media"}))
    outcome = engine.process(engine.Request(CHAT, "api.deepseek.com", 443, fixture_bytes(DEEPSEEK)), settings)
    assert outcome.status == "untouched"
