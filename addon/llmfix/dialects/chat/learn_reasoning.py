"""Learning a Chat turn's ``reasoning_content`` (DeepSeek, Kimi thinking mode) from the answer that carried it.

DeepSeek's and Kimi's Chat APIs answer in thinking mode with the model's reasoning beside the answer —
``choices[i].message.reasoning_content`` in a JSON answer, ``choices[i].delta.reasoning_content`` pieces in a
stream — and want it back, byte for byte, when the turn is replayed (docs/evidence.md, "Reasoning and thinking
replay"). Clients lose it (Droid BYOK strips it, opencode sends ``""``); restore-reasoning-content gives it back
from what this learns.

One kind of :class:`~llmfix.memory.store.Reasoning` record, ``chat.reasoning_content``: ``value`` is the reasoning
text exactly as the answer carried it (pieces joined), ``upstream`` the upstream that answered. ``key`` recognises
the turn when its session sends it back, and only there — a reasoning given to another session's request would
hand it another user's thoughts:

- a turn that made tool calls: one key per call, :func:`call_key` — the upstream, the call id, and the call's
  declaration (name, kind, arguments as compared, :mod:`llmfix.memory.fingerprint`). The id alone is not enough:
  Kimi numbers its ids within a conversation (``functions.bash:0`` is every session's first ``bash`` call);
- a turn that made none: :func:`text_key` — the upstream, the turn's text, and :func:`context` of the message it
  answered (the last message of the request the answer came for: the user's words or the tool result it followed,
  which the replayed turn's preceding message is). A text alone is not enough: DeepSeek opens many sessions alike
  ("Let me look at the file structure first."). A turn with no text, or whose request llmfix could not read, gets
  no record.

Two sessions may still make the same key (the same first command on Kimi, the same words to the same greeting):
the kind is single-valued (:data:`llmfix.memory.store.SINGLE_VALUED`), so a key noted again with another reasoning
is ambiguous and never restored from. A turn that gave no reasoning gives no record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from llmfix.memory.fingerprint import declaration, digest
from llmfix.memory.learn_base import Asked, Out, dicts
from llmfix.memory.store import Reasoning, ToolCall

KIND = "chat.reasoning_content"


def call_key(upstream: str, call_id: str, name: str, kind: str, arguments: str) -> str:
    """The key of a turn by one of its tool calls."""
    return "call " + digest(upstream, call_id, declaration(name, kind, arguments))


def context(role: str, text: str, tool_call_id: str | None) -> str:
    """What a message says, as a turn that answered it is known by: its role, the call it answers, its text."""
    return digest(role, tool_call_id or "", text.strip())


def text_key(upstream: str, text: str, before: str) -> str:
    """The key of a turn that made no tool call: its text, after the message of :func:`context` ``before``."""
    return "text " + digest(upstream, text.strip(), before)


def raw_text(content: Any) -> str:
    """The text of a request message's ``content`` (a string, or the ``text`` parts joined by newlines)."""
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in dicts(content) if p.get("type") == "text" and isinstance(p.get("text"), str))


def last_context(body: Any) -> str | None:
    """:func:`context` of the last message of a Chat request body; None when it has none."""
    messages = body.get("messages") if isinstance(body, dict) else None
    last = messages[-1] if isinstance(messages, list) and messages else None
    if not isinstance(last, dict) or not isinstance(role := last.get("role"), str):
        return None
    call_id = last.get("tool_call_id")
    return context(role, raw_text(last.get("content")), call_id if isinstance(call_id, str) else None)


def records(reasoning: str, calls: Iterable[ToolCall], text: str, asked: Asked) -> list[Reasoning]:
    """The records of one answered turn (none when it carried no reasoning)."""
    if not reasoning:
        return []
    up = asked.upstream
    keys = list(dict.fromkeys(call_key(up, c.call_id, c.name, c.kind, c.arguments) for c in calls))
    if not keys and text.strip() and (before := last_context(asked.body())) is not None:
        keys = [text_key(up, text, before)]
    return [Reasoning(KIND, key, reasoning, up) for key in keys]


def streamed_choices(data: Any) -> Iterator[tuple[Any, dict[str, Any] | None, bool]]:
    """Each choice of a streamed Chat chunk: its index, its ``delta`` (None when it has none), and whether it ended
    (``finish_reason``)."""
    for choice in dicts(data.get("choices") if isinstance(data, dict) else None):
        delta = choice.get("delta")
        yield choice.get("index", 0), delta if isinstance(delta, dict) else None, bool(choice.get("finish_reason"))


class ChoiceCalls:
    """What the records of a stream are keyed by: the calls each choice made, handed over by the Chat assembler as
    it completes them."""

    def __init__(self, asked: Asked) -> None:
        self._asked = asked
        self._calls: dict[Any, list[ToolCall]] = {}

    def called(self, index: Any, call: ToolCall) -> None:
        """Choice ``index`` made ``call`` (complete)."""
        self._calls.setdefault(index, []).append(call)


class ReasoningAssembler(ChoiceCalls):
    """``choices[i].delta`` reasoning and content pieces per choice, and the calls the choice made; each choice's
    records at its ``finish_reason`` (or at the end of the stream)."""

    def __init__(self, asked: Asked) -> None:
        super().__init__(asked)
        self._pending: dict[Any, tuple[list[str], list[str]]] = {}  # index → (reasoning, text)

    def wants(self, event: bytes) -> bool:
        """Reasoning begins a choice worth following; after that its content and end matter too."""
        return b"reasoning_content" in event or bool(self._pending)

    def on_event(self, data: Any, out: Out) -> None:
        for index, delta, ended in streamed_choices(data):
            if delta is not None:
                piece = delta.get("reasoning_content")
                if isinstance(piece, str) and piece and index not in self._pending:
                    self._pending[index] = ([], [])
                entry = self._pending.get(index)
                if entry is not None:
                    if isinstance(piece, str):
                        entry[0].append(piece)
                    if isinstance(text := delta.get("content"), str):
                        entry[1].append(text)
            if ended:
                self._end(index, out)

    def _end(self, index: Any, out: Out) -> None:
        calls = self._calls.pop(index, [])
        if index in self._pending:
            reasoning, text = self._pending.pop(index)
            out.extend(records("".join(reasoning), calls, "".join(text), self._asked))

    def finish(self, out: Out) -> None:
        for index in list(self._pending):
            self._end(index, out)
        self._calls.clear()

    def forget_partial(self) -> None:
        """An event was lost: a piece of the reasoning may be missing, and a partial one must never be given back."""
        self._pending.clear()
        self._calls.clear()
