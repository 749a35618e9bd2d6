"""Strict rules of thinking mode on the Chat APIs of DeepSeek and Kimi: each turn's ``reasoning_content`` back.

Texts and shapes (session-killers §3.1):

- DeepSeek: 400 in its shape, ``{"error":{"message":"The `reasoning_content` in the thinking mode must be passed
  back to the API.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}``
  (pi #3636, opencode #24135, JohnnyZ93/oai-compatible-copilot #202). Which messages: the docs' rule, every
  assistant message of a user-to-user span that holds a tool call (the open span after the last user message
  included). ``""`` counts as missing (HKUDS/nanobot #946; UNCERTAIN for V4, see restore-reasoning-content).
- Kimi: 400 ``{"error":{"type":"invalid_request_error","message":"thinking is enabled but reasoning_content is
  missing in assistant tool call message at index N"},"type":"error"}`` (VicBilibily/GCMP #162), for assistant
  messages with tool calls only, N their index.

When thinking is on (UNCERTAIN, the mock's reading): a request with ``"thinking": {"type": "enabled"}``, or one
that does not say ``"disabled"`` to a model whose thinking is on by default — DeepSeek's V4 models
(``deepseek-v4-*``; the older names ``deepseek-chat`` / ``deepseek-reasoner`` keep their non-thinking reading
here), Kimi's thinking models (``kimi-k2-thinking*``, ``kimi-k2.5`` and later, ``kimi-k3*``).

Pure: the byte-for-byte check against what the mock issued is the ledger's (tests/upstreams/thinking.py).
"""

from __future__ import annotations

import re
from typing import Any

from tests.upstreams.access import as_dict, as_list
from tests.upstreams.errors import Rejection, deepseek_error

DEEPSEEK_TEXT = "The `reasoning_content` in the thinking mode must be passed back to the API."
KIMI_TEXT = "thinking is enabled but reasoning_content is missing in assistant tool call message at index {}"
_DEEPSEEK_THINKING = re.compile(r"deepseek-v4")
_KIMI_THINKING = re.compile(r"kimi-k2-thinking|kimi-k2\.[5-9]|kimi-k[3-9]")


def thinking_on(body: dict[str, Any], default_on: re.Pattern[str]) -> bool:
    switch = as_dict(body.get("thinking")).get("type")
    if switch in ("enabled", "disabled"):
        return switch == "enabled"
    model = body.get("model")
    return isinstance(model, str) and bool(default_on.search(model))


def _has_reasoning(message: Any) -> bool:
    value = as_dict(message).get("reasoning_content")
    return isinstance(value, str) and value != ""


def _calls(message: Any) -> bool:
    return bool(as_list(as_dict(message).get("tool_calls")))


def missing_in_tool_spans(messages: list[Any]) -> list[int]:
    """Indices of the assistant messages without reasoning in user-to-user spans that hold a tool call."""
    out: list[int] = []
    span: list[int] = []
    calls = False
    for index, message in enumerate(messages):
        role = as_dict(message).get("role")
        if role == "user":
            out += span if calls else []
            span, calls = [], False
        elif role == "assistant":
            calls = calls or _calls(message)
            if not _has_reasoning(message):
                span.append(index)
    return out + (span if calls else [])


def check_deepseek(body: dict[str, Any]) -> Rejection | None:
    if not thinking_on(body, _DEEPSEEK_THINKING) or not missing_in_tool_spans(as_list(body.get("messages"))):
        return None
    return deepseek_error(DEEPSEEK_TEXT, reason="reasoning-content-missing")


def kimi_error(message: str, *, reason: str) -> Rejection:
    """Kimi's shape: ``{"error": {"type", "message"}, "type": "error"}``."""
    return Rejection(status=400, body={"error": {"type": "invalid_request_error", "message": message},
                                       "type": "error"}, reason=reason)


def check_kimi(body: dict[str, Any]) -> Rejection | None:
    if not thinking_on(body, _KIMI_THINKING):
        return None
    for index, message in enumerate(as_list(body.get("messages"))):
        if as_dict(message).get("role") == "assistant" and _calls(message) and not _has_reasoning(message):
            return kimi_error(KIMI_TEXT.format(index), reason="reasoning-content-missing")
    return None
