"""Where a body's message array ends, and where its last items end, found in its bytes and never guessed.

The prefix cache (``body/prefix.py``) marks a body at these offsets; each is certain from the parsed body:
the ``]`` that closes the array is the one whose tail parses to exactly the members after it, and an item
ends where the bytes before it are ``,`` + its compact JSON.
"""

from __future__ import annotations

from typing import Any

import orjson
import pydantic_core

from llmfix.body.haystack import find

BACK = 4
"""How many of a body's own last items are given a mark."""


def _loads(data: bytes) -> Any:
    """The parser of the full path (``body.conversation.loads``), so both read a body alike."""
    return pydantic_core.from_json(data, allow_inf_nan=False)


def _tail_candidates(data: bytes, first_tail_key: str | None) -> list[int]:
    """Offsets of ``]`` that may close the message array, leftmost first."""
    if first_tail_key is None:  # the array is the last member: ``]`` then only whitespace and ``}``
        end = len(data.rstrip())
        if end and data[end - 1 : end] == b"}":
            inner = len(data[: end - 1].rstrip())
            if inner and data[inner - 1 : inner] == b"]":
                return [inner - 1]
        return []
    key = orjson.dumps(first_tail_key)
    out: list[int] = []
    pos = find(data, key)
    while pos >= 0 and len(out) < 8:  # each ``"key"`` preceded by ``]``, ``,`` and whitespace only
        before = data[max(0, pos - 64) : pos].rstrip()
        if before.endswith(b","):
            before = before[:-1].rstrip()
            if before.endswith(b"]"):
                out.append(max(0, pos - 64) + len(before) - 1)
        pos = find(data, key, pos + 1)
    return out


def split(data: bytes, body: dict[str, Any], key: str) -> int | None:
    """The offset of the ``]`` closing ``body[key]`` in ``data`` (see the module docstring), or None.

    ``e`` must be the end of a top-level member: the tail must parse (as ``{`` + its members) to exactly
    the body's members after the array (a ``]`` inside a string or a nested value leaves it unbalanced);
    among the candidates the leftmost is taken, and none is given when a member before the array is itself
    an array or the tail names the array's key (the only ways a duplicate top-level key could make that
    member another one)."""
    keys = list(body)
    if key not in body or not isinstance(body[key], list) or not body[key]:
        return None
    at = keys.index(key)
    if any(isinstance(body[k], list) for k in keys[:at]):
        return None
    after = keys[at + 1 :]
    want = {k: body[k] for k in after}
    for e in _tail_candidates(data, after[0] if after else None):
        rest = data[e + 1 :].lstrip()
        if not after:
            return e
        if not rest.startswith(b","):
            continue
        if orjson.dumps(key) in rest:
            return None
        try:  # the same bytes as the members written compactly: certain without parsing them again
            if rest[1:].rstrip() == orjson.dumps(want)[1:]:
                return e
        except TypeError:  # a value orjson cannot write (an integer beyond 64 bits): parse
            pass
        try:
            got = _loads(b"{" + rest[1:])
        except ValueError:
            continue
        if got == want and list(got) == after:
            return e
    return None


def between(data: bytes, offset: int, end: int) -> list[Any] | None:
    """The items between a mark at ``offset`` and the array's end at ``end``: [] when there are none, None when
    the bytes there are not ``,`` + complete JSON values."""
    middle = data[offset:end].strip()
    if not middle:
        return []
    if not middle.startswith(b","):
        return None
    try:
        new = _loads(b"[" + middle[1:] + b"]")
    except ValueError:
        return None
    # a lone "," before the "]" is no value: invalid JSON, not an append
    return new if isinstance(new, list) and new else None


def own_marks(data: bytes, raw: list[Any], first: int, head: int, since: int) -> list[tuple[int, int]]:
    """``(offset, count)`` for the last :data:`BACK` items of the array after its first ``since``, where
    ``raw`` are its items from index ``first`` on and ``head`` the end of the last one: the offset where
    each one's ``,`` starts, found by comparing the bytes before ``head`` with their compact JSON."""
    out: list[tuple[int, int]] = []
    pos = head
    n = first + len(raw)
    for j in range(n - 1, max(since, n - BACK, first - 1), -1):
        try:
            item = orjson.dumps(raw[j - first])
        except TypeError:  # a value orjson cannot write (an integer beyond 64 bits): no mark
            break
        start = pos - len(item)
        if start < 1 or data[start:pos] != item or data[start - 1 : start] != b",":
            break
        pos = start - 1
        out.append((pos, j))
    return out[::-1]
