"""Where a Chat Completions request keeps its conversation: ``messages``, a list of messages."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import FailFast, TypeAdapter

from llmfix.dialects.chat import wire as ch

KEY = "messages"
SUFFIXES = ("/chat/completions",)
SYSTEM = "system"
TAGS = frozenset({"image_url", "file", "input_audio", "other", "str"})
_ITEMS: TypeAdapter[list[Any]] = TypeAdapter(Annotated[list[ch.Message], FailFast()])


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
