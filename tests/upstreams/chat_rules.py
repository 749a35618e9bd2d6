"""Strict upstream rules for Chat Completions (``POST /v1/chat/completions``).

Each vendor first validates message content, then tool-call pairing:
- a ``role:"tool"`` message must sit in the run of tool messages right after an assistant message
  whose ``tool_calls`` declare its ``tool_call_id`` (orphan check, done over all messages first);
- every declared tool call needs a tool message in that run (missing-result check).
OpenAI rejects images outside user messages and non-text tool parts; xAI only images in tool
messages; DeepSeek's deserializer rejects array tool content and any non-text part. Error texts:
wire-formats.md §2.2 and §7.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.upstreams.access import as_dict, as_list, type_of
from tests.upstreams.errors import Rejection, column_after, deepseek_error, openai_error
from tests.upstreams.pairing_rules import chat_duplicate_result

OrphanError = Callable[[int], Rejection]
MissingError = Callable[[int, list[Any]], Rejection]

MISSING_PREFIX = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
    "'tool_call_id'. The following tool_call_ids did not have response messages: "
)
DESERIALIZE_PREFIX = "Failed to deserialize the JSON body into the target type"


def check_openai(body: dict[str, Any]) -> Rejection | None:
    """OpenAI: media outside user messages, non-text tool parts, then pairing."""
    messages = as_list(body.get("messages"))
    return _check_content(messages, tool_only=False) or _check_pairing(
        messages, _openai_orphan, _openai_missing, chat_duplicate_result
    )


def check_xai(body: dict[str, Any]) -> Rejection | None:
    """xAI: images in tool messages (rejected like OpenAI), then OpenAI's pairing rules."""
    messages = as_list(body.get("messages"))
    return _check_content(messages, tool_only=True) or _check_pairing(
        messages, _openai_orphan, _openai_missing, chat_duplicate_result
    )


def check_deepseek(body: dict[str, Any]) -> Rejection | None:
    """DeepSeek: serde errors (array tool content, non-text parts) first, then pairing."""
    messages = as_list(body.get("messages"))
    return _check_deserialize(body, messages) or _check_pairing(
        messages, _deepseek_orphan, _deepseek_missing
    )


def _check_content(messages: list[Any], *, tool_only: bool) -> Rejection | None:
    for index, message in enumerate(messages):
        role = as_dict(message).get("role")
        content = as_dict(message).get("content")
        if role == "user" or not isinstance(content, list):
            continue
        if tool_only and role != "tool":
            continue
        for k, part in enumerate(content):
            kind = type_of(part)
            if kind == "image_url":
                return openai_error(
                    f"Invalid 'messages[{index}]'. Image URLs are only allowed for messages with role 'user', "
                    f"but this message with role '{role}' contains an image URL.",
                    reason="image-in-tool-message" if role == "tool" else "image-in-non-user-message",
                    param=f"messages[{index}]", code="invalid_value",
                )
            if role == "tool" and kind != "text" and not tool_only:
                return openai_error(
                    f"Invalid value: '{kind}'. Supported values are: 'text'.",
                    reason="tool-content-part-not-text",
                    param=f"messages[{index}].content[{k}].type", code="invalid_value",
                )
    return None


def _check_deserialize(body: dict[str, Any], messages: list[Any]) -> Rejection | None:
    for index, message in enumerate(messages):
        content = as_dict(message).get("content")
        if not isinstance(content, list):
            continue
        where = f"at line 1 column {column_after(body, 'messages', index)}"
        if as_dict(message).get("role") == "tool":
            return deepseek_error(
                f"{DESERIALIZE_PREFIX}: messages[{index}]: invalid type: sequence, expected a string {where}",
                reason="tool-content-not-string",
            )
        for part in content:
            kind = type_of(part)
            if kind != "text":
                return deepseek_error(
                    f"{DESERIALIZE_PREFIX}: messages[{index}]: unknown variant `{kind}`, expected `text` {where}",
                    reason="image-part-unsupported" if kind == "image_url" else "content-part-unsupported",
                )
    return None


def _check_pairing(messages: list[Any], orphan: OrphanError, missing: MissingError,
                   duplicate: Callable[[list[Any]], Rejection | None] | None = None) -> Rejection | None:
    return _find_orphan(messages, orphan) or (duplicate and duplicate(messages)) or _find_missing(messages, missing)


def _declared_ids(message: Any) -> list[Any]:
    if as_dict(message).get("role") != "assistant":
        return []
    return [as_dict(call).get("id") for call in as_list(as_dict(message).get("tool_calls"))]


def _find_orphan(messages: list[Any], orphan: OrphanError) -> Rejection | None:
    declared: list[Any] | None = None  # ids of the current run, None when not inside a run
    for index, message in enumerate(messages):
        role = as_dict(message).get("role")
        if role == "tool":
            if declared is None or as_dict(message).get("tool_call_id") not in declared:
                return orphan(index)
            continue
        ids = _declared_ids(message)
        declared = ids if ids else None
    return None


def _find_missing(messages: list[Any], missing: MissingError) -> Rejection | None:
    for index, message in enumerate(messages):
        declared = _declared_ids(message)
        if not declared:
            continue
        answered = []
        for follower in messages[index + 1 :]:
            if as_dict(follower).get("role") != "tool":
                break
            answered.append(as_dict(follower).get("tool_call_id"))
        unanswered = [call_id for call_id in declared if call_id not in answered]
        if unanswered:
            return missing(index, unanswered)
    return None


def _openai_orphan(index: int) -> Rejection:
    return openai_error(
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
        "'tool_calls'.",
        reason="orphan-tool-message", param=f"messages.[{index}].role",
    )


def _openai_missing(index: int, ids: list[Any]) -> Rejection:
    return openai_error(
        MISSING_PREFIX + ", ".join(map(str, ids)),
        reason="tool-result-missing", param=f"messages.[{index}].role",
    )


def _deepseek_orphan(index: int) -> Rejection:
    return deepseek_error(
        "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
        reason="orphan-tool-message",
    )


def _deepseek_missing(index: int, ids: list[Any]) -> Rejection:
    return deepseek_error(
        MISSING_PREFIX + ", ".join(map(str, ids)) + " (insufficient tool messages following tool_calls message)",
        reason="tool-result-missing",
    )
