"""How Chat Completions requests and answers read in the conversation view; a streamed answer's chunks
reassembled into the ``chat.completion`` object."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from llmfix.dialects.chat import wire as ch
from llmfix.report.redact import redact_text
from llmfix.report.render import TEXT, content, each_message, text, with_extras
from llmfix.report.sse_answers import dicts

_MESSAGES: TypeAdapter[list[Any]] = TypeAdapter(list[ch.Message])


def _message_lines(i: int, m: ch.Message) -> list[str]:
    head = f"[{i}] {m.role}"
    if m.tool_call_id is not None:
        head += f" (tool_call_id={m.tool_call_id})"
    out = [head]
    if isinstance(reasoning := (m.__pydantic_extra__ or {}).get("reasoning_content"), str) and reasoning:
        out.append(f"    reasoning {text(reasoning)}")
    out.extend(f"    {line}" for line in content(m.content))
    for tc in m.tool_calls or []:
        fn = tc.function
        args = f" {fn.name}({redact_text(fn.arguments, TEXT)})" if fn else ""
        out.append(f"    → call {tc.id}{args}")
    return out


def lines(items: list[Any]) -> list[str]:
    return each_message(items, ch.Message, _message_lines)


def answer_lines(obj: dict[str, Any]) -> list[str]:
    msgs, extras = [], {}
    for i, c in enumerate(dicts(obj.get("choices"))):
        m = c.get("message") if isinstance(c.get("message"), dict) else {}
        msgs.append(m)
        reasoning = None if m.get("reasoning_content") else m.get("reasoning")  # lines show reasoning_content
        extras[i] = [f"reasoning {redact_text(reasoning, TEXT)!r}"] if isinstance(reasoning, str) else []
    return with_extras(lines(_MESSAGES.validate_python(msgs)), extras)


def assemble(events: list[tuple[str, Any]]) -> dict[str, Any]:
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
