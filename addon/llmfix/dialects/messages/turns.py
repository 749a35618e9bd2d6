"""Anthropic Messages turns as the pairing repairs move results between them: user and assistant messages whose
content is a string or a list of blocks, ``tool_result`` blocks first in a user turn."""

from __future__ import annotations

from typing import Any

from llmfix.dialects.messages import wire as an
from llmfix.wire.base import evolve

CALL = "tool_use"
RESULT = "tool_result"
MISSING = "an is_error result"


def role(item: Any) -> str | None:
    return item.role if isinstance(item, an.Message) else None


def blocks(item: Any) -> list[Any]:
    content = item.content
    if isinstance(content, str):
        return [an.TextBlock(type="text", text=content)] if content else []
    return list(content)


def with_blocks(item: Any, new: list[Any]) -> Any:
    return evolve(item, content=new)


def user_turn(new: list[Any]) -> Any:
    return an.Message(role="user", content=new)


def text_block(text: str) -> Any:
    return an.TextBlock(type="text", text=text)


def is_result(block: Any) -> bool:
    return isinstance(block, an.ToolResult)


def attached(blocks: list[Any], k: int) -> int:
    return 0


def result_as_blocks(block: Any, label: str) -> list[Any]:
    if block.content is None or isinstance(block.content, str):
        text = f"{label}\n{block.content}" if block.content else label
        return [an.TextBlock(type="text", text=text)]
    return [an.TextBlock(type="text", text=label), *block.content]
