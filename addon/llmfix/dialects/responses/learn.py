"""Learning from the Responses API: tool calls (``function_call`` / ``custom_tool_call`` items) and the order of
reasoning items, from JSON answers and from the stream (SSE, or the WebSocket messages that carry the same events).

Why the order: a reasoning model's output is e.g. ``[reasoning rs_1, function_call fc_1]``. Replayed later, an
item the model produced after a reasoning item must come with that reasoning item (OpenAI: ``Item 'fc_…' of type
'function_call' was provided without its required 'reasoning' item: 'rs_…'.``), and the reasoning item must sit
directly before the item that followed it (``Item 'rs_…' of type 'reasoning' was provided without its required
following item.``). Clients lose or move reasoning items; what the answer issued tells which item needed which.

The :class:`~llmfix.memory.store.Reasoning` kinds (key → value), read by ``repairs/pair_reasoning_items.py``,
``repairs/drop_unverifiable_reasoning.py`` and the rejection rules of ``retry/rejections.py``:

- ``responses.order`` — key: an item id as the upstream issued it (``rs_…``, ``fc_…``, ``msg_…``, any other);
  value: compact JSON with ``after`` (the id of the last reasoning item before this item in its response's
  output, when there was one) and, for a reasoning item, ``next`` (the id of the item directly after it, when
  there was one). Learned from answers. A record taught by a rejection (:func:`taught_order`) carries
  ``"rejected": true``: ``after`` is then the reasoning item the upstream said the item lacks, and a reasoning
  item's record without ``next`` says the upstream rejected it for lacking its following item. The key
  ``@`` + upstream id holds that upstream's latest teaching (a marker; see :func:`marker`).
- ``responses.sealed`` — key: the sha256 (hex) of a reasoning item's ``encrypted_content``; value: that item's
  id. Learned from answers, so that a reasoning item replayed without its ``id`` is still recognised.
- ``responses.refused`` — key: ``sha256 of an encrypted_content + " " + upstream`` (that upstream cannot
  verify it: ``invalid_encrypted_content``) or ``"id " + item id + " " + upstream`` (that upstream does not hold
  the item: ``Item with id … not found. Items are not persisted when `store` is set to false.``); value: what it
  was (``encrypted`` / the item's type). Taught by rejections only. The key ``@`` + upstream holds the marker.

What is learned from a stream comes from ``response.output_item.done`` and ``response.completed`` only: the
spec says the ``encrypted_content`` of ``response.output_item.added`` may be incomplete (``ReasoningItem`` in
openai/openai-openapi).
Order records are reported when the response completes (its ``output`` is the whole list), or at the end of a
stream cut short from the items done so far, never across a gap: an event lost in the middle (an oversized one
was dropped) leaves that response's order unlearned rather than wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from llmfix.memory.fingerprint import value_digest
from llmfix.memory.learn_base import Asked, Out, dicts, json_text
from llmfix.memory.store import Reasoning, ToolCall

ORDER = "responses.order"
SEALED = "responses.sealed"
REFUSED = "responses.refused"
MAX_ID_CHARS = 256
"""Longer item ids are not keys llmfix keeps (real ones are ~50 characters)."""

_RESPONSES_KINDS = {"function_call": "function", "custom_tool_call": "custom"}


ANSWER_NEEDLES = (b"function_call", b"custom_tool_call", b"reasoning")
"""Bytes a JSON answer holds when there is something in it to learn (a call, a reasoning item)."""
ARRAYS = False
"""A JSON answer is one object."""


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


# -- the reasoning records -------------------------------------------------------------------------------------


sealed_key = value_digest
"""How an ``encrypted_content`` is named in the memory: its SHA-256, hex (never the value itself)."""


def order_value(after: str | None = None, next_id: str | None = None, *, rejected: bool = False) -> str:
    value: dict[str, Any] = {}
    if after:
        value["after"] = after
    if next_id:
        value["next"] = next_id
    if rejected:
        value["rejected"] = True
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def read_order(value: str) -> tuple[str | None, str | None, bool]:
    """(after, next, rejected) of a ``responses.order`` value; all empty for a value that does not parse."""
    try:
        got = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None, None, False
    if not isinstance(got, dict):
        return None, None, False
    after, nxt = got.get("after"), got.get("next")
    return (after if isinstance(after, str) else None, nxt if isinstance(nxt, str) else None,
            got.get("rejected") is True)


def marker(upstream: str) -> str:
    """The key, in ``responses.order`` and in ``responses.refused``, of an upstream's latest teaching. Every
    rejection that teaches records changes it, so that a check which settled a conversation's older items
    knows to look at them again (``repairs/settled.py``: the fast path only reads the items a turn adds)."""
    return "@" + upstream


def refused_content(upstream: str, encrypted_content: str) -> str:
    """The ``responses.refused`` key saying ``upstream`` cannot verify this encrypted content."""
    return f"{sealed_key(encrypted_content)} {upstream}"


def refused_item(upstream: str, item_id: str) -> str:
    """The ``responses.refused`` key saying ``upstream`` does not hold this item."""
    return f"id {item_id} {upstream}"


def taught_order(item_id: str, reasoning_id: str | None, upstream: str) -> Reasoning:
    """What a rejection says: ``item_id`` lacks its reasoning item ``reasoning_id``, or (None) the reasoning
    item ``item_id`` lacks its following item."""
    return Reasoning(ORDER, item_id, order_value(reasoning_id, rejected=True), upstream)


def _usable_id(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS else None


def reasoning_in_output(output: list[dict[str, Any]]) -> list[Reasoning]:
    """The order records of one response's ``output`` (its items in order), and the sealed contents."""
    records: list[Reasoning] = []
    last: str | None = None
    for i, item in enumerate(output):
        item_id = _usable_id(item.get("id"))
        is_reasoning = item.get("type") == "reasoning"
        if item_id is None:
            if is_reasoning:
                last = None  # a reasoning item nobody can name: what follows is not known to follow the earlier one
            continue
        nxt = _usable_id(output[i + 1].get("id")) if is_reasoning and i + 1 < len(output) else None
        if last is not None or nxt is not None:
            records.append(Reasoning(ORDER, item_id, order_value(last, nxt)))
        if is_reasoning:
            content = item.get("encrypted_content")
            if isinstance(content, str) and content:
                records.append(Reasoning(SEALED, sealed_key(content), item_id))
            last = item_id
    return records


def reasoning_in_response(obj: dict[str, Any], asked: Asked | None = None) -> list[Reasoning]:
    """The reasoning records of a non-streamed answer."""
    return reasoning_in_output(dicts(obj.get("output")))


# -- the stream --------------------------------------------------------------------------------------------------


class Assembler:
    """Responses ``function_call`` / ``custom_tool_call`` items, keyed by item id, reported by call_id; and each
    response's output items in order, reported as reasoning records when the response completes."""

    _ITEM_EVENTS = ("response.output_item.added", "response.output_item.done")
    _DELTA_EVENTS = ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta")
    _DONE_EVENTS = ("response.function_call_arguments.done", "response.custom_tool_call_input.done")
    _FINAL_EVENTS = ("response.completed", "response.incomplete")

    def __init__(self, asked: Asked | None = None) -> None:  # what is learned here needs nothing of the request
        # item key -> [call_id, name, argument fragments, kind]
        self._pending: dict[str, list[Any]] = {}
        self._by_index: dict[Any, str] = {}
        self._done: dict[int, dict[str, Any]] = {}  # output_index -> the item as output_item.done gave it
        self._gap = False  # an event of this response was lost: its order is not learned from the done items

    def wants(self, event: bytes) -> bool:
        return b"_call" in event or b"output_item.done" in event or b"response.completed" in event or \
            b"response.incomplete" in event

    def _key(self, data: dict[str, Any], item_id: Any) -> str | None:
        if isinstance(item_id, str) and item_id in self._pending:
            return item_id
        key = self._by_index.get(data.get("output_index"))
        return key if key in self._pending else None

    def on_event(self, data: Any, out: Out) -> None:
        if not isinstance(data, dict):
            return
        kind = data.get("type")
        if kind == "response.output_item.done":
            self._note_done(data)
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
                output = dicts(response.get("output"))
                out.extend(c for c in map(_responses_call, output) if c is not None)
                out.extend(reasoning_in_output(output) if output else self._order_so_far())
                self._next_response()

    def _note_done(self, data: dict[str, Any]) -> None:
        index, item = data.get("output_index"), data.get("item")
        if isinstance(index, int) and isinstance(item, dict) and not isinstance(index, bool):
            self._done[index] = item

    def _order_so_far(self) -> list[Reasoning]:
        """The records of the items done so far, from output index 0 up to the first one missing."""
        if self._gap:
            return []
        items: list[dict[str, Any]] = []
        while len(items) in self._done:
            items.append(self._done[len(items)])
        return reasoning_in_output(items)  # a last reasoning item gets no "next": its follower is not known yet

    def _next_response(self) -> None:
        """A response ended: a socket may carry the next one through this same assembler."""
        self._pending.clear()
        self._by_index.clear()
        self._done.clear()
        self._gap = False

    def finish(self, out: Out) -> None:
        for call_id, name, pieces, kind in self._pending.values():
            out.append(ToolCall(call_id, name, "".join(pieces), "responses", kind))
        out.extend(self._order_so_far())
        self._next_response()

    def forget_partial(self) -> None:
        self._pending.clear()
        self._by_index.clear()
        self._done.clear()
        self._gap = True
