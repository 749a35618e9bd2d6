"""The strict mocks on opencode's captures: DeepSeek Chat rejects any ``image_url`` part with its real
text; xAI Chat accepts the base64-as-text tool messages (the silent loss) and records what it received."""

from __future__ import annotations

import copy
import json
import re

import httpx
import pytest

from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import MockUpstream
from tests.upstreams.rules import check

CHAT = "/v1/chat/completions"
DEEPSEEK = "opencode/chat__deepseek-chat__single_png__turn2.json"
XAI = "opencode/xai-builtin__grok-4__two_png__turn2.json"
VISION = "opencode/chat__mock-vision__two_png__turn2.json"
UNKNOWN_VARIANT = re.compile(
    r"^Failed to deserialize the JSON body into the target type: messages\[4\]: unknown variant `image_url`, "
    r"expected `text` at line 1 column \d+$")


def test_deepseek_rejects_opencodes_user_message_image_with_its_real_text() -> None:
    rejection = check("deepseek", CHAT, capture_json(DEEPSEEK))
    assert rejection is not None and rejection.status == 400 and rejection.reason == "image-part-unsupported"
    assert UNKNOWN_VARIANT.match(rejection.message), rejection.message
    assert rejection.body["error"]["type"] == "invalid_request_error" and rejection.body["error"]["param"] is None


@pytest.mark.parametrize("where", ["user", "system", "assistant"])
def test_deepseek_rejects_an_image_url_part_in_any_message(where: str) -> None:
    body = {"model": "deepseek-chat", "messages": [{"role": where, "content": [
        {"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}
    rejection = check("deepseek", CHAT, body)
    assert rejection is not None and "unknown variant `image_url`, expected `text`" in rejection.message


def test_deepseek_accepts_the_capture_once_the_image_is_a_text_part() -> None:
    body = copy.deepcopy(capture_json(DEEPSEEK))
    body["messages"][4]["content"][1] = {"type": "text", "text": "[image omitted]"}
    assert check("deepseek", CHAT, body) is None


@pytest.mark.parametrize("rules", ["xai", "openai"])
def test_the_vision_capture_is_valid_for_openai_and_xai(rules: str) -> None:
    assert check(rules, CHAT, capture_json(VISION)) is None


def test_xai_chat_mock_accepts_base64_text_and_records_the_body() -> None:
    raw = capture_bytes(XAI)
    with MockUpstream("xai") as up, httpx.Client(timeout=10, trust_env=False) as client:
        response = client.post(f"{up.url}{CHAT}", content=raw, headers={"content-type": "application/json"})
        [seen] = up.requests
    assert response.status_code == 200  # the silent loss: xAI takes the image as text
    assert seen.body == raw and seen.rules == "xai" and seen.status == 200
    tool = [m for m in seen.json["messages"] if m["role"] == "tool"]
    assert all(json.loads(m["content"])[1]["type"] == "image-data" for m in tool)
