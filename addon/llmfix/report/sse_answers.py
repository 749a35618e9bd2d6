"""Streamed (SSE) LLM answers: their events, for each dialect to reassemble into the JSON object the same call
would have returned (``dialects/*/answers.py``). Used by the ``llmfix conversation`` view; reads only, never raises
on odd events.
"""

from __future__ import annotations

import json
from typing import Any


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
