"""A request body as a typed conversation, and back to bytes.

:func:`parse` confirms the route's dialect from the body's shape and validates only the message
array (``messages`` / ``input``); every other top-level field stays the plain value it came as.
:func:`serialize` puts the repaired array back in place, keeping the top-level key order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import pydantic_core
from pydantic import ValidationError

from llmfix.body import dumps
from llmfix.dialects.base import Dialect
from llmfix.wire.base import dump_items


class BadBody(ValueError):
    """The body is not a request of its route's dialect; the reason is the message."""


SLICE = 1024
"""Items validated per call into pydantic-core. One call holds the GIL throughout, and llmfix runs large
bodies in a worker thread so that the event loop keeps serving other flows: a million-item array in one
call froze every flow for ~2 s; between slices the event loop gets the GIL back (each slice ≤ ~3 ms)."""


@dataclass(frozen=True, slots=True)
class Conversation:
    dialect: Dialect
    body: dict[str, Any]  # the decoded top-level JSON object, untouched
    items: list[Any]  # typed messages (chat, messages) or input items (responses)

    @property
    def key(self) -> str:
        return self.dialect.shape.key

    @property
    def model(self) -> str | None:
        m = self.body.get("model")
        return m if isinstance(m, str) else None

    def with_items(self, items: list[Any]) -> Conversation:
        return Conversation(self.dialect, self.body, items)


def loads(data: bytes) -> Any:
    """Parse JSON (pydantic-core's parser: the fastest here on bodies made of one huge base64 string)."""
    try:
        return pydantic_core.from_json(data, allow_inf_nan=False)
    except ValueError as e:
        raise BadBody(f"body is not valid JSON ({e})") from None


def check_shape(dialect: Dialect, body: Any) -> list[Any] | None:
    """The raw message array; None when ``input`` is a plain string. Raises :class:`BadBody` on a wrong shape."""
    if not isinstance(body, dict):
        raise BadBody(f"body is a JSON {type(body).__name__}, not an object")
    key = dialect.shape.key
    if key not in dialect.shape.holder(body):
        raise BadBody(f"no '{key}' field: not a {dialect} request")
    try:
        return dialect.shape.conversation(body)
    except ValueError as e:
        raise BadBody(str(e)) from None


def parse(dialect: Dialect, body: Any) -> Conversation | None:
    """The typed conversation, or None when the body holds nothing to repair (e.g. ``input`` is a string).

    Raises :class:`BadBody` when the body does not have the dialect's shape.
    """
    raw = check_shape(dialect, body)
    if raw is None:
        return None
    return Conversation(dialect, body, typed(dialect, raw))


def typed(dialect: Dialect, raw: list[Any], offset: int = 0) -> list[Any]:
    """``raw`` items validated as ``dialect``'s messages; :class:`BadBody` names the first bad one, counting
    from ``offset``."""
    try:
        return _validate(dialect, raw)
    except _Invalid as bad:
        err = max(bad.error.errors(), key=lambda er: len(er["loc"]))
        parts = [p for p in err["loc"] if not _is_tag(p, dialect.shape.tags)]
        parts = [p for i, p in enumerate(parts) if i + 1 >= len(parts) or parts[i + 1] != p]
        if parts and isinstance(parts[0], int):
            parts[0] += bad.offset + offset
        loc = dialect.shape.key + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
        raise BadBody(f"unexpected shape at {loc}: {err['msg']}") from None


class _Invalid(Exception):
    def __init__(self, error: ValidationError, offset: int) -> None:
        self.error, self.offset = error, offset


def _validate(dialect: Dialect, raw: list[Any]) -> list[Any]:
    """The typed items, validated :data:`SLICE` at a time; the first bad item raises :class:`_Invalid`."""
    typed = dialect.shape.typed
    items: list[Any] = []
    for start in range(0, len(raw), SLICE):
        try:
            items += typed(raw[start : start + SLICE])
        except ValidationError as e:
            raise _Invalid(e, start) from None
    return items


def _is_tag(p: Any, tags: frozenset[str]) -> bool:
    """Union branch names pydantic puts in error locations; not part of the JSON path."""
    return isinstance(p, str) and (p in tags or "[" in p or "(" in p)


def to_body(conv: Conversation, original: Conversation | None = None) -> dict[str, Any]:
    """The top-level object with the (repaired) array in place; other keys, and their order, kept.

    Objects of ``original`` that ``conv`` still holds are emitted as the exact JSON they were parsed from.
    """
    base = original or conv
    shape = conv.dialect.shape
    items = dump_items(conv.items, base.items, shape.holder(base.body)[base.key])
    holder = shape.holder(conv.body)
    if holder is conv.body:
        return {**conv.body, conv.key: items}
    assert shape.envelope is not None  # the request a door wraps: repaired inside, wrapped again
    return {**conv.body, shape.envelope: {**holder, conv.key: items}}


def serialize(conv: Conversation, original: Conversation | None = None, *, size: int = 0) -> bytes:
    """The repaired body's JSON. ``size``: the original body's length; from :data:`dumps.BIG` on, megabyte
    strings (images) are encoded a slice at a time so that the GIL is never held for long."""
    body = to_body(conv, original)
    return dumps.dumps(body) if size >= dumps.BIG else orjson.dumps(body)
