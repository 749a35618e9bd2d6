"""Anthropic Messages blocks as neutral pieces and back: ``text``, ``image`` (a base64 or URL source) and
``document``."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from llmfix.dialects.base import Media, Piece
from llmfix.dialects.messages import wire as an


def _piece(b: Any) -> Piece:
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


def _image(url: str, detail: str | None) -> Any:
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        media_type = header[5:].split(";", 1)[0] or "image/png"
        return an.ImageBlock(type="image", source={"type": "base64", "media_type": media_type, "data": data})
    return an.ImageBlock(type="image", source={"type": "url", "url": url})


MEDIA = Media(images=(b'"image"',), needles=(b'"image"', b'"document"'),
              tool_media_flag="anthropic_tool_result_media",
              part=TypeAdapter(an.InnerBlock), piece=_piece, image=_image,
              text_part=lambda text: an.TextBlock(type="text", text=text),
              user_message=lambda content: an.Message(role="user", content=content))
