"""The rejection table on every known error text, in each form it is seen in, and on near-misses.

Texts are the ones quoted in wire-formats.md / session-killers.md (and produced by the strict mock
upstreams in tests/upstreams), wrapped in each vendor's real body shape.
"""

from __future__ import annotations

import json

import pytest

from llmfix.profiles import FLAGS
from llmfix.retry import rejections
from tests.upstreams import rules
from tests.upstreams.errors import XAI_DESERIALIZE, XAI_INVALID_ARGUMENT

SERDE = "Failed to deserialize the JSON body into the target type"


def openai_shape(message: str, param: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": param,
                                 "code": None}}).encode()


def deepseek_shape(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": "invalid_request_error"}}).encode()


def xai_shape(message: str) -> bytes:
    return json.dumps({"code": XAI_INVALID_ARGUMENT, "error": message}).encode()


def anthropic_shape(message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": message},
                       "request_id": "req_011"}).encode()


GLM_422 = json.dumps({"detail": [{"type": "literal_error", "loc": ["body", "messages", 1, "role"],
                                  "msg": "Input should be 'user' or 'assistant'", "input": "system",
                                  "ctx": {"expected": "'user' or 'assistant'"}}]}).encode()
MINIMAX = json.dumps({"type": "error", "error": {"type": "bad_request_error", "http_code": "400",
                      "message": "invalid params, chat content has invalid message role: system (2013)"},
                      "request_id": "0588"}).encode()

KNOWN = [
    # (dialect, status, body, rule, flags)
    ("responses", 422, xai_shape(XAI_DESERIALIZE), "xai-model-input",
     (("responses_tool_output_array", False), ("responses_image_requires_url", True))),
    ("responses", 422, xai_shape(f"{XAI_DESERIALIZE} at line 1 column 2461"), "xai-model-input",
     (("responses_tool_output_array", False), ("responses_image_requires_url", True))),
    ("responses", 422, xai_shape(f"{SERDE}: data did not match any variant of untagged enum ModelInput"),
     "xai-model-input", (("responses_tool_output_array", False), ("responses_image_requires_url", True))),
    ("responses", 400, openai_shape("No tool output found for function call call_Z1.", "input"),
     "responses-no-tool-output", ()),
    ("responses", 400, deepseek_shape("No tool output found for tool call call_x"), "responses-no-tool-output", ()),
    ("chat", 400, openai_shape("Invalid 'messages[234]'. Image URLs are only allowed for messages with role 'user', "
                               "but this message with role 'tool' contains an image URL.", "messages[234]"),
     "chat-image-in-tool-message", (("chat_tool_media", False),)),
    ("chat", 400, deepseek_shape(f"{SERDE}: messages[3]: invalid type: sequence, expected a string at line 1 "
                                 "column 812"), "chat-tool-content-not-string", (("chat_tool_text_array", False),)),
    ("chat", 400, deepseek_shape("messages[3]: invalid type: sequence, expected a string"),
     "chat-tool-content-not-string", (("chat_tool_text_array", False),)),
    ("chat", 400, deepseek_shape(f"{SERDE}: messages[466]: unknown variant `image_url`, expected `text` at line 1 "
                                 "column 99120"), "chat-unknown-variant-image", (("media_input", False),)),
    ("chat", 400, openai_shape("400 (unknown variant image_url)"), "chat-unknown-variant-image",
     (("media_input", False),)),
    ("chat", 400, deepseek_shape(f"{SERDE}: messages[2]: data did not match any variant of untagged enum "
                                 "ChatCompletionRequestContent at line 1 column 300"), "chat-untagged-content",
     (("chat_tool_text_array", False), ("media_input", False))),
    ("chat", 400, deepseek_shape("Messages with role 'tool' must be a response to a preceding message with "
                                 "'tool_calls'"), "chat-orphan-tool-message", ()),
    ("chat", 400, openai_shape("Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                               "message with 'tool_calls'.", "messages.[3].role"), "chat-orphan-tool-message", ()),
    ("chat", 400, openai_shape("<400> InternalError.Algo.InvalidParameter: An assistant message with \"tool_calls\" "
                               "must be followed by tool messages responding to each \"tool_call_id\"."),
     "chat-missing-tool-results", ()),
    ("chat", 400, openai_shape("An assistant message with 'tool_calls' must be followed by tool messages responding "
                               "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                               "call_1"), "chat-missing-tool-results", ()),
    ("messages", 400, anthropic_shape("messages.13: `tool_use` ids were found without `tool_result` blocks "
                                      "immediately after: toolu_011P. Each `tool_use` block must have a corresponding "
                                      "`tool_result` block in the next message."), "messages-missing-tool-result", ()),
    ("messages", 400, deepseek_shape("messages.108: `tool_use` ids were found without `tool_result` blocks "
                                     "immediately after: call_8ZMD."), "messages-missing-tool-result", ()),
    ("messages", 400, anthropic_shape("messages.3.content.1: unexpected `tool_use_id` found in `tool_result` blocks: "
                                      "toolu_01. Each `tool_result` block must have a corresponding `tool_use` block "
                                      "in the previous message."), "messages-orphan-tool-result", ()),
    ("messages", 400, deepseek_shape(f"{SERDE}: messages[3].content[0].content[1]: unknown variant `image`, "
                                     "expected `text` at line 1 column 4410"), "messages-image-in-tool-result",
     (("anthropic_tool_result_media", False),)),
]

def openrouter_shape(provider_body: bytes, provider: str = "Anthropic") -> bytes:
    """OpenRouter's relay of a provider's rejection: its text inside ``metadata.raw`` (LaoshuBaby/liulianmao #11)."""
    return json.dumps({"error": {"message": "Provider returned error", "code": 400,
                                 "metadata": {"raw": provider_body.decode(), "provider_name": provider,
                                              "is_byok": False}}, "user_id": "user_1"}).encode()


ANTHROPIC_IMAGES = (("image_limits_anthropic", True),)
OPENAI_IMAGES = (("image_limits_openai", True),)
IMAGES = [  # what a gateway in front of Claude or GPT relays, on any of the three APIs
    ("messages", 400, anthropic_shape("messages.44.content.1.image.source.base64: image exceeds 5 MB maximum: "
                                      "11641928 bytes > 5242880 bytes"), "image-anthropic-too-large", ANTHROPIC_IMAGES),
    ("chat", 400, anthropic_shape("messages.3.content.0.content.0.image.source.base64.data: At least one of the image "
                                  "dimensions exceed max allowed size: 8000 pixels"),
     "image-anthropic-too-many-pixels", ANTHROPIC_IMAGES),
    ("messages", 400, anthropic_shape("messages.9.content.2.image.source.base64.data: At least one of the image "
                                      "dimensions exceed max allowed size for many-image requests: 2000 pixels"),
     "image-anthropic-too-many-pixels", ANTHROPIC_IMAGES),
    ("messages", 400, anthropic_shape("messages.2.content.0.image.source.base64.data: Image does not match the "
                                      "provided media type image/png"), "image-anthropic-media-type", ANTHROPIC_IMAGES),
    ("chat", 400, openrouter_shape(anthropic_shape("messages.0.content.1.image.source.base64: The image was "
                                                   "specified using the image/jpeg media type, but the image appears "
                                                   "to be a image/png image")),
     "image-anthropic-media-type", ANTHROPIC_IMAGES),
    ("messages", 400, anthropic_shape("messages.1.content.0.image.source.base64.media_type: Input should be "
                                      "'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"),
     "image-anthropic-media-type", ANTHROPIC_IMAGES),
    ("messages", 400, anthropic_shape("Could not process image"), "image-anthropic-undecodable",
     (("image_undecodable_refused", True),)),
    ("responses", 400, openai_shape("The image data you provided does not represent a valid image. Please check your "
                                    "input and try again with one of the supported image formats: ['image/jpeg', "
                                    "'image/png', 'image/gif', 'image/webp'].", "input"),
     "image-openai-invalid", OPENAI_IMAGES),
    ("chat", 400, openai_shape("You uploaded an unsupported image. Please make sure your image has of one the "
                               "following formats: ['png', 'jpeg', 'gif', 'webp']."), "image-openai-invalid",
     OPENAI_IMAGES),
    ("responses", 400, openai_shape("Invalid 'input[5].output[0].image_url': string too long. Expected a string with "
                                    "maximum length 20971520, but got a string with length 21000000 instead."),
     "image-openai-url-too-long", OPENAI_IMAGES),
]
KNOWN += IMAGES
SYSTEM = [  # the system-message flag: the rows exist now and start teaching once the flag does
    ("messages", 400, deepseek_shape(f"{SERDE}: messages[1].role: unknown variant `system`, expected `user` or "
                                     "`assistant` at line 1 column 1932"), "messages-system-role-serde"),
    ("messages", 400, anthropic_shape("messages[1].role: unknown variant `system`, expected `user` or `assistant`"),
     "messages-system-role-serde"),
    ("messages", 422, GLM_422, "messages-system-role-literal"),
    ("messages", 400, MINIMAX, "messages-system-role-minimax"),
    ("messages", 400, anthropic_shape("messages[1].role must be either 'user' or 'assistant', but got 'system'"),
     "messages-system-role-gateway"),
]


@pytest.mark.parametrize(("dialect", "status", "body", "rule", "flags"), KNOWN)
def test_every_known_text_matches_its_rule_and_flags(dialect, status, body, rule, flags) -> None:
    found = rejections.match(dialect, status, body)
    assert found is not None
    assert found.rule.name == rule
    assert found.flags == flags


@pytest.mark.parametrize(("dialect", "status", "body", "rule"), SYSTEM)
def test_system_role_texts_are_recognised_and_teach_the_fold_flag_when_it_exists(dialect, status, body, rule) -> None:
    found = rejections.match(dialect, status, body)
    assert found is not None and found.rule.name == rule
    expected = (("anthropic_system_messages", False),) if "anthropic_system_messages" in FLAGS else ()
    assert found.flags == expected


NEAR_MISSES = [
    # right text, wrong status
    ("responses", 500, xai_shape(XAI_DESERIALIZE)),
    ("chat", 429, deepseek_shape("messages[3]: invalid type: sequence, expected a string")),
    ("responses", 200, xai_shape(XAI_DESERIALIZE)),
    # right text, wrong dialect
    ("chat", 422, xai_shape(XAI_DESERIALIZE)),
    ("messages", 400, deepseek_shape("messages[466]: unknown variant `image_url`, expected `text`")),
    ("responses", 400, deepseek_shape("messages[3]: invalid type: sequence, expected a string")),
    # similar texts that mean something else
    ("responses", 422, xai_shape(f"{SERDE}: input: data did not match any variant of untagged enum ToolChoice")),
    ("chat", 400, openai_shape("Invalid 'messages[2]'. Image URLs are only allowed for messages with role 'user', "
                               "but this message with role 'assistant' contains an image URL.")),
    ("chat", 400, deepseek_shape("messages[3]: invalid type: sequence, expected a map")),
    ("chat", 400, deepseek_shape("messages[3]: unknown variant `developer`, expected one of `system`, `user`")),
    ("messages", 400, deepseek_shape("messages[1].content[0]: unknown variant `image`, expected `text`")),
    ("messages", 422, json.dumps({"detail": [{"msg": "Input should be 'user' or 'assistant'",
                                              "input": "tool"}]}).encode()),
    ("messages", 400, anthropic_shape("messages.0: role 'system' is not supported on this model")),
    ("responses", 500, openai_shape("The encrypted content gAAA...DQ== could not be verified.")),
    ("responses", 404, openai_shape("Item with id 'rs_1' not found.")),
    ("chat", 400, openai_shape("Model grok-9 does not exist")),
    # not an error body at all, or one too odd to be a known text
    ("responses", 422, b""),
    ("responses", 422, b"\xff\xfe not utf-8"),
    ("responses", 422, b'{"error": ' + b'"x' * 40_000 + b'"}'),
]


@pytest.mark.parametrize(("dialect", "status", "body"), NEAR_MISSES)
def test_near_misses_do_not_match(dialect, status, body) -> None:
    assert rejections.match(dialect, status, body) is None


def test_an_error_body_that_is_plain_text_still_matches() -> None:
    found = rejections.match("responses", 422, XAI_DESERIALIZE.encode())
    assert found is not None and found.rule.name == "xai-model-input"


@pytest.mark.parametrize(("rule_set", "path", "body", "rule"), [
    ("xai", "/v1/responses",
     {"input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "x"}]}]},
     "xai-model-input"),
    ("deepseek", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": "hi"},
                   {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                         "function": {"name": "f", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "x"}]}]},
     "chat-tool-content-not-string"),
    ("deepseek", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]},
     "chat-unknown-variant-image"),
    ("openai", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": "hi"},
                   {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                         "function": {"name": "f", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "c",
                    "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]},
     "chat-image-in-tool-message"),
    ("anthropic", "/v1/messages", {"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 5_242_884}}]}]},
     "image-anthropic-too-large"),
    ("anthropic", "/v1/messages", {"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]},
     "image-anthropic-undecodable"),
    ("openai", "/v1/chat/completions", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}, "image-openai-invalid"),
    ("openai", "/v1/responses", {"input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}]}, "image-openai-invalid"),
])
def test_what_the_strict_mocks_answer_is_recognised(rule_set, path, body, rule) -> None:
    """The mock upstreams' texts (the same the e2e tests meet) are the table's, status and shape included."""
    rejection = rules.check(rule_set, path, body)
    assert rejection is not None
    found = rejections.match(rules.dialect_of(path), rejection.status, json.dumps(rejection.body).encode())
    assert found is not None and found.rule.name == rule
