"""Where a Chat Completions request keeps its conversation: ``messages``, a list of messages."""

from __future__ import annotations

from typing import Annotated

from pydantic import FailFast, TypeAdapter

from llmfix.dialects.base import Shape
from llmfix.dialects.chat import wire as ch

SHAPE = Shape(key="messages", suffixes=("/chat/completions",), system="system",
              items=TypeAdapter(Annotated[list[ch.Message], FailFast()]),
              tags=frozenset({"image_url", "file", "input_audio", "other", "str"}))
