"""Fingerprints: what tells one tool call's declaration, or one Chat turn, from another, however a client re-writes it.

A client sends a call back in its own JSON, not in the model's: Droid replays ``{"file_path":"/home/dev/…"}`` where
the model streamed ``{"file_path": "/home/dev/…"}`` (``tests/fixtures/droid``: the turn-1 answer and the turn-2
request). So arguments are compared by what they say, not by their bytes: JSON arguments by their parsed value
(keys sorted, whitespace and escapes gone; ``""`` taken for ``{}``, the empty object both mean), anything else (a
custom tool's free-text input) as it is. A number a client re-writes (``1.0`` sent back as ``1``) is another value:
such a call is only not recognised, never taken for another.

Digests are SHA-256 (hex; :func:`digest` keeps 128 bits, plenty to tell apart what one memory holds, and small
enough for the fast path's states to carry many).
"""

from __future__ import annotations

import hashlib

import orjson


def canonical_arguments(arguments: str) -> bytes:
    """The arguments as compared: the sorted compact JSON of their value, or their own UTF-8 when not JSON."""
    if not arguments.strip():
        return b"{}"
    try:
        return orjson.dumps(orjson.loads(arguments), option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return arguments.encode("utf-8", "surrogatepass")


def digest(*parts: str | bytes) -> str:
    """A 128-bit SHA-256 digest (hex) of ``parts``, each length-prefixed (no two tuples of parts share one)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:32]


def declaration(name: str, kind: str, arguments: str) -> str:
    """What identifies a tool call's declaration under its id: its name, kind and arguments (as compared)."""
    return digest(name, kind, canonical_arguments(arguments))


def value_digest(value: str) -> str:
    """The full SHA-256 (hex) of a stored value: the name it is kept under once, whatever number of keys map to it."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
