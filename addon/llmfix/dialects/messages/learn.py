"""Learning tool calls in Anthropic Messages: ``tool_use`` blocks of assistant messages, JSON answers and SSE events.

Which upstream issued which thinking block is learned beside them, by :mod:`.learn_thinking` (its
records: see there)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmfix.dialects.messages.learn_thinking import ThinkingAssembler, reasoning_in_response
from llmfix.memory.learn_base import Asked, Out, assistant_calls, dicts, json_text
from llmfix.memory.store import ToolCall

__all__ = ["ANSWER_NEEDLES", "ARRAYS", "Assembler", "calls_in_request", "calls_in_response", "reasoning_in_response"]

ANSWER_NEEDLES = (b"tool_use", b"thinking")
"""Bytes a JSON answer holds when there is something in it to learn (a call, a thinking block)."""
ARRAYS = False
"""A JSON answer is one object."""


def _anthropic_call(block: Any) -> ToolCall | None:
    """An Anthropic ``tool_use`` block → ToolCall (arguments = JSON text of ``input``), or None."""
    if not isinstance(block, dict) or block.get("type") != "tool_use":
        return None
    call_id, name = block.get("id"), block.get("name")
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
        return None
    return ToolCall(call_id, name, json_text(block.get("input", {})), "messages")


def calls_in_response(obj: dict[str, Any]) -> list[ToolCall]:
    return [c for c in map(_anthropic_call, dicts(obj.get("content"))) if c is not None]


def calls_in_request(body: dict[str, Any], known: Callable[[Any], bool]) -> list[ToolCall]:
    return assistant_calls(body, "content", _anthropic_call, known)


class Assembler:
    """``tool_use`` content blocks; ``input_json_delta`` fragments joined per block index."""

    def __init__(self, asked: Asked | None = None) -> None:  # what is learned here needs nothing of the request
        # block index -> [id, name, input (from content_block_start), fragments]
        self._pending: dict[Any, list[Any]] = {}
        self._thinking = ThinkingAssembler()

    def wants(self, event: bytes) -> bool:
        return b"tool_use" in event or (
            bool(self._pending) and (b"input_json_delta" in event or b"content_block_stop" in event)
        ) or self._thinking.wants(event)

    def on_event(self, data: Any, out: Out) -> None:
        self._thinking.on_event(data, out)
        if not isinstance(data, dict):
            return
        kind, index = data.get("type"), data.get("index")
        if kind == "content_block_start":
            call = _anthropic_call(data.get("content_block"))
            if call is not None:
                self._pending[index] = [call.call_id, call.name, call.arguments, []]
        elif kind == "content_block_delta" and index in self._pending:
            delta = data.get("delta")
            if isinstance(delta, dict) and isinstance(piece := delta.get("partial_json"), str):
                self._pending[index][3].append(piece)
        elif kind == "content_block_stop" and index in self._pending:
            self._emit(index, out)

    def _emit(self, index: Any, out: Out) -> None:
        call_id, name, start_input, pieces = self._pending.pop(index)
        out.append(ToolCall(call_id, name, "".join(pieces) or start_input, "messages"))

    def finish(self, out: Out) -> None:
        for index in list(self._pending):
            self._emit(index, out)
        self._thinking.finish(out)

    def forget_partial(self) -> None:
        self._pending.clear()
        self._thinking.forget_partial()
