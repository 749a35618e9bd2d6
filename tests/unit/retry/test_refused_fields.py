"""Reading which request field a rejection refuses: each vendor's text and envelope, and what teaches nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmfix.retry import rejections
from llmfix.retry.refused_fields import name_of
from tests.upstreams import field_rules


def matched(status: int, body: Any, dialect: str = "messages") -> tuple[tuple[str, bool], ...] | None:
    found = rejections.match(dialect, status, json.dumps(body, ensure_ascii=False).encode())
    return None if found is None else found.flags


def strip(*names: str) -> tuple[tuple[str, bool], ...]:
    return tuple((f"strip:{n}", True) for n in names)


@pytest.mark.parametrize(("vendor", "status"), [("anthropic", 400), ("copilot", 400), ("fastapi", 422),
                                                ("azure", 400), ("vllm", 400)])
@pytest.mark.parametrize("dialect", ["chat", "responses", "messages"])
def test_each_vendors_envelope_names_the_field(vendor: str, status: int, dialect: str) -> None:
    rejection = field_rules.rejection(vendor, ["prompt_cache_key"], "ses_1")
    assert rejection.status == status
    found = rejections.match(dialect, rejection.status, json.dumps(rejection.body).encode())
    assert found is not None and found.rule.name == "refused-field"
    assert found.flags == strip("prompt_cache_key")


@pytest.mark.parametrize(("path", "name"), [
    (["context_management"], "context_management"),
    (["output_config"], "output_config"),
    (["messages", 0, "content", 3, "text", "cache_control", "ephemeral", "ttl"], "cache_control.ttl"),
    (["messages", 1, "content", 0, "thinking", "cache_control"], "thinking.cache_control"),
    (["system", 1, "cache_control", "ephemeral", "scope"], "cache_control.scope"),
    (["tools", 3, "cache_control"], "tools.cache_control"),
    (["thinking", "disabled", "display"], "thinking.disabled.display"),
    (["context_management", "edits", 0, "keep"], "context_management"),
])
def test_anthropic_and_fastapi_paths(path: list[str | int], name: str) -> None:
    for vendor in ("anthropic", "fastapi", "vllm", "copilot"):
        rejection = field_rules.rejection(vendor, path, None)
        assert matched(rejection.status, rejection.body) == strip(name), vendor


@pytest.mark.parametrize("body", [
    # copilot-api wraps Copilot's JSON in a string (caozhiyuan/copilot-api #143)
    {"error": {"message": json.dumps({"message": "system.1.cache_control.ephemeral.scope: "
                                                 "Extra inputs are not permitted"}), "type": "error"}},
    {"type": "error", "error": {"type": "invalid_request_error",
                                "message": "system.1.cache_control.ephemeral.scope: Extra inputs are not permitted"},
     "request_id": "req_011CcchnH8NHHiu4Atuq4tCC"},
])
def test_wrapped_texts(body: Any) -> None:
    assert matched(400, body) == strip("cache_control.scope")


def test_other_documented_texts() -> None:
    assert matched(400, {"error": "Extra inputs are not permitted, field: 'promptCacheKey', value: 'ses_5'"},
                   "chat") == strip("promptCacheKey")  # anomalyco/opencode #4386
    assert matched(422, {"message": "body.prompt_cache_key: property 'body.prompt_cache_key' is unsupported",
                         "type": "invalid_request_error", "param": "validation_error", "code": "wrong_api_format"},
                   "chat") == strip("prompt_cache_key")  # Cerebras (zed-industries/zed #36215)
    assert matched(400, {"error": {"message": "property 'prompt_cache_key' is unsupported"}}, "chat") == strip(
        "prompt_cache_key")  # Groq
    assert matched(400, {"error": {"message": "未知请求字段：prompt_cache_key"}}, "chat") == strip("prompt_cache_key")


def test_several_fields_in_one_list() -> None:
    detail = [{"type": "extra_forbidden", "loc": ["body", k], "msg": "Extra inputs are not permitted", "input": 1}
              for k in ("context_management", "output_config")]
    assert matched(422, {"detail": detail}) == strip("context_management", "output_config")


@pytest.mark.parametrize("body", [
    {"type": "error", "error": {"message": "messages.1.content.0.text: Extra inputs are not permitted"}},
    {"type": "error", "error": {"message": "messages.1.content.0.text.citations: Extra inputs are not permitted"}},
    {"type": "error", "error": {"message": "tools.0.custom.eager_input_streaming: Extra inputs are not permitted"}},
    {"type": "error", "error": {"message": "tools.4.custom.input_examples: Extra inputs are not permitted"}},
    {"error": "Extra inputs are not permitted, field: 'messages[2].refusal', value: None"},
    {"object": "Error", "detail": [{"type": "extra_forbidden", "loc": ["body", "tools"], "msg":
                                    "Extra inputs are not permitted", "input": []}], "code": 3001},
    {"object": "error", "message": "[{'type': 'extra_forbidden', 'loc': ('body', 'messages', 0, 'typed-dict', 'id'), "
                                   "'msg': 'Extra inputs are not permitted', 'input': 1947269257}]", "code": 400},
    {"error": {"message": "Unrecognized request argument supplied: messages"}},
    {"error": {"message": "model: Extra inputs are not permitted"}},
    {"error": {"message": "stream: Extra inputs are not permitted"}},
])
def test_a_rejection_naming_content_or_declarations_teaches_nothing(body: Any) -> None:
    for dialect in ("chat", "responses", "messages"):
        assert matched(400, body, dialect) is None
        assert matched(422, body, dialect) is None


def test_other_statuses_and_unrelated_texts_are_not_read() -> None:
    rejection = field_rules.rejection("anthropic", ["context_management"], {})
    assert matched(500, rejection.body) is None and matched(404, rejection.body) is None
    assert matched(400, {"error": {"message": "context_management is great"}}) is None


def test_a_specific_rule_wins_over_the_field_reading() -> None:
    """GLM's 422 for a system role, with an extra field in the same list: the fold is learned, as before."""
    detail = [{"type": "literal_error", "loc": ["body", "messages", 1, "role"], "msg": "Input should be 'user' or "
               "'assistant'", "input": "system"},
              {"type": "extra_forbidden", "loc": ["body", "context_management"], "msg":
               "Extra inputs are not permitted", "input": {}}]
    found = rejections.match("messages", 422, json.dumps({"detail": detail}).encode())
    assert found is not None and found.rule.name == "messages-system-role-literal"


def test_paths_with_pydantic_tags() -> None:
    assert name_of(["body", "function-after[check(), typed-dict]", "prompt_cache_key"]) == "prompt_cache_key"
    assert name_of(["body", "tagged-union[A,B]", "messages", 0]) is None
    assert name_of([]) is None and name_of([3]) is None
