"""Where an Anthropic Messages request keeps its conversation: ``messages``, a list of user and assistant turns
(the system prompt is top-level ``system``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import FailFast, TypeAdapter

from llmfix.dialects.messages import wire as an

KEY = "messages"
SUFFIXES = ("/messages",)
SYSTEM = "system"
TAGS = frozenset({"media", "other", "tool_use", "tool_result", "str"})
_ITEMS: TypeAdapter[list[Any]] = TypeAdapter(Annotated[list[an.Message], FailFast()])


def conversation(body: dict[str, Any]) -> list[Any] | None:
    raw = body[KEY]
    if not isinstance(raw, list):
        raise ValueError(f"'{KEY}' is a JSON {type(raw).__name__}, not an array")
    return raw


def typed(raw: list[Any]) -> list[Any]:
    return _ITEMS.validate_python(raw)


def server_state(body: dict[str, Any]) -> bool:
    return False


def websocket(path: str) -> bool:
    return False
