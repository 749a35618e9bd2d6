"""Tool results of a conversation in a dialect-neutral form, and media parts converted between dialects.

restore-tool-media compares what a client sent for a call id with what a gateway forwards for it,
possibly in another dialect (axonhub turns Responses into Chat). A :class:`Result` names a tool result
by call id with its text and its parts in order; a :class:`Piece` is one part: text, or media with a
URL (data URL or http) that every dialect can carry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llmfix.route import Dialect
from llmfix.wire import anthropic as an
from llmfix.wire import chat as ch
from llmfix.wire import responses as rs


@dataclass(frozen=True, slots=True)
class Piece:
    kind: str  # "text" | "image" | "file" | other media kinds
    text: str | None = None
    url: str | None = None  # data: or http(s) URL of an image
    detail: str | None = None
    dialect: Dialect | None = None
    raw: Any = None  # the part as its dialect wrote it (reused verbatim when the dialect matches)

    @property
    def is_media(self) -> bool:
        return self.kind != "text"


@dataclass(frozen=True, slots=True)
class Result:
    call_id: str
    index: int  # position of the tool result's item / message in the conversation
    pieces: tuple[Piece, ...]
    later: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    """The media parts outside tool results at or after this result in the same request (user messages…):
    restore-tool-media compares what a client had there with what a gateway has there."""

    @property
    def text(self) -> str:
        return "\n".join(p.text or "" for p in self.pieces if p.kind == "text")

    @property
    def media(self) -> tuple[Piece, ...]:
        return tuple(p for p in self.pieces if p.is_media)


def _responses_piece(p: Any) -> Piece:
    if isinstance(p, rs.TEXT_PARTS):
        return Piece("text", text=p.text)
    if isinstance(p, rs.InputImage):
        return Piece("image", url=p.image_url, detail=p.detail, dialect=Dialect.RESPONSES, raw=p)
    return Piece(getattr(p, "type", None) or "part", dialect=Dialect.RESPONSES, raw=p)


def _chat_piece(p: Any) -> Piece:
    if isinstance(p, ch.TextPart):
        return Piece("text", text=p.text)
    if isinstance(p, ch.ImagePart):
        return Piece("image", url=p.image_url.url, detail=p.image_url.detail, dialect=Dialect.CHAT, raw=p)
    return Piece(getattr(p, "type", None) or "part", dialect=Dialect.CHAT, raw=p)


def _anthropic_piece(b: Any) -> Piece:
    if isinstance(b, an.TextBlock):
        return Piece("text", text=b.text)
    if isinstance(b, an.ImageBlock) and b.type == "image":
        src = b.source
        url = None
        if src.get("type") == "base64":
            url = f"data:{src.get('media_type', 'image/png')};base64,{src.get('data', '')}"
        elif src.get("type") == "url":
            url = src.get("url")
        return Piece("image", url=url, dialect=Dialect.MESSAGES, raw=b)
    return Piece(getattr(b, "type", None) or "part", dialect=Dialect.MESSAGES, raw=b)


def _pieces(content: Any, convert: Any) -> tuple[Piece, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (Piece("text", text=content),) if content else ()
    return tuple(convert(p) for p in content)


def loose_media(dialect: Dialect, items: list[Any]) -> list[tuple[int, Any]]:
    """(index, part) of every media part outside tool results — in user messages and the like — in order."""
    found: list[tuple[int, Any]] = []
    message, media = _MESSAGE_AND_MEDIA[dialect]
    for i, m in enumerate(items):  # isinstance, not getattr/hasattr: a missing attribute on a model is slow
        if not isinstance(m, message) or not isinstance(m.content, list):
            continue
        if dialect is Dialect.CHAT and m.role == "tool":
            continue
        found += [(i, p) for p in m.content if isinstance(p, media)]
    return found


_MESSAGE_AND_MEDIA: dict[Dialect, tuple[type, tuple[type, ...]]] = {
    Dialect.RESPONSES: (rs.Message, rs.MEDIA_PARTS),
    Dialect.CHAT: (ch.Message, ch.MEDIA_PARTS),
    Dialect.MESSAGES: (an.Message, (an.ImageBlock,)),
}


def results(dialect: Dialect, items: list[Any], text_too: Callable[[str], bool] | None = None) -> list[Result]:
    """Every tool result in the conversation that names its call.

    ``text_too``: when given, a result whose content is a plain string (it cannot hold media) is listed
    only if ``text_too(call_id)`` says so, and costs nothing otherwise."""
    out: list[Result] = []
    loose = loose_media(dialect, items)

    def later(index: int) -> tuple[Any, ...]:
        return tuple(p for i, p in loose if i >= index) if loose else ()

    def wanted(call_id: str, content: Any) -> bool:
        return text_too is None or not isinstance(content, str) or text_too(call_id)

    for i, m in enumerate(items):
        if dialect is Dialect.RESPONSES and isinstance(m, rs.ToolOutput) and m.call_id:
            if wanted(m.call_id, m.output):
                out.append(Result(m.call_id, i, _pieces(m.output, _responses_piece), later(i)))
        elif dialect is Dialect.CHAT and isinstance(m, ch.Message) and m.role == "tool" and m.tool_call_id:
            if wanted(m.tool_call_id, m.content):
                out.append(Result(m.tool_call_id, i, _pieces(m.content, _chat_piece), later(i)))
        elif dialect is Dialect.MESSAGES and isinstance(m, an.Message) and isinstance(m.content, list):
            for b in m.content:
                if isinstance(b, an.ToolResult) and wanted(b.tool_use_id, b.content):
                    out.append(Result(b.tool_use_id, i, _pieces(b.content, _anthropic_piece), later(i)))
    return out


def refs(dialect: Dialect, items: list[Any], start: int = 0) -> list[tuple[str, int, bool]]:
    """(call id, item index, whether it has media) of each tool result in ``items[start:]`` that :func:`results`
    lists, in the same order, without building its pieces (cheap: no Piece per text result)."""
    out: list[tuple[str, int, bool]] = []
    for i in range(start, len(items)):
        m = items[i]
        if dialect is Dialect.RESPONSES and isinstance(m, rs.ToolOutput) and m.call_id:
            out.append((m.call_id, i, _any_media(m.output, rs.TEXT_PARTS)))
        elif dialect is Dialect.CHAT and isinstance(m, ch.Message) and m.role == "tool" and m.tool_call_id:
            out.append((m.tool_call_id, i, _any_media(m.content, ch.TextPart)))
        elif dialect is Dialect.MESSAGES and isinstance(m, an.Message) and isinstance(m.content, list):
            out += [(b.tool_use_id, i, _any_media(b.content, an.TextBlock)) for b in m.content
                    if isinstance(b, an.ToolResult)]
    return out


def _any_media(content: Any, text: Any) -> bool:
    """Whether :func:`_pieces` of ``content`` would hold a media piece (any part that is not text)."""
    return isinstance(content, list) and any(not isinstance(p, text) for p in content)


def native(piece: Piece, dialect: Dialect) -> Any | None:
    """``piece`` as a part of ``dialect``; None when it cannot be carried there."""
    if piece.dialect is dialect and piece.raw is not None:
        return piece.raw
    if piece.kind == "text":
        if dialect is Dialect.RESPONSES:
            return rs.InputText(type="input_text", text=piece.text or "")
        if dialect is Dialect.CHAT:
            return ch.TextPart(type="text", text=piece.text or "")
        return an.TextBlock(type="text", text=piece.text or "")
    if piece.kind != "image" or not piece.url:
        return None
    if dialect is Dialect.RESPONSES:
        return rs.InputImage(type="input_image", image_url=piece.url, detail=piece.detail or "auto")
    if dialect is Dialect.CHAT:
        image_url = ch.ImageUrl(url=piece.url, detail=piece.detail) if piece.detail in ("auto", "low", "high") \
            else ch.ImageUrl(url=piece.url)
        return ch.ImagePart(type="image_url", image_url=image_url)
    if piece.url.startswith("data:"):
        header, _, data = piece.url.partition(",")
        media_type = header[5:].split(";", 1)[0] or "image/png"
        return an.ImageBlock(type="image", source={"type": "base64", "media_type": media_type, "data": data})
    return an.ImageBlock(type="image", source={"type": "url", "url": piece.url})
