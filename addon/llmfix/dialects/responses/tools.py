"""Responses tool calls and results: ``function_call`` / ``custom_tool_call`` items, each answered by a
``*_call_output`` item naming its ``call_id`` anywhere later (OpenAI: ``No tool output found for function call
…``, ``No tool call found for function call output with call_id …``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmfix.dialects.base import Answer, Call, Key, Pairing
from llmfix.dialects.responses import wire as rs
from llmfix.wire.base import evolve

PAIRING = Pairing.LATER_BY_ID
DECLARES = (b"function_call", b"custom_tool_call")
ANSWERS = (b"_call_output",)
PAIRS = (b"call_id",)
FRESH_PREFIX = "call_"


def calls(items: list[Any]) -> list[Call]:
    return [Call(m.call_id, m.name, i, None, "custom" if isinstance(m, rs.CustomToolCall) else "function")
            for i, m in enumerate(items) if isinstance(m, rs.TOOL_CALLS)]


def answers(items: list[Any]) -> list[Answer]:
    return [Answer(m.call_id or "", i, None) for i, m in enumerate(items) if isinstance(m, rs.ToolOutput)]


def is_call_item(item: Any) -> bool:
    return isinstance(item, rs.TOOL_CALLS)


def is_answer_item(item: Any) -> bool:
    return isinstance(item, rs.ToolOutput)


def location(index: int, sub: int | None) -> str:
    return f"input[{index}]"


def rename(items: list[Any], call_ids: Mapping[Key, str], answer_ids: Mapping[Key, str]) -> list[Any]:
    out = list(items)
    for i in sorted({i for i, _ in call_ids} | {i for i, _ in answer_ids}):
        out[i] = evolve(items[i], call_id=call_ids.get((i, None)) or answer_ids[(i, None)])
    return out


def missing_result(call: Call, text: str) -> Any:
    kind = "custom_tool_call_output" if call.kind == "custom" else "function_call_output"
    return rs.ToolOutput(type=kind, call_id=call.call_id, output=text)


def declaration(remembered: Any, output_type: str | None = None) -> Any:
    if output_type == "custom_tool_call_output":
        return rs.CustomToolCall(type="custom_tool_call", call_id=remembered.call_id, name=remembered.name,
                                 input=remembered.arguments)
    return rs.FunctionCall(type="function_call", call_id=remembered.call_id, name=remembered.name,
                           arguments=remembered.arguments)


def settled(items: list[Any], start: int, declared: Any, answered: Any) -> tuple[set[str], set[str]] | None:
    """Nothing to pair: every id non-empty and declared once, answered once, every call answered and every
    answer declared. A paired prefix has answered == declared: the appended ids must be new and pair among
    themselves."""
    n = len(items)
    if n > start and isinstance(last := items[n - 1], rs.TOOL_CALLS) and not any(
            isinstance(m, rs.ToolOutput) and m.call_id == last.call_id for m in items[start : n - 1]):
        return None  # what the walk would end with (a call no output answers), found with one isinstance per item
    nd: set[str] = set()
    na: set[str] = set()
    for m in items[start:]:
        if isinstance(m, rs.ToolOutput):
            if not m.call_id or m.call_id in na or m.call_id in answered:
                return None
            na.add(m.call_id)
        elif isinstance(m, rs.TOOL_CALLS):
            if not m.call_id or m.call_id in nd or m.call_id in declared:
                return None
            nd.add(m.call_id)
    return (nd, na) if na == nd else None


def refers_upstream(items: list[Any]) -> bool:
    return any(isinstance(m, rs.OtherItem) and m.type == "item_reference" for m in items)


def result_as_user(output: rs.ToolOutput, label: str) -> rs.Message:
    """A tool output nobody declared, as a user message that keeps all its content (output text as input text)."""
    if isinstance(output.output, str):
        text = f"{label}\n{output.output}" if output.output else label
        return rs.Message(type="message", role="user", content=[rs.InputText(type="input_text", text=text)])
    parts = [rs.InputText(type="input_text", text=p.text) if isinstance(p, rs.OutputText) else p
             for p in output.output]
    return rs.Message(type="message", role="user", content=[rs.InputText(type="input_text", text=label), *parts])


SCHEMA_ESCAPE = None


def schemas(body: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(location, declaration, key) of each function tool's parameter schema: ``tools[i].parameters``."""
    tools = body.get("tools")
    return [(f"tools[{i}]", t, "parameters") for i, t in enumerate(tools or ())
            if isinstance(t, dict) and isinstance(t.get("parameters"), dict)] if isinstance(tools, list) else []
