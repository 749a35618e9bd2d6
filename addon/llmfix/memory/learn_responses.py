"""Learning tool calls in the Responses API: ``function_call`` / ``custom_tool_call`` items, JSON and SSE."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmfix.memory.learn_base import dicts, json_text
from llmfix.memory.store import ToolCall

_RESPONSES_KINDS = {"function_call": "function", "custom_tool_call": "custom"}


def _responses_call(item: Any) -> ToolCall | None:
    """A Responses ``function_call`` / ``custom_tool_call`` item → ToolCall, or None."""
    if not isinstance(item, dict):
        return None
    item_type = item.get("type")
    kind = _RESPONSES_KINDS.get(item_type) if isinstance(item_type, str) else None
    if kind is None:
        return None
    call_id, name = item.get("call_id"), item.get("name")
    args = item.get("arguments" if kind == "function" else "input", "")
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
        return None
    return ToolCall(call_id, name, json_text(args if args is not None else ""), "responses", kind)


def calls_in_response(obj: dict[str, Any]) -> list[ToolCall]:
    return [c for c in map(_responses_call, dicts(obj.get("output"))) if c is not None]


def calls_in_request(body: dict[str, Any], known: Callable[[Any], bool]) -> list[ToolCall]:
    calls = [_responses_call(item) for item in dicts(body.get("input"))
             if isinstance(kind := item.get("type"), str) and kind in _RESPONSES_KINDS
             and not known(item.get("call_id"))]
    return [c for c in calls if c is not None]


class Assembler:
    """Responses ``function_call`` / ``custom_tool_call`` items, keyed by item id, reported by call_id."""

    _ITEM_EVENTS = ("response.output_item.added", "response.output_item.done")
    _DELTA_EVENTS = ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta")
    _DONE_EVENTS = ("response.function_call_arguments.done", "response.custom_tool_call_input.done")
    _FINAL_EVENTS = ("response.completed", "response.incomplete")

    def __init__(self) -> None:
        # item key -> [call_id, name, argument fragments, kind]
        self._pending: dict[str, list[Any]] = {}
        self._by_index: dict[Any, str] = {}

    def wants(self, event: bytes) -> bool:
        return b"_call" in event

    def _key(self, data: dict[str, Any], item_id: Any) -> str | None:
        if isinstance(item_id, str) and item_id in self._pending:
            return item_id
        key = self._by_index.get(data.get("output_index"))
        return key if key in self._pending else None

    def on_event(self, data: Any, out: list[ToolCall]) -> None:
        if not isinstance(data, dict):
            return
        kind = data.get("type")
        if kind in self._ITEM_EVENTS:
            item = data.get("item")
            call = _responses_call(item)
            if call is None or not isinstance(item, dict):
                return
            key = item.get("id") if isinstance(item.get("id"), str) else f"#{data.get('output_index')}"
            if kind == "response.output_item.done":
                entry = self._pending.pop(key, None)
                if entry is not None and not call.arguments and entry[2]:
                    call = ToolCall(call.call_id, call.name, "".join(entry[2]), "responses", call.kind)
                out.append(call)
            elif key not in self._pending:
                self._pending[key] = [call.call_id, call.name, [call.arguments] if call.arguments else [], call.kind]
                self._by_index[data.get("output_index")] = key
        elif kind in self._DELTA_EVENTS:
            key = self._key(data, data.get("item_id"))
            if key is not None and isinstance(piece := data.get("delta"), str):
                self._pending[key][2].append(piece)
        elif kind in self._DONE_EVENTS:
            key = self._key(data, data.get("item_id"))
            full = data.get("arguments" if kind == self._DONE_EVENTS[0] else "input")
            if key is not None and isinstance(full, str):
                self._pending[key][2] = [full]
        elif kind in self._FINAL_EVENTS:
            response = data.get("response")
            if isinstance(response, dict):
                out.extend(c for c in map(_responses_call, dicts(response.get("output"))) if c is not None)
                self.forget_partial()

    def finish(self, out: list[ToolCall]) -> None:
        for call_id, name, pieces, kind in self._pending.values():
            out.append(ToolCall(call_id, name, "".join(pieces), "responses", kind))
        self.forget_partial()

    def forget_partial(self) -> None:
        self._pending.clear()
        self._by_index.clear()
