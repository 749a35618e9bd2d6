"""How Anthropic Messages requests and answers read in the conversation view; a streamed answer's events
reassembled into the ``message`` object."""

from __future__ import annotations

import json
from typing import Any

from llmfix.dialects.messages import wire as an
from llmfix.report.redact import redact_text
from llmfix.report.render import TEXT, content, each_message, part, text, with_extras
from llmfix.report.sse_answers import dicts


def _block_lines(b: Any) -> list[str]:
    if isinstance(b, an.ToolUse):
        return [f"tool_use {b.id} {b.name}({redact_text(str(b.input), TEXT)})"]
    if isinstance(b, an.ToolResult):
        return [f"tool_result {b.tool_use_id}:", *(f"    {line}" for line in content(b.content))]
    return [part(b)]


def _message_lines(i: int, m: an.Message) -> list[str]:
    if isinstance(m.content, str):
        return [f"[{i}] {m.role}", f"    {text(m.content)}"]
    return [f"[{i}] {m.role}", *(f"    {line}" for b in m.content for line in _block_lines(b))]


def lines(items: list[Any]) -> list[str]:
    return each_message(items, an.Message, _message_lines)


def answer_lines(obj: dict[str, Any]) -> list[str]:
    blocks = dicts(obj.get("content"))
    extras = {0: [f"thinking {redact_text(b['thinking'], TEXT)!r}" for b in blocks
                  if b.get("type") == "thinking" and isinstance(b.get("thinking"), str)]}
    message = an.Message.model_validate({"role": obj.get("role", "assistant"),
                                         "content": [b for b in blocks if b.get("type") != "thinking"]})
    return with_extras(lines([message]), extras)


def assemble(events: list[tuple[str, Any]]) -> dict[str, Any]:
    """Anthropic Messages events → the equivalent ``message`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": []}
    blocks: dict[Any, dict[str, Any]] = {}
    json_parts: dict[Any, list[str]] = {}
    for name, d in events:
        if not isinstance(d, dict):
            continue
        kind, index = d.get("type") or name, d.get("index")
        if kind == "message_start" and isinstance(d.get("message"), dict):
            message = {**d["message"], "content": []}
        elif kind == "content_block_start" and isinstance(d.get("content_block"), dict):
            blocks[index] = dict(d["content_block"])
        elif kind == "content_block_delta" and index in blocks and isinstance(delta := d.get("delta"), dict):
            for key in ("text", "thinking"):
                if isinstance(delta.get(key), str):
                    blocks[index][key] = str(blocks[index].get(key, "")) + delta[key]
            if isinstance(delta.get("partial_json"), str):
                json_parts.setdefault(index, []).append(delta["partial_json"])
        elif kind == "message_delta":
            message.update({k: v for k, v in (d.get("delta") or {}).items() if v is not None})
            if isinstance(d.get("usage"), dict):
                message["usage"] = {**(message.get("usage") or {}), **d["usage"]}
        elif kind == "error":
            message["error"] = d.get("error", d)
    for index, parts in json_parts.items():
        try:
            blocks[index]["input"] = json.loads("".join(parts) or "{}")
        except ValueError:
            blocks[index]["input"] = "".join(parts)
    message["content"] = [blocks[k] for k in sorted(blocks, key=lambda k: (not isinstance(k, int), k))]
    return message
