"""Gemini's turns as the pairing repairs move function responses between them: ``user`` and ``model`` contents
(no role: a user content, as the Gemini API reads it), their parts, and the media a client puts right after a
response (Gemini CLI sends each tool result's image as an ``inlineData`` part after its ``functionResponse``,
tests/fixtures/gemini-cli/turn2_request.json): they move with it."""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter

from llmfix.dialects.gemini import wire as gw
from llmfix.wire.base import Media, evolve

CALL = "functionCall"
RESULT = "functionResponse"
MISSING = "a response saying so"
_PART: TypeAdapter[Any] = TypeAdapter(gw.Part)


def role(item: Any) -> str | None:
    if not isinstance(item, gw.Content):
        return None
    return "assistant" if item.role == "model" else "user" if item.role in (None, "user") else item.role


def blocks(item: Any) -> list[Any]:
    return list(item.parts or ())


def with_blocks(item: Any, new: list[Any]) -> Any:
    return evolve(item, parts=new)


def user_turn(new: list[Any]) -> Any:
    return gw.Content(role="user", parts=new)


def text_block(text: str) -> Any:
    return gw.TextPart(text=text)


def is_result(block: Any) -> bool:
    return isinstance(block, gw.ResponsePart)


def attached(parts: list[Any], k: int) -> int:
    """How many parts after the response at ``k`` came with it: the media right after it, up to the next response
    or text."""
    n = 0
    while k + 1 + n < len(parts) and isinstance(parts[k + 1 + n], Media):
        n += 1
    return n


def result_as_blocks(block: Any, label: str) -> list[Any]:
    response = gw.member(block.response(), "response")
    text = json.dumps(response, ensure_ascii=False) if response is not None else ""
    held = block.held()  # a snake_case function_response holds its parts as they came: typed as a content's are
    parts = [p if isinstance(p, gw.Wire) else _PART.validate_python(p)
             for p in (held if isinstance(held, list) else ()) if isinstance(p, (gw.Wire, dict))]
    return [gw.TextPart(text=f"{label}\n{text}" if text else label), *parts]
