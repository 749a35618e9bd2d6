"""Where a Chat request carries Gemini's thought signatures (its OpenAI-compatible door), for
restore-tool-call-signatures (:class:`llmfix.dialects.base.Signatures`).

The door wants each signature back on the tool call it came with, as ``extra_content: {"google":
{"thought_signature": …}}`` (https://ai.google.dev/gemini-api/docs/thought-signatures, "OpenAI compatibility"); a
Vertex-backed gateway's ``extra_content.vertex`` counts as carried too. It checks them in the current turn, which
begins after the last user message holding text (a tool message is a function response, never the start of a turn;
a user message with only an image holds no text, and the turn began before it: Google's rule, "the most recent User
message that contains standard content (e.g., text)", read wide as gemini-cli reads it).
"""

from __future__ import annotations

from typing import Any

from llmfix.dialects.chat import wire as ch
from llmfix.dialects.chat.learn_signatures import (
    FIELD,
    KIND,
    NAMESPACES,
    REFUSED,
    marker,
    refused_key,
    signature_in,
    signature_key,
)
from llmfix.wire.base import evolve, without

__all__ = ["FLAG", "KIND", "NEEDLES", "PRESENT", "REFUSED", "calls", "key", "location", "marker", "refused_key",
           "signature", "turn", "with_calls", "with_signature"]

FLAG = "chat_thought_signatures"
NEEDLES = (b"tool_calls",)
PRESENT = (b"extra_content",)
"""Every signature of a Chat request lives in a call's ``extra_content``."""


def _begins(item: Any) -> bool:
    if not isinstance(item, ch.Message) or item.role != "user":
        return False
    content = item.content
    return isinstance(content, str) or any(isinstance(p, ch.TextPart) for p in content or ())


def turn(items: list[Any], start: int) -> tuple[bool, list[int]]:
    begin, begun = start, False
    for i in range(len(items) - 1, start - 1, -1):
        if _begins(items[i]):
            begin, begun = i + 1, True
            break
    return begun, [i for i in range(begin, len(items)) if calls(items[i])]


def calls(item: Any) -> list[Any]:
    if not isinstance(item, ch.Message) or item.role != "assistant":
        return []
    return list(item.tool_calls or ())


def with_calls(item: Any, new: list[Any]) -> Any:
    return evolve(item, tool_calls=new)


def signature(call: Any) -> str | None:
    return signature_in((call.__pydantic_extra__ or {}).get("extra_content")) if isinstance(call, ch.ToolCall) \
        else None


def with_signature(call: Any, value: str | None) -> Any:
    """``call`` with ``value`` as ``extra_content.google.thought_signature`` and no other signature (``value`` None:
    none at all); whatever else its ``extra_content`` holds stays. A call whose ``extra_content`` (or its ``google``)
    is there but no object is returned as it is: nothing of it is overwritten."""
    extra = (call.__pydantic_extra__ or {}).get("extra_content")
    if extra is not None and not isinstance(extra, dict):
        return call
    kept = dict(extra or {})
    if value is not None and kept.get("google") is not None and not isinstance(kept["google"], dict):
        return call
    for namespace in NAMESPACES:
        inner = kept.get(namespace)
        if isinstance(inner, dict) and FIELD in inner:
            rest = {k: v for k, v in inner.items() if k != FIELD}
            if rest:
                kept[namespace] = rest
            else:
                del kept[namespace]
    if value is not None:
        kept["google"] = {**(kept.get("google") or {}), FIELD: value}
    return evolve(call, extra_content=kept) if kept else without(call, "extra_content")


def key(upstream: str, call: Any) -> str | None:
    """The call's key, its declaration read as the learner reads it from an answer (custom, else function)."""
    if not isinstance(call, ch.ToolCall) or not call.id or (declared := call.declared()) is None:
        return None
    return signature_key(upstream, call.id, *declared)


def location(index: int, position: int) -> str:
    return f"messages[{index}].tool_calls[{position}].extra_content.google.{FIELD}"
