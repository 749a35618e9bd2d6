"""Streamed (SSE) LLM answers reassembled into the JSON object the same call would have returned.

Chat Completions chunks → ``chat.completion``; Responses events → the final ``response``; Anthropic events
→ the ``message``. Used by the ``llmfix conversation`` view; reads only, never raises on odd events.
"""

from __future__ import annotations

import json
from typing import Any

from llmfix.route import Dialect


def sse_events(data: bytes) -> list[tuple[str, Any]]:
    """``(event name, decoded data)`` for each event of an SSE body; ``[DONE]`` gives ``("done", None)``."""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    events: list[tuple[str, Any]] = []
    for block in text.split("\n\n"):
        name, lines = "", []
        for line in block.split("\n"):
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                name = value
            elif field == "data":
                lines.append(value)
        if not lines:
            continue
        payload = "\n".join(lines)
        if payload.strip() == "[DONE]":
            events.append(("done", None))
            continue
        try:
            events.append((name, json.loads(payload)))
        except ValueError:
            events.append((name, payload))
    return events


def dicts(value: Any) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def chat_answer(events: list[tuple[str, Any]]) -> dict[str, Any]:
    """Chat Completions chunks → the equivalent ``chat.completion`` object."""
    out: dict[str, Any] = {}
    choices: dict[Any, dict[str, Any]] = {}
    for _, d in events:
        if not isinstance(d, dict):
            continue
        for key in ("model", "usage", "error"):
            if d.get(key):
                out[key] = d[key]
        for c in dicts(d.get("choices")):
            acc = choices.setdefault(c.get("index", 0), {"role": None, "text": [], "reasoning": [], "calls": {},
                                                         "finish": None})
            delta = c.get("delta") if isinstance(c.get("delta"), dict) else {}
            acc["role"] = acc["role"] or delta.get("role")
            for key, into in (("content", "text"), ("reasoning_content", "reasoning"), ("reasoning", "reasoning")):
                if isinstance(delta.get(key), str):
                    acc[into].append(delta[key])
            for pos, tc in enumerate(dicts(delta.get("tool_calls"))):
                call = acc["calls"].setdefault(tc.get("index", pos), {"id": None, "name": None, "args": []})
                fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                call["id"] = call["id"] or tc.get("id")
                call["name"] = call["name"] or fn.get("name")
                if isinstance(fn.get("arguments"), str):
                    call["args"].append(fn["arguments"])
            acc["finish"] = c.get("finish_reason") or acc["finish"]
    out["choices"] = [{
        "index": i,
        "message": {
            "role": acc["role"] or "assistant",
            "content": "".join(acc["text"]) or None,
            **({"reasoning_content": "".join(acc["reasoning"])} if acc["reasoning"] else {}),
            **({"tool_calls": [{"id": c["id"] or "?", "type": "function",
                                "function": {"name": c["name"] or "?", "arguments": "".join(c["args"])}}
                               for c in acc["calls"].values()]} if acc["calls"] else {}),
        },
        "finish_reason": acc["finish"],
    } for i, acc in choices.items()]
    return out


def responses_answer(events: list[tuple[str, Any]]) -> dict[str, Any]:
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


def anthropic_answer(events: list[tuple[str, Any]]) -> dict[str, Any]:
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


ASSEMBLE = {Dialect.CHAT: chat_answer, Dialect.RESPONSES: responses_answer, Dialect.MESSAGES: anthropic_answer}
