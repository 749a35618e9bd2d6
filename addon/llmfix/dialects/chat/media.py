"""Chat Completions parts as neutral pieces and back: ``text``, ``image_url`` (a data or http URL, with its
``detail``), ``file`` and ``input_audio``."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from llmfix.dialects.base import Media, Piece
from llmfix.dialects.chat import wire as ch


def _piece(p: Any) -> Piece:
    if isinstance(p, ch.TextPart):
        return Piece("text", text=p.text)
    if isinstance(p, ch.ImagePart):
        return Piece("image", url=p.image_url.url, detail=p.image_url.detail, raw=p)
    return Piece(getattr(p, "type", None) or "part", raw=p)


def _image(url: str, detail: str | None) -> Any:
    image_url = ch.ImageUrl(url=url, detail=detail) if detail in ("auto", "low", "high") else ch.ImageUrl(url=url)
    return ch.ImagePart(type="image_url", image_url=image_url)


MEDIA = Media(images=(b"image_url",), needles=(b"image_url", b'"file"', b"input_audio"),
              tool_media_flag="chat_tool_media", tool_text_flag="chat_tool_text_array",
              part=TypeAdapter(ch.Part), piece=_piece, image=_image,
              text_part=lambda text: ch.TextPart(type="text", text=text),
              user_message=lambda content: ch.Message(role="user", content=content))
