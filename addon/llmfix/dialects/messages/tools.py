"""Anthropic Messages tool calls and results: ``tool_use`` blocks of an assistant turn, answered by the
``tool_result`` blocks that open the next user turn (``messages.N: `tool_use` ids were found without
`tool_result` blocks immediately after…``, ``unexpected `tool_use_id` found in `tool_result` blocks``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from llmfix.dialects.base import Answer, Call, Key, Pairing
from llmfix.dialects.messages import wire as an
from llmfix.wire.base import evolve

PAIRING = Pairing.NEXT_TURN
DECLARES = (b"tool_use",)
ANSWERS = (b"tool_result",)
PAIRS = (b"tool_use",)
FRESH_PREFIX = "toolu_"


def _turn(m: Any, role: str) -> bool:
    return isinstance(m, an.Message) and m.role == role and isinstance(m.content, list)


def calls(items: list[Any]) -> list[Call]:
    return [Call(b.id, b.name, i, k) for i, m in enumerate(items) if _turn(m, "assistant")
            for k, b in enumerate(m.content) if isinstance(b, an.ToolUse)]


def answers(items: list[Any]) -> list[Answer]:
    return [Answer(b.tool_use_id, i, k) for i, m in enumerate(items) if _turn(m, "user")
            for k, b in enumerate(m.content) if isinstance(b, an.ToolResult)]


def is_call_item(item: Any) -> bool:
    return False


def is_answer_item(item: Any) -> bool:
    return False


def location(index: int, sub: int | None) -> str:
    return f"messages[{index}]" if sub is None else f"messages[{index}].content[{sub}]"


def rename(items: list[Any], call_ids: Mapping[Key, str], answer_ids: Mapping[Key, str]) -> list[Any]:
    out = list(items)
    for i in sorted({i for i, _ in call_ids} | {i for i, _ in answer_ids}):
        m = items[i]
        blocks = []
        for k, b in enumerate(m.content):
            if (i, k) in call_ids:
                b = evolve(b, id=call_ids[(i, k)])
            elif (i, k) in answer_ids:
                b = evolve(b, tool_use_id=answer_ids[(i, k)])
            blocks.append(b)
        out[i] = evolve(m, content=blocks)
    return out


def missing_result(call: Call, text: str) -> Any:
    return an.ToolResult(type="tool_result", tool_use_id=call.call_id, content=text, is_error=True)


def result_as_user(result: Any, label: str) -> Any:
    raise TypeError("a tool_result is a block inside a user message, not a message of its own")


def refers_upstream(items: list[Any]) -> bool:
    return False


def declaration(remembered: Any, output_type: str | None = None) -> Any:
    try:
        value = json.loads(remembered.arguments) if remembered.arguments else {}
    except ValueError:
        value = {"input": remembered.arguments}
    if not isinstance(value, dict):
        value = {"input": value}
    return an.ToolUse(type="tool_use", id=remembered.call_id, name=remembered.name, input=value)


def _open(m: Any) -> bool:
    """Whether ``m``, a list's last item, leaves calls open: an assistant message with tool_use blocks."""
    return _turn(m, "assistant") and any(isinstance(b, an.ToolUse) for b in m.content)


def settled(items: list[Any], start: int, declared: Any, answered: Any) -> tuple[set[str], set[str]] | None:
    """Nothing to pair: every id non-empty and declared once; the tool_use blocks of an assistant message
    answered exactly by the tool_result blocks that open the next message, a user one, and no tool_result
    anywhere else."""
    n = len(items)
    if n > start and _open(items[n - 1]):
        return None  # what the walk would end with (no results follow), found without walking
    nd: set[str] = set()
    na: set[str] = set()
    for i in range(start, n):
        m = items[i]
        if not isinstance(m, an.Message) or not isinstance(m.content, list):
            continue
        if m.role == "assistant":
            uses = [b.id for b in m.content if isinstance(b, an.ToolUse)]
            if not uses:
                continue
            for x in uses:
                if not x or x in nd or x in declared:
                    return None
                nd.add(x)
            nxt = items[i + 1] if i + 1 < n else None
            if not _turn(nxt, "user"):
                return None
            lead: list[str] = []
            for b in nxt.content:
                if not isinstance(b, an.ToolResult):
                    break
                lead.append(b.tool_use_id)
            if len(lead) != len(uses) or set(lead) != set(uses):
                return None
        elif m.role == "user":
            # at ``start`` the previous item is the prefix's last, not read (repairs/settled.py): a prefix found
            # paired never ends in an assistant message with tool_use (its results would be missing), so
            # no result may follow it there, as when it has none
            prev = items[i - 1] if i > start else None
            mine = {b.id for b in prev.content if isinstance(b, an.ToolUse)} if _turn(prev, "assistant") else set()
            other = False
            for b in m.content:
                if not isinstance(b, an.ToolResult):
                    other = True
                    continue
                x = b.tool_use_id
                if other or x not in mine or x in na or x in answered:
                    return None
                na.add(x)
    return nd, na


SCHEMA_ESCAPE = None


def schemas(body: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(location, declaration, key) of each tool's input schema: ``tools[i].input_schema``."""
    tools = body.get("tools")
    return [(f"tools[{i}]", t, "input_schema") for i, t in enumerate(tools or ())
            if isinstance(t, dict) and isinstance(t.get("input_schema"), dict)] if isinstance(tools, list) else []
