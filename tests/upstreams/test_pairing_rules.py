"""The strict mocks reject duplicate and empty tool-call ids with the real texts, in all three dialects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.upstreams.captures import capture_json
from tests.upstreams.rules import check

CHAT, RESPONSES, MESSAGES = "/v1/chat/completions", "/v1/responses", "/v1/messages"


@pytest.mark.parametrize("rules", ["openai", "xai", "spec"])
def test_chat_opencode_mistral_duplicate_ids_are_rejected_like_openai(rules: str) -> None:
    body = capture_json("opencode/chat__mistral-medium-latest__two_png__turn2.json")
    rejection = check(rules, CHAT, body)
    assert rejection is not None and rejection.status == 400
    assert rejection.body["error"] == {
        "message": "Invalid parameter: Duplicate value for 'tool_call_id' of 'callmock0', in messages[3] and "
                   "messages[4].",
        "type": "invalid_request_error", "param": "messages.[4].tool_call_id", "code": None}


def test_chat_distinct_ids_pass() -> None:
    body = capture_json("opencode/chat__mistral-medium-latest__two_png__turn2.json")
    body["messages"][2]["tool_calls"][1]["id"] = body["messages"][4]["tool_call_id"] = "callmock1"
    assert check("openai", CHAT, body) is None


def _parallel() -> dict[str, Any]:
    return capture_json("pi-ai/xai_responses_parallel_tools.json")


@pytest.mark.parametrize("rules", ["openai", "spec"])
def test_responses_duplicate_call_id(rules: str) -> None:
    body = _parallel()
    body["input"][3]["call_id"] = body["input"][5]["call_id"] = "call_mock_13_0"
    rejection = check(rules, RESPONSES, body)
    assert rejection is not None
    assert (rejection.status, rejection.message) == (400, "Duplicate 'call_id': call_mock_13_0")


def test_responses_empty_call_id_on_a_call() -> None:
    body = _parallel()
    body["input"][2]["call_id"] = ""
    rejection = check("openai", RESPONSES, body)
    assert rejection is not None and rejection.message == (
        "Invalid 'input[2].call_id': empty string. Expected a string with minimum length 1, but got an empty "
        "string instead.")


def test_anthropic_duplicate_tool_use_id_across_turns() -> None:
    body = capture_json("pi-ai/anthropic_messages.json")
    body["messages"][3:3] = [copy.deepcopy(body["messages"][1]), copy.deepcopy(body["messages"][2])]
    rejection = check("anthropic", MESSAGES, body)
    assert rejection is not None and rejection.status == 400
    assert rejection.body == {"type": "error", "error": {
        "type": "invalid_request_error", "message": "messages.3.content.0: `tool_use` ids must be unique"}}


def test_anthropic_claude_code_capture_passes() -> None:
    assert check("anthropic", MESSAGES, capture_json("claude-code/single_png__turn2.json")) is None
