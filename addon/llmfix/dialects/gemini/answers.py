"""How Gemini requests and answers read in the conversation view; a streamed answer's events (each a
``GenerateContentResponse`` holding some parts, maybe in Code Assist's ``{"response": …}``) reassembled into one."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from llmfix.dialects.gemini import wire as gw
from llmfix.report.redact import redact_text
from llmfix.report.render import TEXT, each_message, text
from llmfix.report.sse_answers import dicts
from llmfix.wire.base import Wire

_CONTENTS: TypeAdapter[list[Any]] = TypeAdapter(list[gw.Content])
_PART: TypeAdapter[Any] = TypeAdapter(gw.Part)


def _part_lines(p: Any) -> list[str]:
    if isinstance(p, gw.TextPart):
        head = "thought" if gw.member(p, "thought") else "text"
        return [f"{head} {text(p.text)}" + (" (signed)" if p.signature() else "")]
    if isinstance(p, gw.CallPart):
        cid = f" {p.call_id()}" if p.call_id() else ""
        signed = " (signed)" if p.signature() else ""
        return [f"→ call{cid} {p.name()}({redact_text(str(p.args()), TEXT)}){signed}"]
    if isinstance(p, gw.ResponsePart):
        rid = f" {p.result_id()}" if p.result_id() else ""
        response = redact_text(str(gw.member(p.response(), "response")), TEXT)
        held = p.held() if isinstance(p.held(), list) else []
        nested = [x if isinstance(x, Wire) else _PART.validate_python(x) for x in held if isinstance(x, Wire | dict)]
        return [f"functionResponse{rid} {p.name()}: {response}",
                *(f"    {line}" for x in nested for line in _part_lines(x))]
    if isinstance(p, gw.MediaPart):
        return [f"{'inlineData' if gw.member(p, 'inlineData') is not None else 'fileData'} {p.media()}"]
    return [f"{next(iter(p.__pydantic_extra__ or {}), 'part')} …"]


def _content_lines(i: int, m: gw.Content) -> list[str]:
    return [f"[{i}] {m.role or 'user'}", *(f"    {line}" for p in m.parts or () for line in _part_lines(p))]


def lines(items: list[Any]) -> list[str]:
    return each_message(items, gw.Content, _content_lines)


def answer_lines(obj: dict[str, Any]) -> list[str]:
    candidates = dicts(obj.get("candidates"))
    content = candidates[0].get("content") if candidates else None
    return lines(_CONTENTS.validate_python([content])) if isinstance(content, dict) else []


def assemble(events: list[tuple[str, Any]]) -> dict[str, Any]:
    """The events' parts joined into one candidate (consecutive text deltas of one kind merged), with the last
    finish reason, usage and model version; an error event (a bare ``{"error": …}`` in a 200 stream) kept."""
    parts: list[dict[str, Any]] = []
    out: dict[str, Any] = {}
    finish = None
    for _, d in events:
        for response in (x.get("response", x) if isinstance(x, dict) else x for x in (d if isinstance(d, list)
                                                                                       else [d])):
            if not isinstance(response, dict):
                continue
            if response.get("error"):
                out["error"] = response["error"]
            for key in ("usageMetadata", "modelVersion"):
                if response.get(key):
                    out[key] = response[key]
            for c in dicts(response.get("candidates")):
                finish = c.get("finishReason") or finish
                for p in dicts((c.get("content") or {}).get("parts")):
                    last = parts[-1] if parts else None
                    if ("text" in p and last is not None and "text" in last and bool(p.get("thought"))
                            == bool(last.get("thought")) and "thoughtSignature" not in last):
                        parts[-1] = {**last, **p, "text": last["text"] + p["text"]}
                    else:
                        parts.append(dict(p))
    out["candidates"] = [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}]
    return out
