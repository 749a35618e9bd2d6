"""Anthropic Messages blocks as neutral pieces and back: ``text``, ``image`` (a base64 or URL source) and
``document``."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from llmfix.dialects.base import Piece
from llmfix.dialects.messages import wire as an

TEXT = (an.TextBlock,)
MEDIA = (an.ImageBlock,)
IMAGES = (b'"image"',)
MEDIA_NEEDLES = (b'"image"', b'"document"')
TOOL_MEDIA_FLAG = "anthropic_tool_result_media"
RESULT_TEXT_ONLY = False
TOOL_TEXT_FLAG: str | None = None
_PART: TypeAdapter[Any] = TypeAdapter(an.InnerBlock)


def piece(b: Any) -> Piece:
    if isinstance(b, an.TextBlock):
        return Piece("text", text=b.text)
    if isinstance(b, an.ImageBlock) and b.type == "image":
        src = b.source
        url = None
        if src.get("type") == "base64":
            url = f"data:{src.get('media_type', 'image/png')};base64,{src.get('data', '')}"
        elif src.get("type") == "url":
            url = src.get("url")
        return Piece("image", url=url, raw=b)
    return Piece(getattr(b, "type", None) or "part", raw=b)


def native(piece: Piece) -> Any | None:
    if piece.kind == "text":
        return an.TextBlock(type="text", text=piece.text or "")
    if piece.kind != "image" or not piece.url:
        return None
    if piece.url.startswith("data:"):
        header, _, data = piece.url.partition(",")
        media_type = header[5:].split(";", 1)[0] or "image/png"
        return an.ImageBlock(type="image", source={"type": "base64", "media_type": media_type, "data": data})
    return an.ImageBlock(type="image", source={"type": "url", "url": piece.url})


def text_part(text: str) -> Any:
    return an.TextBlock(type="text", text=text)


def user_message(content: str | list[Any]) -> Any:
    return an.Message(role="user", content=content)


def part(raw: Any) -> Any:
    return _PART.validate_python(raw)
