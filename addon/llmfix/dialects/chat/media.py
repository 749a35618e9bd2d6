"""Chat Completions parts as neutral pieces and back: ``text``, ``image_url`` (a data or http URL, with its
``detail``), ``file`` and ``input_audio``."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from llmfix.dialects.base import Piece
from llmfix.dialects.chat import wire as ch

TEXT = (ch.TextPart,)
MEDIA = ch.MEDIA_PARTS
IMAGES = (b"image_url",)
MEDIA_NEEDLES = (b"image_url", b'"file"', b"input_audio")
TOOL_MEDIA_FLAG = "chat_tool_media"
RESULT_TEXT_ONLY = False
TOOL_TEXT_FLAG: str | None = "chat_tool_text_array"
_PART: TypeAdapter[Any] = TypeAdapter(ch.Part)


def piece(p: Any) -> Piece:
    if isinstance(p, ch.TextPart):
        return Piece("text", text=p.text)
    if isinstance(p, ch.ImagePart):
        return Piece("image", url=p.image_url.url, detail=p.image_url.detail, raw=p)
    return Piece(getattr(p, "type", None) or "part", raw=p)


def native(piece: Piece) -> Any | None:
    if piece.kind == "text":
        return ch.TextPart(type="text", text=piece.text or "")
    if piece.kind != "image" or not piece.url:
        return None
    image_url = ch.ImageUrl(url=piece.url, detail=piece.detail) if piece.detail in ("auto", "low", "high") \
        else ch.ImageUrl(url=piece.url)
    return ch.ImagePart(type="image_url", image_url=image_url)


def text_part(text: str) -> Any:
    return ch.TextPart(type="text", text=text)


def user_message(content: str | list[Any]) -> Any:
    return ch.Message(role="user", content=content)


def part(raw: Any) -> Any:
    return _PART.validate_python(raw)
