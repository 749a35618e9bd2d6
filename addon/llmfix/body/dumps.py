"""``orjson.dumps`` that never holds the GIL for long: megabyte strings are encoded a slice at a time.

llmfix repairs big bodies in a worker thread so that the event loop keeps serving other flows, but a C
call holds the GIL for its whole length: ``orjson.dumps`` of a repaired body carrying a 10 MB image
froze every other flow for ~11 ms (bench: small requests during a 10 MB repair loop, p99 +20 ms).

:func:`dumps` gives the same bytes as ``orjson.dumps``. Each string of :data:`BIG` characters or more is
swapped for a short unique token, the light tree is dumped, and each big string is encoded in slices
of :data:`SLICE` characters, each its own ``orjson.dumps`` call (between calls other threads get the
GIL). JSON escapes one code point at a time and a Python string is a sequence of code points, so the
slices' encodings joined are the encoding of the whole string.
"""

from __future__ import annotations

import secrets
from typing import Any

import orjson

BIG = 1 << 20
SLICE = 1 << 20


def dumps(value: Any, *, big: int = BIG, slice_chars: int = SLICE) -> bytes:
    """``orjson.dumps(value)``, byte for byte, with strings of ``big`` characters or more encoded in slices."""
    found: list[str] = []
    nonce = secrets.token_hex(8)
    light = _lift(value, found, big, nonce)
    if not found:
        return orjson.dumps(value)
    out = orjson.dumps(light)
    pieces: list[bytes] = []
    pos = 0
    for i, s in enumerate(found):
        token = orjson.dumps(_token(nonce, i))
        at = out.index(token, pos)  # the tokens come out in the order they were lifted (dict and list order)
        pieces.append(out[pos:at])
        pieces += _encode(s, slice_chars)
        pos = at + len(token)
    pieces.append(out[pos:])
    return b"".join(pieces)


def _token(nonce: str, i: int) -> str:
    return f"\ue000llmfix-big-string:{nonce}:{i}\ue000"


def _lift(value: Any, found: list[str], big: int, nonce: str) -> Any:
    """``value`` with each big string replaced by its token; containers copied only along the way to one."""
    if isinstance(value, str):
        if len(value) >= big:
            found.append(value)
            return _token(nonce, len(found) - 1)
        return value
    if isinstance(value, dict | list):
        out: Any = None
        for k, v in value.items() if isinstance(value, dict) else enumerate(value):
            w = _lift(v, found, big, nonce)
            if w is not v:
                if out is None:
                    out = dict(value) if isinstance(value, dict) else list(value)
                out[k] = w
        return value if out is None else out
    return value


def _encode(s: str, slice_chars: int) -> list[bytes]:
    """The JSON encoding of ``s`` (with its quotes), in pieces."""
    parts = [b'"']
    parts += [orjson.dumps(s[i : i + slice_chars])[1:-1] for i in range(0, len(s), slice_chars)]
    parts.append(b'"')
    return parts
