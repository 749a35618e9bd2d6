"""Each strict upstream rule rejects its bad shape with the real text; valid captures pass."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.images import png_url
from tests.upstreams.captures import capture_json
from tests.upstreams.rules import Rejection, check, dialect_of, rules_for_host

RESPONSES, CHAT, MESSAGES = "/v1/responses", "/v1/chat/completions", "/v1/messages"
XAI_TEXT = re.compile(
    r"^Failed to deserialize the JSON body into the target type: input: data did not match any variant "
    r"of untagged enum ModelInput at line 1 column \d+$"
)
ORPHAN_OPENAI = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
)
ORPHAN_DEEPSEEK = "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
MISSING_PREFIX = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
    "'tool_call_id'. The following tool_call_ids did not have response messages: "
)
IMAGE = {"type": "input_image", "image_url": png_url(0), "detail": "auto"}
CHAT_IMAGE = {"type": "image_url", "image_url": {"url": png_url(0)}}


# ---------------------------------------------------------------- captured traffic


@pytest.mark.parametrize(
    ("name", "rules", "path"),
    [
        ("pi-ai/openai_responses.json", "openai", RESPONSES),
        ("pi-ai/openai_responses.json", "spec", RESPONSES),
        ("pi-ai/chat_completions.json", "openai", CHAT),
        ("pi-ai/chat_completions.json", "xai", CHAT),
        ("pi-ai/anthropic_messages.json", "anthropic", MESSAGES),
        ("codex/turn1_request.json", "openai", RESPONSES),
        ("codex/turn1_request.json", "xai", RESPONSES),
        ("codex/turn2_request.json", "openai", RESPONSES),
        ("claude-code/single_png__turn2.json", "anthropic", MESSAGES),
        *[
            (f"droid/{version}__{scenario}__turn{turn}.json", "openai", CHAT)
            for version in ("0.215.0", "0.225.2")
            for scenario in ("single_image", "text_then_image", "two_images_noimg")
            for turn in (1, 2)
        ],
        *[
            (f"droid/{version}__two_images_noimg__turn{turn}.json", "deepseek", CHAT)
            for version in ("0.215.0", "0.225.2")
            for turn in (1, 2)
        ],
    ],
)
def test_valid_capture_passes(name: str, rules: str, path: str) -> None:
    assert check(rules, path, capture_json(name)) is None


@pytest.mark.parametrize(
    "name", ["pi-ai/xai_responses.json", "pi-ai/xai_responses_image_only.json",
             "pi-ai/xai_responses_parallel_tools.json", "codex/turn2_request.json"]
)
def test_xai_rejects_array_tool_output_capture(name: str) -> None:
    rejection = check("xai", RESPONSES, capture_json(name))
    assert rejection is not None
    assert rejection.status == 422
    assert rejection.reason == "tool-output-not-string"
    assert rejection.body["code"] == "Client specified an invalid argument"
    assert XAI_TEXT.match(rejection.body["error"])


@pytest.mark.parametrize("version", ["0.215.0", "0.225.2"])
def test_openai_rejects_droid_orphan_tool(version: str) -> None:
    rejection = check("openai", CHAT, capture_json(f"droid/{version}__two_images__turn2.json"))
    assert rejection == Rejection(
        status=400,
        body={"error": {"message": ORPHAN_OPENAI, "type": "invalid_request_error",
                        "param": "messages.[6].role", "code": None}},
        reason="orphan-tool-message",
    )


@pytest.mark.parametrize("version", ["0.215.0", "0.225.2"])
def test_deepseek_rejects_droid_orphan_tool_once_images_are_gone(version: str) -> None:
    # DeepSeek's deserializer rejects the image parts before it looks at pairing (see the next test),
    # so the orphan is shown on the same capture with its image parts removed.
    body = _without_chat_images(capture_json(f"droid/{version}__two_images__turn2.json"))
    rejection = check("deepseek", CHAT, body)
    assert rejection is not None
    assert (rejection.status, rejection.reason) == (400, "orphan-tool-message")
    assert rejection.body == {"error": {"message": ORPHAN_DEEPSEEK, "type": "invalid_request_error",
                                        "param": None, "code": "invalid_request_error"}}


@pytest.mark.parametrize("version", ["0.215.0", "0.225.2"])
def test_deepseek_rejects_droid_images_first(version: str) -> None:
    rejection = check("deepseek", CHAT, capture_json(f"droid/{version}__two_images__turn2.json"))
    assert rejection is not None
    assert (rejection.status, rejection.reason) == (400, "image-part-unsupported")
    assert re.fullmatch(
        r"Failed to deserialize the JSON body into the target type: messages\[5\]: unknown variant "
        r"`image_url`, expected `text` at line 1 column \d+",
        rejection.message,
    )


def _without_chat_images(body: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(body)
    for message in body["messages"]:
        if isinstance(message.get("content"), list):
            message["content"] = [p for p in message["content"] if p.get("type") != "image_url"]
    return body


# ---------------------------------------------------------------- Responses


def _call(call_id: str, kind: str = "function_call") -> dict[str, Any]:
    if kind == "custom_tool_call":
        return {"type": kind, "call_id": call_id, "name": "apply_patch", "input": "*** Begin Patch"}
    return {"type": kind, "call_id": call_id, "name": "read", "arguments": "{}"}


def _output(call_id: Any, output: Any = "ok", kind: str = "function_call_output") -> dict[str, Any]:
    item = {"type": kind, "output": output}
    if call_id is not None:
        item["call_id"] = call_id
    return item


USER_MSG = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}


@pytest.mark.parametrize(
    ("items", "reason"),
    [
        ([_call("c1"), _output("c1", [{"type": "input_text", "text": "x"}])], "tool-output-not-string"),
        ([_call("c1"), _output("c1", [IMAGE])], "tool-output-not-string"),
        ([_call("c1"), _output("c1", {"text": "x"})], "tool-output-not-string"),
        ([_call("p1", "custom_tool_call"), _output("p1", "done", "custom_tool_call_output")],
         "custom-tool-call-output-unsupported"),
        ([USER_MSG, {"type": "item_reference", "id": "msg_1"}], "item-reference-unsupported"),
        ([{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}],
         "input-image-without-url"),
        ([{"role": "user", "content": [{"type": "input_image", "image_url": None, "detail": "auto"}]}],
         "input-image-without-url"),
    ],
)
def test_xai_responses_rejections(items: list[Any], reason: str) -> None:
    rejection = check("xai", RESPONSES, {"model": "grok-4.3", "input": items})
    assert rejection is not None
    assert (rejection.status, rejection.reason) == (422, reason)
    assert XAI_TEXT.match(rejection.body["error"])


@pytest.mark.parametrize(
    "items",
    [
        [USER_MSG, _call("c1"), _output("c1", "text result"), USER_MSG],
        [{"role": "user", "content": [IMAGE]}],
        [USER_MSG, _call("c1")],  # xAI's own schema does not pair calls (not checked)
    ],
)
def test_xai_responses_accepts(items: list[Any]) -> None:
    assert check("xai", RESPONSES, {"model": "grok-4.3", "input": items}) is None


OPENAI_RESPONSES_CASES = [
    pytest.param([USER_MSG, _output("call_x")],
                 "No tool call found for function call output with call_id call_x.", "input",
                 "orphan-tool-output", id="orphan-output"),
    pytest.param([USER_MSG, _output("call_x"), _call("call_x")],
                 "No tool call found for function call output with call_id call_x.", "input",
                 "orphan-tool-output", id="output-before-call"),
    pytest.param([USER_MSG, _output("p1", "done", "custom_tool_call_output")],
                 "No tool call found for function call output with call_id p1.", "input",
                 "orphan-tool-output", id="orphan-custom-output"),
    pytest.param([USER_MSG, _call("call_a"), _call("call_b"), _output("call_a")],
                 "No tool output found for function call call_b.", "input",
                 "tool-output-missing", id="missing-output"),
    pytest.param([_call("c1"), _output("c1", [{"type": "text", "text": "x"}])],
                 "Invalid value: 'text'. Supported values are: 'input_text', 'input_image', and 'input_file'.",
                 "input[1].output[0].type", "tool-output-part-invalid", id="bad-output-part"),
    pytest.param([_call("c1"), _output("c1", [IMAGE, {"type": "input_audio"}])],
                 "Invalid value: 'input_audio'. Supported values are: 'input_text', 'input_image', and "
                 "'input_file'.", "input[1].output[1].type", "tool-output-part-invalid", id="audio-part"),
    pytest.param([_call("c1"), _output(None)],
                 "Invalid Value: 'input.call_id'. Function call output requires call_id.",
                 "input[1].call_id", "call-id-missing", id="missing-call-id"),
    pytest.param([USER_MSG, _call("c1"), _output("c1"), USER_MSG, _output("")],
                 "Invalid 'input[4].call_id': empty string. Expected a string with minimum length 1, but got an "
                 "empty string instead.", "input[4].call_id", "call-id-empty", id="empty-call-id"),
]


@pytest.mark.parametrize("rules", ["openai", "spec"])
@pytest.mark.parametrize(("items", "message", "param", "reason"), OPENAI_RESPONSES_CASES)
def test_openai_responses_rejections(rules: str, items: list[Any], message: str, param: str, reason: str) -> None:
    rejection = check(rules, RESPONSES, {"model": "gpt-4.1", "input": items})
    assert rejection is not None
    assert (rejection.status, rejection.reason) == (400, reason)
    assert rejection.body["error"]["message"] == message
    assert rejection.body["error"]["param"] == param
    assert rejection.body["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "body",
    [
        {"input": [_call("c1"), _output("c1", [{"type": "input_text", "text": "t"}, IMAGE])]},
        {"input": [_call("p1", "custom_tool_call"), _output("p1", [IMAGE], "custom_tool_call_output")]},
        {"input": [_output("call_prev")], "previous_response_id": "resp_1"},
        {"input": [_call("c1")], "previous_response_id": "resp_1"},
        {"input": "just a string"},
    ],
)
def test_openai_responses_accepts(body: dict[str, Any]) -> None:
    assert check("openai", RESPONSES, {"model": "gpt-4.1", **body}) is None


def test_previous_response_id_still_checks_item_shapes() -> None:
    body = {"input": [_output("")], "previous_response_id": "resp_1"}
    rejection = check("openai", RESPONSES, body)
    assert rejection is not None and rejection.reason == "call-id-empty"


# ---------------------------------------------------------------- Chat Completions


def _assistant(*ids: str) -> dict[str, Any]:
    calls = [{"id": i, "type": "function", "function": {"name": "Read", "arguments": "{}"}} for i in ids]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _tool(call_id: str, content: Any = "result") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


SYSTEM = {"role": "system", "content": "be brief"}
USER = {"role": "user", "content": "hi"}
USER_IMAGE = {"role": "user", "content": [{"type": "text", "text": "look"}, CHAT_IMAGE]}

CHAT_PAIRING_CASES = [
    pytest.param([SYSTEM, USER, _tool("call_a")], "orphan", 2, id="no-assistant"),
    pytest.param([USER, _assistant("call_a"), _tool("call_b")], "orphan", 2, id="undeclared-id"),
    pytest.param([USER, _assistant("call_a", "call_b"), _tool("call_a"), USER, _tool("call_b")], "orphan", 4,
                 id="user-inside-run"),
    pytest.param([USER, _assistant("call_a"), _tool("call_a"), USER, _tool("call_a")], "orphan", 4,
                 id="after-run"),
    pytest.param([USER, _assistant("call_a", "call_b"), _tool("call_a"), USER], "missing", 1, id="missing-one"),
    pytest.param([USER, _assistant("call_a", "call_b")], "missing", 1, id="missing-all"),
]


def _expected_chat(rules: str, kind: str, index: int, missing: str) -> tuple[str, Any, Any]:
    if kind == "orphan" and rules == "deepseek":
        return ORPHAN_DEEPSEEK, None, "invalid_request_error"
    if kind == "orphan":
        return ORPHAN_OPENAI, f"messages.[{index}].role", None
    if rules == "deepseek":
        text = MISSING_PREFIX + missing + " (insufficient tool messages following tool_calls message)"
        return text, None, "invalid_request_error"
    return MISSING_PREFIX + missing, f"messages.[{index}].role", None


@pytest.mark.parametrize("rules", ["openai", "spec", "xai", "deepseek"])
@pytest.mark.parametrize(("messages", "kind", "index"), CHAT_PAIRING_CASES)
def test_chat_pairing_rejections(rules: str, messages: list[Any], kind: str, index: int) -> None:
    missing = ", ".join(
        c["id"] for c in messages[index].get("tool_calls", [])
        if c["id"] not in [m.get("tool_call_id") for m in messages]
    ) if kind == "missing" else ""
    rejection = check(rules, CHAT, {"model": "m", "messages": messages})
    assert rejection is not None
    assert (rejection.status, rejection.reason) == (
        400, "orphan-tool-message" if kind == "orphan" else "tool-result-missing"
    )
    message, param, code = _expected_chat(rules, kind, index, missing)
    assert rejection.body == {"error": {"message": message, "type": "invalid_request_error",
                                        "param": param, "code": code}}


def test_missing_lists_every_unanswered_id() -> None:
    rejection = check("openai", CHAT, {"messages": [USER, _assistant("call_a", "call_b", "call_c"),
                                                    _tool("call_b")]})
    assert rejection is not None
    assert rejection.message == MISSING_PREFIX + "call_a, call_c"


@pytest.mark.parametrize("rules", ["openai", "spec", "xai"])
def test_chat_image_in_tool_message(rules: str) -> None:
    messages = [USER, _assistant("call_a"), _tool("call_a", [{"type": "text", "text": "a.png"}, CHAT_IMAGE])]
    rejection = check(rules, CHAT, {"messages": messages})
    assert rejection is not None
    assert (rejection.status, rejection.reason) == (400, "image-in-tool-message")
    assert rejection.message == (
        "Invalid 'messages[2]'. Image URLs are only allowed for messages with role 'user', "
        "but this message with role 'tool' contains an image URL."
    )


def test_openai_image_in_assistant_message() -> None:
    messages = [USER, {"role": "assistant", "content": [CHAT_IMAGE]}]
    rejection = check("openai", CHAT, {"messages": messages})
    assert rejection is not None and rejection.reason == "image-in-non-user-message"
    assert "this message with role 'assistant' contains an image URL." in rejection.message


@pytest.mark.parametrize("part_type", ["input_audio", "file"])
def test_openai_non_text_tool_part(part_type: str) -> None:
    messages = [USER, _assistant("call_a"), _tool("call_a", [{"type": "text", "text": "x"}, {"type": part_type}])]
    rejection = check("openai", CHAT, {"messages": messages})
    assert rejection is not None
    assert (rejection.status, rejection.reason) == (400, "tool-content-part-not-text")
    assert rejection.message == f"Invalid value: '{part_type}'. Supported values are: 'text'."
    assert rejection.body["error"]["param"] == "messages[2].content[1].type"


def test_content_errors_come_before_pairing() -> None:
    messages = [USER, _tool("call_z", [CHAT_IMAGE])]
    rejection = check("openai", CHAT, {"messages": messages})
    assert rejection is not None and rejection.reason == "image-in-tool-message"


@pytest.mark.parametrize(
    ("messages", "reason", "text"),
    [
        ([USER, _assistant("call_a"), _tool("call_a", [{"type": "text", "text": "x"}])],
         "tool-content-not-string", "messages[2]: invalid type: sequence, expected a string"),
        ([USER, _assistant("call_a"), _tool("call_a", [CHAT_IMAGE])],
         "tool-content-not-string", "messages[2]: invalid type: sequence, expected a string"),
        ([SYSTEM, USER_IMAGE], "image-part-unsupported", "messages[1]: unknown variant `image_url`, expected `text`"),
        ([SYSTEM, USER, {"role": "user", "content": [{"type": "input_audio"}]}], "content-part-unsupported",
         "messages[2]: unknown variant `input_audio`, expected `text`"),
    ],
)
def test_deepseek_deserialize_rejections(messages: list[Any], reason: str, text: str) -> None:
    rejection = check("deepseek", CHAT, {"model": "deepseek-chat", "messages": messages})
    assert rejection is not None
    assert (rejection.status, rejection.reason) == (400, reason)
    assert re.fullmatch(
        "Failed to deserialize the JSON body into the target type: " + re.escape(text) + r" at line 1 column \d+",
        rejection.message,
    )
    assert rejection.body["error"]["code"] == "invalid_request_error"


@pytest.mark.parametrize("rules", ["openai", "spec", "xai", "deepseek"])
def test_chat_accepts_valid_run(rules: str) -> None:
    messages = [SYSTEM, USER, _assistant("call_a", "call_b"), _tool("call_b"), _tool("call_a"), USER,
                {"role": "assistant", "content": "done"}]
    assert check(rules, CHAT, {"messages": messages}) is None


# ---------------------------------------------------------------- Anthropic Messages


def _tool_use(*ids: str) -> dict[str, Any]:
    return {"role": "assistant",
            "content": [{"type": "tool_use", "id": i, "name": "read", "input": {}} for i in ids]}


def _result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}


TEXT = {"type": "text", "text": "next?"}


def _missing_text(index: int, ids: str) -> str:
    return (f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: {ids}. "
            "Each `tool_use` block must have a corresponding `tool_result` block in the next message.")


def _orphan_text(index: int, k: int, tool_id: str) -> str:
    return (f"messages.{index}.content.{k}: unexpected `tool_use_id` found in `tool_result` blocks: {tool_id}. "
            "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.")


@pytest.mark.parametrize(
    ("messages", "reason", "text"),
    [
        ([{"role": "user", "content": "hi"}, _tool_use("toolu_1"), {"role": "user", "content": [TEXT]}],
         "tool-result-missing", _missing_text(1, "toolu_1")),
        ([{"role": "user", "content": "hi"}, _tool_use("toolu_1", "toolu_2"),
          {"role": "user", "content": [_result("toolu_2")]}],
         "tool-result-missing", _missing_text(1, "toolu_1")),
        ([{"role": "user", "content": "hi"}, _tool_use("toolu_1")],
         "tool-result-missing", _missing_text(1, "toolu_1")),
        ([{"role": "user", "content": "hi"}, _tool_use("toolu_1"), {"role": "user", "content": "wait"},
          {"role": "user", "content": [_result("toolu_1")]}],
         "tool-result-missing", _missing_text(1, "toolu_1")),
        ([{"role": "user", "content": "hi"}, _tool_use("toolu_1"),
          {"role": "user", "content": [TEXT, _result("toolu_1")]}],
         "tool-result-not-first", _missing_text(1, "toolu_1")),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "sure"},
          {"role": "user", "content": [_result("toolu_9")]}],
         "orphan-tool-result", _orphan_text(2, 0, "toolu_9")),
        ([{"role": "user", "content": "hi"}, _tool_use("toolu_1"),
          {"role": "user", "content": [_result("toolu_1"), _result("toolu_9")]}],
         "orphan-tool-result", _orphan_text(2, 1, "toolu_9")),
    ],
)
def test_anthropic_rejections(messages: list[Any], reason: str, text: str) -> None:
    rejection = check("anthropic", MESSAGES, {"model": "claude", "max_tokens": 10, "messages": messages})
    assert rejection == Rejection(
        status=400,
        body={"type": "error", "error": {"type": "invalid_request_error", "message": text}},
        reason=reason,
    )


def test_anthropic_accepts_parallel_results_then_text() -> None:
    messages = [{"role": "user", "content": "hi"}, _tool_use("toolu_1", "toolu_2"),
                {"role": "user", "content": [_result("toolu_2"), _result("toolu_1"), TEXT]}]
    assert check("anthropic", MESSAGES, {"messages": messages}) is None


# ---------------------------------------------------------------- dispatch


@pytest.mark.parametrize(
    ("host", "rules"),
    [("api.x.ai", "xai"), ("api.openai.com", "openai"), ("API.OpenAI.com:443", "openai"),
     ("api.deepseek.com", "deepseek"), ("api.anthropic.com", "anthropic"), ("example.com", "spec"),
     ("127.0.0.1:8080", "spec"), (None, "spec")],
)
def test_rules_for_host(host: str | None, rules: str) -> None:
    assert rules_for_host(host) == rules


@pytest.mark.parametrize(
    ("path", "dialect"),
    [("/v1/responses", "responses"), ("/openai/v1/responses?x=1", "responses"),
     ("/v1/chat/completions", "chat"), ("/chat/completions/", "chat"), ("/v1/messages", "messages"),
     ("/anthropic/v1/messages", "messages"), ("/v1/models", None), ("/v1/messages/count_tokens", None)],
)
def test_dialect_of(path: str, dialect: str | None) -> None:
    assert dialect_of(path) == dialect


def test_unknown_rule_set_raises() -> None:
    with pytest.raises(ValueError, match="unknown rule set"):
        check("grok", RESPONSES, {})


def test_unknown_path_is_accepted() -> None:
    assert check("openai", "/v1/models", {"messages": [_tool("x")]}) is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.sampled_from(["tool", "user", "assistant", "function_call", "function_call_output", "tool_use",
                       "tool_result", "input_image", "image_url", "text", "call_1"]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["type", "role", "content", "call_id", "output", "tool_calls", "id",
                                       "tool_call_id", "tool_use_id", "image_url"]), children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(rules=st.sampled_from(["xai", "openai", "deepseek", "anthropic", "spec"]),
       path=st.sampled_from([RESPONSES, CHAT, MESSAGES]), items=JSON)
def test_check_never_raises(rules: str, path: str, items: Any) -> None:
    result = check(rules, path, {"input": items, "messages": items})
    assert result is None or isinstance(result, Rejection)
