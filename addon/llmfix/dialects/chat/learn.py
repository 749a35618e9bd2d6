"""Learning tool calls in Chat Completions: ``tool_calls[]`` of assistant messages, JSON answers and SSE deltas.

The reasoning a thinking-mode answer carries (``reasoning_content``) is learned beside them, by
:mod:`.learn_reasoning`, and the thought signature Gemini's OpenAI-compatible door puts on a tool call by
:mod:`.learn_signatures` (their records: see there)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmfix.dialects.chat import learn_signatures
from llmfix.dialects.chat.learn_reasoning import ReasoningAssembler, records, streamed_choices
from llmfix.memory.learn_base import Asked, Out, assistant_calls, dicts, json_text
from llmfix.memory.store import Reasoning, ToolCall

__all__ = ["ANSWER_NEEDLES", "ARRAYS", "Assembler", "calls_in_request", "calls_in_response", "reasoning_in_response"]

ANSWER_NEEDLES = (b"tool_calls", b"reasoning")
"""Bytes a JSON answer holds when there is something in it to learn (a call, reasoning)."""
ARRAYS = False
"""A JSON answer is one object."""


def _chat_call(tc: Any) -> ToolCall | None:
    """A Chat ``tool_calls[]`` entry (function or custom) → ToolCall, or None if incomplete."""
    if not isinstance(tc, dict):
        return None
    call_id = tc.get("id")
    if tc.get("type") == "custom" and isinstance(custom := tc.get("custom"), dict):
        name, args, kind = custom.get("name"), custom.get("input", ""), "custom"
    else:
        fn = tc.get("function")
        if not isinstance(fn, dict):
            return None
        name, args, kind = fn.get("name"), fn.get("arguments", ""), "function"
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
        return None
    return ToolCall(call_id, name, json_text(args if args is not None else ""), "chat", kind)


def calls_in_response(obj: dict[str, Any]) -> list[ToolCall]:
    calls = [
        _chat_call(tc)
        for choice in dicts(obj.get("choices"))
        if isinstance(message := choice.get("message"), dict)
        for tc in dicts(message.get("tool_calls"))
    ]
    return [c for c in calls if c is not None]


def reasoning_in_response(obj: dict[str, Any], asked: Asked) -> list[Reasoning]:
    """The reasoning of each choice of a JSON answer, keyed by its tool calls (or its text), and the thought
    signature of each of its tool calls."""
    out: list[Reasoning] = []
    for choice in dicts(obj.get("choices")):
        message = choice.get("message")
        if not isinstance(message, dict):
            continue
        entries = [(tc, _chat_call(tc)) for tc in dicts(message.get("tool_calls"))]
        out += learn_signatures.in_message(message, entries, asked)
        if not isinstance(reasoning := message.get("reasoning_content"), str):
            continue
        calls = [c for _, c in entries if c is not None]
        content = message.get("content")
        out += records(reasoning, calls, content if isinstance(content, str) else "", asked)
    return out


def calls_in_request(body: dict[str, Any], known: Callable[[Any], bool]) -> list[ToolCall]:
    return assistant_calls(body, "tool_calls", _chat_call, known)


class Assembler:
    """``choices[i].delta.tool_calls[]`` reassembled by (choice index, tool-call index)."""

    def __init__(self, asked: Asked | None = None) -> None:
        # (choice index, tool-call index) -> [id, name, argument fragments, kind]
        self._pending: dict[tuple[Any, Any], list[Any]] = {}
        self._reasoning = ReasoningAssembler(asked or Asked())
        self._signatures = learn_signatures.SignatureAssembler(asked or Asked())

    def wants(self, event: bytes) -> bool:
        return (b"tool_calls" in event or (bool(self._pending) and b"finish_reason" in event)
                or self._reasoning.wants(event) or self._signatures.wants(event))

    def on_event(self, data: Any, out: Out) -> None:
        for ci, delta, ended in streamed_choices(data):
            if delta is not None:
                for pos, tc in enumerate(dicts(delta.get("tool_calls"))):
                    self._add(ci, tc.get("index", pos), tc, out)
            if ended:
                self._emit([k for k in self._pending if k[0] == ci], out)
        self._reasoning.on_event(data, out)  # after the calls: a choice's reasoning is keyed by the calls it made
        self._signatures.on_event(data, out)  # and so are its signatures

    def _add(self, ci: Any, ti: Any, tc: dict[str, Any], out: Out) -> None:
        key = (ci, ti)
        call_id = tc.get("id")
        entry = self._pending.get(key)
        if entry is not None and isinstance(call_id, str) and call_id and entry[0] and call_id != entry[0]:
            self._emit([key], out)  # a vendor reusing one index for several whole calls
            entry = None
        if entry is None:
            entry = self._pending[key] = [None, None, [], "function"]
        if isinstance(call_id, str) and call_id and not entry[0]:
            entry[0] = call_id
        if tc.get("type") == "custom" or isinstance(tc.get("custom"), dict):
            entry[3] = "custom"
        fn = tc.get("custom") if entry[3] == "custom" else tc.get("function")
        if isinstance(fn, dict):
            name, piece = fn.get("name"), fn.get("input" if entry[3] == "custom" else "arguments")
            if isinstance(name, str) and name and not entry[1]:
                entry[1] = name
            if isinstance(piece, str):
                entry[2].append(piece)

    def _emit(self, keys: list[tuple[Any, Any]], out: Out) -> None:
        for key in keys:  # insertion order: the order the calls began
            call_id, name, pieces, kind = self._pending.pop(key)
            if call_id and name:
                call = ToolCall(call_id, name, "".join(pieces), "chat", kind)
                out.append(call)
                self._reasoning.called(key[0], call)
                self._signatures.called(key[0], call)

    def finish(self, out: Out) -> None:
        self._emit(list(self._pending), out)
        self._reasoning.finish(out)
        self._signatures.finish(out)

    def forget_partial(self) -> None:
        self._pending.clear()
        self._reasoning.forget_partial()
        self._signatures.forget_partial()
