"""The strict mocks' refusals of request fields and of blank text: the vendors' texts and envelopes, on the captures."""

from __future__ import annotations

import copy

import pytest

from tests.upstreams import empty_rules, field_rules
from tests.upstreams.captures import capture_json
from tests.upstreams.rules import check

CC = "claude-code/single_png__turn2.json"
CODEX = "codex/turn2_request.json"


def test_each_vendor_refuses_claude_codes_context_management_its_own_way() -> None:
    body = capture_json(CC)
    edits = body["context_management"]
    got = {v: field_rules.refusal(v, ("context_management",), body) for v in field_rules.VENDORS}
    assert got["anthropic"].status == 400 and got["anthropic"].body == {"type": "error", "error": {
        "type": "invalid_request_error", "message": "context_management: Extra inputs are not permitted"}}
    assert got["copilot"].body == {"message": "context_management: Extra inputs are not permitted",
                                   "code": "invalid_request_body"}
    assert got["fastapi"].status == 422 and got["fastapi"].body == {"detail": [
        {"type": "extra_forbidden", "loc": ["body", "context_management"], "msg": "Extra inputs are not permitted",
         "input": edits}]}
    assert got["azure"].body == {"error": {"code": "unrecognized_request_argument",
                                           "message": "Unrecognized request argument supplied: context_management"}}
    assert got["vllm"].body["message"] == ("[{'type': 'extra_forbidden', 'loc': ('body', 'context_management'), "
                                           "'msg': 'Extra inputs are not permitted', 'input': {'edits': [{'type': "
                                           "'clear_thinking_20251015', 'keep': 'all'}]}}]")


def test_the_first_refused_field_the_body_carries() -> None:
    body = capture_json(CC)
    assert field_rules.refusal("anthropic", ("prompt_cache_key", "output_config"), body).message == (
        "output_config: Extra inputs are not permitted")
    assert field_rules.refusal("anthropic", ("prompt_cache_key",), body) is None
    assert field_rules.refusal("azure", ("prompt_cache_key",), capture_json(CODEX)).body["error"]["message"] == (
        "Unrecognized request argument supplied: prompt_cache_key")


def test_marker_paths_name_the_block_type_and_the_markers() -> None:
    body = capture_json(CC)
    body["messages"][3]["content"][0]["cache_control"]["ttl"] = "1h"
    body["messages"][2]["content"].insert(0, {"type": "thinking", "thinking": "t", "signature": "s",
                                              "cache_control": {"type": "ephemeral"}})
    assert field_rules.refusal("anthropic", ("cache_control.ttl",), body).message == (
        "messages.3.content.0.tool_result.cache_control.ephemeral.ttl: Extra inputs are not permitted")
    assert field_rules.refusal("anthropic", ("thinking.cache_control",), body).message == (
        "messages.2.content.0.thinking.cache_control: Extra inputs are not permitted")
    body["system"][3]["cache_control"]["ttl"] = "1h"
    assert field_rules.refusal("anthropic", ("cache_control.ttl",), body).message.startswith("system.3.cache_control.")


def test_anthropic_refuses_blank_text_with_its_texts() -> None:
    body = capture_json(CC)
    assert check("anthropic", "/v1/messages", body) is None
    for blank, text in (("", empty_rules.NON_EMPTY), ("  \n", empty_rules.NON_WHITESPACE)):
        broken = copy.deepcopy(body)
        broken["messages"][2]["content"].append({"type": "text", "text": blank})
        assert check("anthropic", "/v1/messages", broken).message == text
        broken["messages"][2]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        assert check("anthropic", "/v1/messages", broken).message == (
            "messages.2.content.1.text: cache_control cannot be set for empty text blocks")
    assert check("deepseek", "/anthropic/v1/messages", {"messages": [
        {"role": "user", "content": [{"type": "text", "text": ""}]}]}) is None  # only the anthropic rules


@pytest.mark.parametrize(("content", "last", "text"), [
    ([], False, "messages.1: all messages must have non-empty content except for the optional final assistant message"),
    ("", False, "messages.1: all messages must have non-empty content except for the optional final assistant message"),
    (" ", False, empty_rules.NON_WHITESPACE),
    ([], True, None),
])
def test_empty_messages(content: object, last: bool, text: str | None) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": content}]
    if not last:
        messages.append({"role": "user", "content": "again"})
    rejection = empty_rules.check({"messages": messages})
    assert (rejection.message if rejection else None) == text
