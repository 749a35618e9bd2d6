"""Where an Anthropic Messages request keeps its conversation: ``messages``, a list of user and assistant turns
(the system prompt is top-level ``system``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import FailFast, TypeAdapter

from llmfix.dialects.base import Shape
from llmfix.dialects.messages import wire as an

SHAPE = Shape(key="messages", suffixes=("/messages",), system="system",
              items=TypeAdapter(Annotated[list[an.Message], FailFast()]),
              tags=frozenset({"media", "other", "tool_use", "tool_result", "str"}))
