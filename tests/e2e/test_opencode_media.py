"""End to end: opencode's captures through a real mitmdump with llmfix, sent by the openai SDK.

- xAI (``@ai-sdk/xai``): tool images serialized as base64 TEXT. With a vision model the strict xAI mock
  receives each image as an image part — its payload the very base64 the client had put in the text —
  once, in call order, in one user message after the tool run, the tool texts kept and no base64 left in
  any text. With ``grok-4`` (text-only per models.dev): no base64 at all, a placeholder, a ``dropped`` record.
- DeepSeek: opencode's user-message image makes the strict DeepSeek mock answer 400 ``unknown variant
  `image_url```; through llmfix 200, with a placeholder where the image was and every text kept.
- Controls leave byte-identical: the vision capture to OpenAI, base64 inside other tool-result text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.harness import Mitmdump, loopback_proxy
from tests.property import promises
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(180)
XAI = "opencode/xai-builtin__grok-4__two_png__turn2.json"
DEEPSEEK = "opencode/chat__deepseek-chat__single_png__turn2.json"
VISION = "opencode/chat__mock-vision__two_png__turn2.json"
KEY = "sk-test-not-a-real-key-opencode"


def start(upstream: MockUpstream, confdir: Path, *, llmfix: bool = True, **options: str) -> Mitmdump:
    return loopback_proxy(upstream, confdir, llmfix=llmfix, connection_strategy="lazy", **options)


@pytest.fixture(scope="module")
def fixed(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    log = tmp_path_factory.mktemp("log") / "changes.jsonl"
    with start(upstream, tmp_path_factory.mktemp("confdir"), llmfix_log=str(log)) as proxy:
        proxy.log_path = log  # type: ignore[attr-defined]
        yield proxy


@pytest.fixture(scope="module")
def bare(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    with start(upstream, tmp_path_factory.mktemp("confdir"), llmfix=False) as proxy:
        yield proxy


def sdk_send(proxy: Mitmdump, base_url: str, body: dict[str, Any]) -> list[Any]:
    """Send ``body`` with the openai SDK through ``proxy`` (HTTPS, mitmproxy's CA); the streamed chunks."""
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=30) as http:
        sdk = openai.OpenAI(base_url=base_url, api_key=KEY, http_client=http, max_retries=0)
        return list(sdk.chat.completions.create(**body))


def received(upstream: MockUpstream, before: int) -> Any:
    [seen] = upstream.requests[before:]
    return seen


def client_base64(body: dict[str, Any]) -> list[str]:
    """The base64 opencode put in each tool message's text, in call order."""
    return [p["data"] for m in body["messages"] if m["role"] == "tool"
            for p in json.loads(m["content"]) if p["type"] == "image-data"]


def texts(body: Any) -> list[str]:
    return list(promises.strings(body))


def log_records(proxy: Mitmdump) -> list[dict[str, Any]]:
    return [json.loads(line) for line in proxy.log_path.read_text().splitlines()]  # type: ignore[attr-defined]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_xai_vision_model_receives_each_image_as_an_image_part(fixed: Mitmdump, upstream: MockUpstream) -> None:
    body = capture_json(XAI)
    body["model"] = "grok-4.3"
    sent_b64 = client_base64(body)
    before = len(upstream.requests)
    chunks = sdk_send(fixed, "https://api.x.ai/v1", body)
    assert chunks  # the mock's streamed answer reached the SDK
    seen = received(upstream, before)
    assert seen.status == 200 and seen.headers["host"] == "api.x.ai"
    got = seen.json["messages"]
    assert [m["role"] for m in got[3:]] == ["tool", "tool", "user"]
    for m in got[3:5]:
        assert "Image read successfully" in texts(m)
    images = list(promises.media(seen.json))
    assert all(image in got[5]["content"] for image in images)  # all in the one user message after the run
    payloads = [image["image_url"]["url"].removeprefix("data:image/png;base64,") for image in images]
    assert [sha(p) for p in payloads] == [sha(b) for b in sent_b64]  # each once, in call order
    assert not any(b in t for t in texts(seen.json) for b in sent_b64)  # no base64 left in any text
    fixed.wait_for_output("restore-text-media: messages[4].content")
    records = [r for r in log_records(fixed) if r["model"] == "grok-4.3"]
    assert {r["repair"] for r in records} == {"restore-text-media", "hoist-tool-media"}
    logged = fixed.output() + json.dumps(records)
    assert not any(b[:40] in logged for b in sent_b64) and KEY not in logged


def test_xai_text_only_model_gets_a_placeholder_and_a_dropped_record(fixed: Mitmdump, upstream: MockUpstream) -> None:
    body = capture_json(XAI)  # model grok-4: text-only per models.dev
    sent_b64 = client_base64(body)
    before = len(upstream.requests)
    sdk_send(fixed, "https://api.x.ai/v1", body)
    seen = received(upstream, before)
    assert seen.status == 200
    assert not any(b in seen.body.decode() for b in sent_b64)  # no base64 anywhere
    assert not list(promises.media(seen.json))
    tools = [m for m in seen.json["messages"] if m["role"] == "tool"]
    for m in tools:
        assert texts(m["content"]) == ["Image read successfully",
                            "[1 image from this tool result omitted: model grok-4 does not take image input]"]
    fixed.wait_for_output("does not take image input")
    dropped = [d for r in log_records(fixed) if r["model"] == "grok-4" for d in r.get("dropped", [])]
    assert len(dropped) == 2 and all("<image/png" in d and "model grok-4" in d for d in dropped)


def test_deepseek_without_llmfix_answers_400(bare: Mitmdump) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk_send(bare, "https://api.deepseek.com/v1", capture_json(DEEPSEEK))
    assert caught.value.status_code == 400
    assert "unknown variant `image_url`, expected `text`" in caught.value.message


def test_deepseek_with_llmfix_answers_200_with_a_placeholder_for_the_image(
    fixed: Mitmdump, upstream: MockUpstream
) -> None:
    body = capture_json(DEEPSEEK)
    before = len(upstream.requests)
    assert sdk_send(fixed, "https://api.deepseek.com/v1", body)
    seen = received(upstream, before)
    assert seen.status == 200, seen.reason
    assert not list(promises.media(seen.json))
    got_texts = texts(seen.json)
    for text in texts(body):
        assert any(text in t for t in got_texts), f"text lost: {text[:60]!r}"
    assert seen.json["messages"][4]["content"][1] == {
        "type": "text",
        "text": "[image omitted: model deepseek-chat does not take image input (upstream profile deepseek: no media "
                "input)]"}
    fixed.wait_for_output("omit-unsupported-media: messages[4].content")


def post_raw(proxy: Mitmdump, url: str, raw: bytes) -> httpx.Response:
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=30) as c:
        return c.post(url, content=raw, headers={"content-type": "application/json", "authorization": f"Bearer {KEY}"})


B64 = "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAGUlEQVR42mP4z8AARwz/cSAKJZB5yICKEgBkCl+hRHxicwAAAABJRU5ErkJggg=="
CONTROLS = {
    "b64-file": B64,
    "json-config-icon": json.dumps({"name": "app", "icon": f"data:image/png;base64,{B64}"}, indent=2),
    "icon-object": json.dumps([{"name": "app", "icon": {"data": B64, "mediaType": "image/png"}}]),
}


def with_tool_text(text: str, model: str) -> bytes:
    body = capture_json(VISION)
    body["model"] = model
    body["messages"] = body["messages"][:4]  # user, assistant with two calls, first tool message...
    body["messages"][2]["tool_calls"] = body["messages"][2]["tool_calls"][:1]
    body["messages"][3]["content"] = text  # ...holding base64 inside other text
    return json.dumps(body, separators=(",", ":")).encode()


@pytest.mark.parametrize("control", CONTROLS)
@pytest.mark.parametrize(("url", "model"), [
    ("https://api.x.ai/v1/chat/completions", "grok-4.3"),
    ("https://api.x.ai/v1/chat/completions", "grok-4"),
    ("https://api.openai.com/v1/chat/completions", "gpt-4.1"),
    ("https://api.deepseek.com/v1/chat/completions", "deepseek-chat"),
    ("https://llm.internal.example/v1/chat/completions", "mock-model"),
])
def test_base64_inside_other_text_leaves_byte_identical(
    fixed: Mitmdump, upstream: MockUpstream, control: str, url: str, model: str
) -> None:
    raw = with_tool_text(CONTROLS[control], model)
    before = len(upstream.requests)
    response = post_raw(fixed, url, raw)
    assert received(upstream, before).body == raw
    assert response.status_code == 200, response.text


def test_the_vision_capture_to_openai_leaves_byte_identical(fixed: Mitmdump, upstream: MockUpstream) -> None:
    raw = capture_bytes(VISION)
    before = len(upstream.requests)
    response = post_raw(fixed, "https://api.openai.com/v1/chat/completions", raw)
    assert received(upstream, before).body == raw
    assert response.status_code == 200
