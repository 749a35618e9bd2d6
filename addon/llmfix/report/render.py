"""A conversation as readable lines: roles, tool calls and call ids, text, media as references.

Used for the diff llmfix shows in mitmweb and for its conversation view. Lines are redacted and
bounded: no base64, no secrets, long texts cut. Each dialect lays out its own items
(``dialects/*/answers.py``) with the helpers here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmfix.dialects.base import Dialect
from llmfix.report.redact import redact_text
from llmfix.wire.base import Media, Textual

TEXT = 160


def text(t: str) -> str:
    return repr(redact_text(t, TEXT))


def part(p: Any) -> str:
    if isinstance(p, Textual):
        return f"{p.type} {text(p.text)}"
    if isinstance(p, Media):
        return f"{p.type} {p.media()}"
    return f"{getattr(p, 'type', None) or 'part'} …"


def content(c: Any) -> list[str]:
    if c is None:
        return []
    if isinstance(c, str):
        return [text(c)]
    return [part(p) for p in c]


def other(i: int, m: Any) -> str:
    """The line of an item a dialect does not lay out itself."""
    return f"[{i}] {getattr(m, 'type', None) or 'item'}"


def each_message(items: list[Any], kind: type, message_lines: Callable[[int, Any], list[str]]) -> list[str]:
    """The lines of a dialect's items: each message of type ``kind`` laid out by ``message_lines(i, m)``, any other
    item by :func:`other`."""
    return [line for i, m in enumerate(items)
            for line in (message_lines(i, m) if isinstance(m, kind) else [other(i, m)])]


def lines(dialect: Dialect, items: list[Any]) -> list[str]:
    return dialect.answers.lines(items)


def with_extras(out: list[str], extras: dict[int, list[str]]) -> list[str]:
    """Insert extra lines (reasoning) right after the header line ``[i] …`` of item ``i``."""
    got: list[str] = []
    for line in out:
        got.append(line)
        if line.startswith("[") and (i := line[1:].split("]", 1)[0]).isdigit():
            got.extend(f"    {x}" for x in extras.get(int(i), []))
    return got
