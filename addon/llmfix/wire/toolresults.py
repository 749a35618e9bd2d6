"""Tool results of a conversation in a dialect-neutral form, and media parts converted between dialects.

restore-tool-media compares what a client sent for a call id with what a gateway forwards for it,
possibly in another dialect (axonhub turns Responses into Chat). A :class:`Result` names a tool result
by call id with its text and its parts in order; a :class:`Piece` is one part: text, or media with a
URL (data URL or http) that every dialect can carry. Written once for every dialect: a tool result is an
object that says so (:meth:`llmfix.wire.base.Wire.is_result`), an item on its own (a Chat tool message, a
Responses output) or a block inside one (an Anthropic ``tool_result``); the dialect only turns its parts into
pieces and back (:class:`llmfix.dialects.base.Media`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from llmfix.dialects.base import Dialect, Piece, Result
from llmfix.wire.base import Media, Textual, Wire

__all__ = ["Piece", "Result", "loose_media", "native", "piece", "refs", "results"]


def piece(dialect: Dialect, part: Any) -> Piece:
    """``part`` of ``dialect`` as a neutral piece; a media piece keeps the part, to be reused as it is."""
    got = dialect.media.piece(part)
    return replace(got, dialect=dialect) if got.raw is not None else got


def _pieces(dialect: Dialect, content: Any) -> tuple[Piece, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (Piece("text", text=content),) if content else ()
    return tuple(piece(dialect, p) for p in content)


def _contents(m: Any) -> Any:
    return m.held()


def holders(items: list[Any], start: int = 0) -> Iterator[tuple[int, Any]]:
    """(item index, tool result) for each tool result in ``items[start:]``, in order: an item that is one, or
    each result inside an item's parts."""
    for i in range(start, len(items)):
        m = items[i]
        if not isinstance(m, Wire):
            continue
        if m.is_result():
            yield i, m
        elif isinstance(content := _contents(m), list):
            for b in content:
                if isinstance(b, Wire) and b.is_result():
                    yield i, b


def loose_media(items: list[Any]) -> list[tuple[int, Any]]:
    """(index, part) of every media part outside tool results — in user messages and the like — in order."""
    found: list[tuple[int, Any]] = []
    for i, m in enumerate(items):
        if isinstance(m, Wire) and not m.is_result() and isinstance(content := _contents(m), list):
            found += [(i, p) for p in content if isinstance(p, Media)]
    return found


def results(dialect: Dialect, items: list[Any], text_too: Callable[[str], bool] | None = None) -> list[Result]:
    """Every tool result in the conversation that names its call.

    ``text_too``: when given, a result whose content is a plain string (it cannot hold media) is listed
    only if ``text_too(call_id)`` says so, and costs nothing otherwise."""
    out: list[Result] = []
    loose = loose_media(items)

    def later(index: int) -> tuple[Any, ...]:
        return tuple(p for i, p in loose if i >= index) if loose else ()

    for i, r in holders(items):
        call_id = r.result_id()
        content = _contents(r)
        if call_id and (text_too is None or not isinstance(content, str) or text_too(call_id)):
            out.append(Result(call_id, i, _pieces(dialect, content), later(i), dialect))
    return out


def refs(items: list[Any], start: int = 0) -> list[tuple[str, int, bool]]:
    """(call id, item index, whether it has media) of each tool result in ``items[start:]`` that :func:`results`
    lists, in the same order, without building its pieces (cheap: no Piece per text result)."""
    out: list[tuple[str, int, bool]] = []
    for i, r in holders(items, start):
        if call_id := r.result_id():
            content = _contents(r)
            out.append((call_id, i, isinstance(content, list) and any(not isinstance(p, Textual) for p in content)))
    return out


def native(piece: Piece, dialect: Dialect) -> Any | None:
    """``piece`` as a part of ``dialect``; None when it cannot be carried there."""
    if piece.dialect is dialect and piece.raw is not None:
        return piece.raw
    if piece.kind == "text":
        return dialect.media.text_part(piece.text or "")
    if piece.kind != "image" or not piece.url:
        return None
    return dialect.media.image(piece.url, piece.detail)
