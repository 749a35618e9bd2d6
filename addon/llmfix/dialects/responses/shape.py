"""Where a Responses request keeps its conversation: ``input``, a list of items (or a plain string, which holds
nothing to repair); the upstream may hold earlier turns (``previous_response_id``, ``conversation``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import FailFast, TypeAdapter

from llmfix.dialects.responses import wire as rs

KEY = "input"
SUFFIXES = ("/responses",)
SYSTEM = "instructions"
TAGS = frozenset({"input_text", "output_text", "input_image", "input_file", "other", "message", "function_call",
                  "custom_tool_call", "tool_output", "str"})
_ITEMS: TypeAdapter[list[Any]] = TypeAdapter(Annotated[list[rs.Item], FailFast()])


def conversation(body: dict[str, Any]) -> list[Any] | None:
    raw = body[KEY]
    if isinstance(raw, str):
        return None
    if not isinstance(raw, list):
        raise ValueError(f"'{KEY}' is a JSON {type(raw).__name__}, not an array")
    return raw


def typed(raw: list[Any]) -> list[Any]:
    return _ITEMS.validate_python(raw)


def server_state(body: dict[str, Any]) -> bool:
    return bool(body.get("previous_response_id") or body.get("conversation"))


def websocket(path: str) -> bool:
    """The Responses API's WebSocket transport: ``GET …/responses`` upgraded (any prefix)."""
    return path.endswith("/responses")
