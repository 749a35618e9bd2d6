"""How Responses requests and answers read in the conversation view; a streamed answer's events reassembled
into the final ``response`` object."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from llmfix.dialects.responses import wire as rs
from llmfix.report.redact import redact_text
from llmfix.report.render import TEXT, content, other, with_extras
from llmfix.report.sse_answers import dicts

_ITEMS: TypeAdapter[list[Any]] = TypeAdapter(list[rs.Item])


def lines(items: list[Any]) -> list[str]:
    out: list[str] = []
    for i, m in enumerate(items):
        if isinstance(m, rs.Message):
            out.append(f"[{i}] message {m.role}")
            out.extend(f"    {line}" for line in content(m.content))
        elif isinstance(m, rs.FunctionCall):
            out.append(f"[{i}] function_call {m.call_id} {m.name}({redact_text(m.arguments, TEXT)})")
        elif isinstance(m, rs.CustomToolCall):
            out.append(f"[{i}] custom_tool_call {m.call_id} {m.name}({redact_text(m.input, TEXT)})")
        elif isinstance(m, rs.ToolOutput):
            out.append(f"[{i}] {m.type} {m.call_id}:")
            out.extend(f"    {line}" for line in content(m.output))
        else:
            out.append(other(i, m))
    return out


def answer_lines(obj: dict[str, Any]) -> list[str]:
    output = dicts(obj.get("output"))
    extras = {i: [f"summary {redact_text(s['text'], TEXT)!r}" for s in dicts(item.get("summary"))
                  if isinstance(s.get("text"), str)] for i, item in enumerate(output)}
    return with_extras(lines(_ITEMS.validate_python(output)), extras)


def assemble(events: list[tuple[str, Any]]) -> dict[str, Any]:
    """Responses events → the equivalent ``response`` object (the final one when the stream has it)."""
    final: dict[str, Any] = {}
    items: dict[Any, dict[str, Any]] = {}
    for name, d in events:
        if not isinstance(d, dict):
            continue
        kind = d.get("type") or name
        if isinstance(d.get("response"), dict):
            final = {**final, **{k: v for k, v in d["response"].items() if v is not None}}
        elif kind == "error":
            final["error"] = d.get("error", d)
        elif kind in ("response.output_item.added", "response.output_item.done") and isinstance(d.get("item"), dict):
            items[d.get("output_index", len(items))] = dict(d["item"])
        elif kind == "response.output_text.delta" and isinstance(item := items.get(d.get("output_index")), dict):
            parts = item.setdefault("content", [])
            if not parts or not isinstance(parts[-1], dict) or parts[-1].get("type") != "output_text":
                parts.append({"type": "output_text", "text": ""})
            parts[-1] = {**parts[-1], "text": parts[-1].get("text", "") + str(d.get("delta", ""))}
        elif kind == "response.function_call_arguments.delta" and isinstance(
                item := items.get(d.get("output_index")), dict):
            item["arguments"] = str(item.get("arguments", "")) + str(d.get("delta", ""))
    if not final.get("output"):
        final["output"] = [items[k] for k in sorted(items, key=lambda k: (not isinstance(k, int), k))]
    return final
