"""Where a Responses request keeps its conversation: ``input``, a list of items (or a plain string, which holds
nothing to repair); the upstream may hold earlier turns (``previous_response_id``, ``conversation``), and the
API has a WebSocket transport."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import FailFast, TypeAdapter

from llmfix.dialects.base import Shape
from llmfix.dialects.responses import wire as rs


def _server_state(body: dict[str, Any]) -> bool:
    return bool(body.get("previous_response_id") or body.get("conversation"))


def _websocket(path: str) -> bool:
    """The Responses API's WebSocket transport: ``GET …/responses`` upgraded (any prefix)."""
    return path.endswith("/responses")


SHAPE = Shape(key="input", suffixes=("/responses",), system="instructions",
              items=TypeAdapter(Annotated[list[rs.Item], FailFast()]), text_holds_nothing=True,
              server_state=_server_state, websocket=_websocket,
              tags=frozenset({"input_text", "output_text", "input_image", "input_file", "other", "message",
                              "function_call", "custom_tool_call", "tool_output", "str"}))
