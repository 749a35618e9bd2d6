"""Learning a Chat turn's ``reasoning_content`` (DeepSeek, Kimi thinking mode) from the answer that carried it.

DeepSeek's and Kimi's Chat APIs answer in thinking mode with the model's reasoning beside the answer —
``choices[i].message.reasoning_content`` in a JSON answer, ``choices[i].delta.reasoning_content`` pieces in a
stream — and want it back, byte for byte, when the turn is replayed (session-killers §3.1). Clients lose it
(Droid BYOK strips it, opencode sends ``""``); restore-reasoning-content gives it back from what this learns.

One kind of :class:`~llmfix.memory.store.Reasoning` record:

- ``chat.reasoning_content``: ``value`` is the reasoning text exactly as the answer carried it (pieces joined),
  ``upstream`` the upstream that answered. ``key`` recognises the turn when the client sends it back: each tool
  call id of the turn (one record per id, the same value), or, for a turn that made no call, ``content:`` and
  the sha256 of its text (only for a text of at least :data:`MIN_CONTENT` characters: a short text such as
  "Done." may be another session's turn). A turn that gave no reasoning gives no record.
"""

from __future__ import annotations

import hashlib
from typing import Any

from llmfix.memory.learn_base import Out, dicts
from llmfix.memory.store import Reasoning

KIND = "chat.reasoning_content"
MIN_CONTENT = 24
"""A turn without tool calls is keyed by its text only from this length on (shorter ones repeat across sessions)."""


def content_key(text: str) -> str | None:
    """The key of a turn that made no call, from its text (None: too short to tell turns apart)."""
    if len(text) < MIN_CONTENT:
        return None
    return "content:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def turn_keys(call_ids: list[str], text: str) -> list[str]:
    """The keys a turn is recognised by: its tool call ids, else its text's."""
    if call_ids:
        return list(dict.fromkeys(call_ids))
    key = content_key(text)
    return [key] if key else []


def records(reasoning: str, call_ids: list[str], text: str) -> list[Reasoning]:
    if not reasoning:
        return []
    return [Reasoning(KIND, key, reasoning) for key in turn_keys(call_ids, text)]


def reasoning_in_response(obj: dict[str, Any]) -> list[Reasoning]:
    """The reasoning of each choice of a JSON answer, keyed by its tool call ids (or its text)."""
    out: list[Reasoning] = []
    for choice in dicts(obj.get("choices")):
        message = choice.get("message")
        if not isinstance(message, dict) or not isinstance(reasoning := message.get("reasoning_content"), str):
            continue
        ids = [tc["id"] for tc in dicts(message.get("tool_calls")) if isinstance(tc.get("id"), str) and tc["id"]]
        content = message.get("content")
        out += records(reasoning, ids, content if isinstance(content, str) else "")
    return out


class ReasoningAssembler:
    """``choices[i].delta`` reasoning and content pieces, and the ids of the calls they went with, per choice;
    each choice's records at its ``finish_reason`` (or at the end of the stream)."""

    def __init__(self) -> None:
        self._pending: dict[Any, tuple[list[str], list[str], list[str]]] = {}  # index → (reasoning, text, ids)

    def wants(self, event: bytes) -> bool:
        """Reasoning begins a choice worth following; after that its content, calls and end matter too."""
        return b"reasoning_content" in event or bool(self._pending)

    def on_event(self, data: Any, out: Out) -> None:
        for choice in dicts(data.get("choices") if isinstance(data, dict) else None):
            index = choice.get("index", 0)
            delta = choice.get("delta")
            if isinstance(delta, dict):
                piece = delta.get("reasoning_content")
                if isinstance(piece, str) and piece and index not in self._pending:
                    self._pending[index] = ([], [], [])
                entry = self._pending.get(index)
                if entry is not None:
                    if isinstance(piece, str):
                        entry[0].append(piece)
                    if isinstance(text := delta.get("content"), str):
                        entry[1].append(text)
                    entry[2].extend(tc["id"] for tc in dicts(delta.get("tool_calls"))
                                    if isinstance(tc.get("id"), str) and tc["id"] and tc["id"] not in entry[2])
            if choice.get("finish_reason") and index in self._pending:
                self._emit(index, out)

    def _emit(self, index: Any, out: Out) -> None:
        reasoning, text, ids = self._pending.pop(index)
        out.extend(records("".join(reasoning), ids, "".join(text)))

    def finish(self, out: Out) -> None:
        for index in list(self._pending):
            self._emit(index, out)

    def forget_partial(self) -> None:
        """An event was lost: a piece of the reasoning may be missing, and a partial one must never be given back."""
        self._pending.clear()
