"""Chat Completions tool calls and results: an assistant message's ``tool_calls[]``, each answered by a
``role:"tool"`` message in the run right after it (OpenAI: ``An assistant message with 'tool_calls' must be
followed by tool messages responding to each 'tool_call_id'``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmfix.dialects.base import Answer, Call, Key, Pairing
from llmfix.dialects.chat import wire as ch
from llmfix.wire.base import evolve

PAIRING = Pairing.RUN_AFTER
DECLARES = (b"tool_calls",)
ANSWERS = (b'"tool"',)
PAIRS = (b"tool_calls",)
FRESH_PREFIX = "call_"


def _calling(m: Any) -> bool:
    return isinstance(m, ch.Message) and m.role == "assistant" and bool(m.tool_calls)


def is_tool(m: Any) -> bool:
    """A tool message that names its call."""
    return isinstance(m, ch.Message) and m.role == "tool" and m.tool_call_id is not None


def calls(items: list[Any]) -> list[Call]:
    out: list[Call] = []
    for i, m in enumerate(items):
        if _calling(m):
            for k, tc in enumerate(m.tool_calls or []):
                name = tc.function.name if tc.function is not None else str((tc.__pydantic_extra__ or {}).get(
                    "custom", {}).get("name", ""))
                out.append(Call(tc.id, name, i, k, "function" if tc.type == "function" else "custom"))
    return out


def answers(items: list[Any]) -> list[Answer]:
    return [Answer(m.tool_call_id or "", i, None) for i, m in enumerate(items) if is_tool(m)]


def is_call_item(item: Any) -> bool:
    return False


def is_answer_item(item: Any) -> bool:
    return is_tool(item)


def location(index: int, sub: int | None) -> str:
    return f"messages[{index}]" if sub is None else f"messages[{index}].tool_calls[{sub}]"


def rename(items: list[Any], call_ids: Mapping[Key, str], answer_ids: Mapping[Key, str]) -> list[Any]:
    out = list(items)
    for i in sorted({i for i, _ in call_ids} | {i for i, _ in answer_ids}):
        m = items[i]
        if (i, None) in answer_ids:
            m = evolve(m, tool_call_id=answer_ids[(i, None)])
        if m.tool_calls:
            m = evolve(m, tool_calls=[evolve(tc, id=call_ids[(i, k)]) if (i, k) in call_ids else tc
                                      for k, tc in enumerate(m.tool_calls)])
        out[i] = m
    return out


def missing_result(call: Call, text: str) -> Any:
    return ch.Message(role="tool", tool_call_id=call.call_id, content=text)


def result_as_user(result: Any, label: str) -> Any:
    content = result.content
    if isinstance(content, list):
        return ch.Message(role="user", content=[ch.TextPart(type="text", text=label), *content])
    return ch.Message(role="user", content=f"{label}\n{content}" if content else label)


def refers_upstream(items: list[Any]) -> bool:
    return False


def declaration(remembered: Any, output_type: str | None = None) -> Any:
    return ch.ToolCall(id=remembered.call_id, type="function",
                       function=ch.Function(name=remembered.name, arguments=remembered.arguments))


def settled(items: list[Any], start: int, declared: Any, answered: Any) -> tuple[set[str], set[str]] | None:
    """Nothing to pair: every id non-empty, declared once, answered at most once, every call answered in its
    run. Each rule looks at a message and the run after it; a paired prefix never ends in a calling message."""
    n = len(items)
    if n > start and _calling(items[n - 1]):
        return None  # what the walk would end with (the calls' run is empty), found without walking
    nd: set[str] = set()
    na: set[str] = set()
    for i in range(start, n):
        m = items[i]
        if not isinstance(m, ch.Message):
            continue
        if m.role == "tool" and m.tool_call_id is not None:
            if m.tool_call_id in na or m.tool_call_id in answered:
                return None
            na.add(m.tool_call_id)
        elif m.role == "assistant" and m.tool_calls:
            j, zone = i + 1, set()
            while j < n and is_tool(items[j]):
                zone.add(items[j].tool_call_id)
                j += 1
            for tc in m.tool_calls:
                if not tc.id or tc.id in nd or tc.id in declared or tc.id not in zone:
                    return None
                nd.add(tc.id)
    return nd, na


SCHEMA_ESCAPE = None


def schemas(body: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(location, declaration, key) of each tool's parameter schema: ``tools[i].function.parameters``."""
    tools = body.get("tools")
    return [(f"tools[{i}].function", t["function"], "parameters") for i, t in enumerate(tools or ())
            if isinstance(t, dict) and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("parameters"), dict)] if isinstance(tools, list) else []
