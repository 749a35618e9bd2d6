"""Defensive readers for request bodies of unknown shape (the rules must never raise)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty dict."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else an empty list."""
    return value if isinstance(value, list) else []


def type_of(value: Any) -> str | None:
    """The ``type`` field of a JSON object if it is a string, else None."""
    kind = as_dict(value).get("type")
    return kind if isinstance(kind, str) else None


def walk_objects(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object nested anywhere inside ``value`` (depth first, including ``value``)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
