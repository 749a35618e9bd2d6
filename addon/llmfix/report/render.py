"""A conversation as readable lines: roles, tool calls and call ids, text, media as references.

Used for the diff llmfix shows in mitmweb and for its conversation view. Lines are redacted and
bounded: no base64, no secrets, long texts cut.
"""

from __future__ import annotations

from typing import Any

from llmfix.report.redact import redact_text
from llmfix.wire import anthropic as an
from llmfix.wire import chat as ch
from llmfix.wire import responses as rs

TEXT = 160


def _text(t: str) -> str:
    return repr(redact_text(t, TEXT))


def _part(p: Any) -> str:
    if isinstance(p, ch.TextPart | rs.InputText | rs.OutputText | an.TextBlock):
        return f"{p.type} {_text(p.text)}"
    if hasattr(p, "media"):
        return f"{p.type} {p.media()}"
    return f"{getattr(p, 'type', None) or 'part'} …"


def _content(c: Any) -> list[str]:
    if c is None:
        return []
    if isinstance(c, str):
        return [_text(c)]
    return [_part(p) for p in c]


def _block_lines(b: Any) -> list[str]:
    if isinstance(b, an.ToolUse):
        return [f"tool_use {b.id} {b.name}({redact_text(str(b.input), TEXT)})"]
    if isinstance(b, an.ToolResult):
        return [f"tool_result {b.tool_use_id}:", *(f"    {line}" for line in _content(b.content))]
    return [_part(b)]


def lines(dialect: str, items: list[Any]) -> list[str]:
    out: list[str] = []
    for i, m in enumerate(items):
        if isinstance(m, ch.Message):
            head = f"[{i}] {m.role}"
            if m.tool_call_id is not None:
                head += f" (tool_call_id={m.tool_call_id})"
            out.append(head)
            if isinstance(reasoning := (m.__pydantic_extra__ or {}).get("reasoning_content"), str) and reasoning:
                out.append(f"    reasoning {_text(reasoning)}")
            out.extend(f"    {line}" for line in _content(m.content))
            for tc in m.tool_calls or []:
                fn = tc.function
                args = f" {fn.name}({redact_text(fn.arguments, TEXT)})" if fn else ""
                out.append(f"    → call {tc.id}{args}")
        elif isinstance(m, an.Message):
            out.append(f"[{i}] {m.role}")
            if isinstance(m.content, str):
                out.append(f"    {_text(m.content)}")
            else:
                for b in m.content:
                    out.extend(f"    {line}" for line in _block_lines(b))
        elif isinstance(m, rs.Message):
            out.append(f"[{i}] message {m.role}")
            out.extend(f"    {line}" for line in _content(m.content))
        elif isinstance(m, rs.FunctionCall):
            out.append(f"[{i}] function_call {m.call_id} {m.name}({redact_text(m.arguments, TEXT)})")
        elif isinstance(m, rs.CustomToolCall):
            out.append(f"[{i}] custom_tool_call {m.call_id} {m.name}({redact_text(m.input, TEXT)})")
        elif isinstance(m, rs.ToolOutput):
            out.append(f"[{i}] {m.type} {m.call_id}:")
            out.extend(f"    {line}" for line in _content(m.output))
        else:
            out.append(f"[{i}] {getattr(m, 'type', None) or 'item'}")
    return out
