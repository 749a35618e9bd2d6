"""Duplicate and empty tool-call ids, as the strict upstreams reject them (reference/session-killers.md §1).

- Chat (OpenAI, xAI, spec): two ``role:"tool"`` messages with one ``tool_call_id`` —
  ``Invalid parameter: Duplicate value for 'tool_call_id' of 'call_…', in messages[7] and messages[8].``,
  ``param:"messages.[8].tool_call_id"`` (agno-agi/agno AG-UI, session-killers [31]). DeepSeek's text for this
  is not known, so the DeepSeek reading has no such rule.
- Responses (OpenAI, spec): a call item with an empty ``call_id`` gets the same ``empty string`` text as an
  output (WF §1.5); two call items with one ``call_id``: ``Duplicate 'call_id': …`` — the only text found,
  from an OpenAI-compatible Responses endpoint (pi, session-killers [44]); OpenAI's own is UNCERTAIN.
- Anthropic: the same ``tool_use`` id twice anywhere in the request —
  ``messages.1.content.1: `tool_use` ids must be unique`` at the second occurrence (Claude Code 2.1.19–2.1.20,
  session-killers [65]).
"""

from __future__ import annotations

from typing import Any

from tests.upstreams.access import as_dict, as_list, type_of
from tests.upstreams.errors import Rejection, anthropic_error, openai_error

CALL_TYPES = frozenset({"function_call", "custom_tool_call"})


def chat_duplicate_result(messages: list[Any]) -> Rejection | None:
    first: dict[Any, int] = {}
    for index, message in enumerate(messages):
        if as_dict(message).get("role") != "tool":
            continue
        call_id = as_dict(message).get("tool_call_id")
        if call_id in first:
            return openai_error(
                f"Invalid parameter: Duplicate value for 'tool_call_id' of '{call_id}', in "
                f"messages[{first[call_id]}] and messages[{index}].",
                reason="duplicate-tool-call-id", param=f"messages.[{index}].tool_call_id",
            )
        if isinstance(call_id, str):
            first[call_id] = index
    return None


def responses_call_ids(items: list[Any]) -> Rejection | None:
    seen: set[Any] = set()
    for index, item in enumerate(items):
        if type_of(item) not in CALL_TYPES:
            continue
        call_id = as_dict(item).get("call_id")
        if call_id == "":
            return openai_error(
                f"Invalid 'input[{index}].call_id': empty string. Expected a string with minimum length 1, "
                "but got an empty string instead.",
                reason="call-id-empty", param=f"input[{index}].call_id", code="empty_string",
            )
        if call_id in seen:
            return openai_error(f"Duplicate 'call_id': {call_id}", reason="duplicate-call-id", param="input")
        if isinstance(call_id, str):
            seen.add(call_id)
    return None


def anthropic_unique_ids(messages: list[Any]) -> Rejection | None:
    seen: set[Any] = set()
    for index, message in enumerate(messages):
        if as_dict(message).get("role") != "assistant":
            continue
        for k, block in enumerate(as_list(as_dict(message).get("content"))):
            if type_of(block) != "tool_use":
                continue
            tool_id = as_dict(block).get("id")
            if tool_id in seen:
                return anthropic_error(f"messages.{index}.content.{k}: `tool_use` ids must be unique",
                                       reason="duplicate-tool-use-id")
            if isinstance(tool_id, str):
                seen.add(tool_id)
    return None
