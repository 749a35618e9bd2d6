"""Anthropic's rules for blank text (``POST /v1/messages``), with its exact texts, for the strict ``anthropic`` mock.

In message order, the first violation (anthropics/claude-code #23440 and #3196, home-assistant/core #140005,
aaif-goose/goose #1624), Anthropic's error shape:

- a text block with ``cache_control`` whose text is blank: ``messages.N.content.M.text: cache_control cannot be set
  for empty text blocks``;
- an empty text block: ``messages: text content blocks must be non-empty``;
- a whitespace-only text block (or string content): ``messages: text content blocks must contain non-whitespace
  text``;
- a message with no content that is not the final assistant one: ``messages.N: all messages must have non-empty
  content except for the optional final assistant message``.

Inference: which of these Anthropic reports first when a body breaks several is not known; ``tool_result`` content
and ``role:"system"`` messages are not checked here (no text seen for them).
"""

from __future__ import annotations

from typing import Any

from tests.upstreams.access import as_dict, as_list, type_of
from tests.upstreams.errors import Rejection, anthropic_error

NON_EMPTY = "messages: text content blocks must be non-empty"
NON_WHITESPACE = "messages: text content blocks must contain non-whitespace text"


def check(body: dict[str, Any]) -> Rejection | None:
    messages = as_list(body.get("messages"))
    for i, message in enumerate(messages):
        message = as_dict(message)
        if message.get("role") not in ("user", "assistant"):
            continue
        content = message.get("content")
        last_assistant = i == len(messages) - 1 and message.get("role") == "assistant"
        if content in ([], "") and not last_assistant:
            return anthropic_error(f"messages.{i}: all messages must have non-empty content except for the optional "
                                   "final assistant message", reason="empty-message")
        if isinstance(content, str) and content and not content.strip():
            return anthropic_error(NON_WHITESPACE, reason="whitespace-text")
        for j, block in enumerate(as_list(content)):
            text = as_dict(block).get("text")
            if type_of(block) != "text" or not isinstance(text, str) or text.strip():
                continue
            if "cache_control" in as_dict(block):
                return anthropic_error(f"messages.{i}.content.{j}.text: cache_control cannot be set for empty text "
                                       "blocks", reason="cache-control-on-empty-text")
            return anthropic_error(NON_WHITESPACE if text else NON_EMPTY,
                                   reason="whitespace-text" if text else "empty-text")
    return None
