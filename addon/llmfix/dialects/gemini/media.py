"""Gemini parts as neutral pieces and back: ``text``, and ``inlineData`` (base64 bytes with a MIME type) or
``fileData`` (a URI) for images and other media."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from llmfix.dialects.base import Media, Piece
from llmfix.dialects.gemini import wire as gw


def _piece(p: Any) -> Piece:
    if isinstance(p, gw.TextPart):
        return Piece("text", text=p.text)
    if isinstance(p, gw.MediaPart) and p.kind() == "image":
        blob = gw.member(p, "inlineData")
        if blob is not None:
            mime = gw.member(blob, "mimeType") or "image/png"
            return Piece("image", url=f"data:{mime};base64,{gw.member(blob, 'data') or ''}", raw=p)
        return Piece("image", url=gw.member(gw.member(p, "fileData"), "fileUri"), raw=p)
    return Piece(p.kind() if isinstance(p, gw.MediaPart) else "part", raw=p)


def _image(url: str, detail: str | None) -> Any:
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        mime = header[5:].split(";", 1)[0] or "image/png"
        return gw.MediaPart.model_validate({"inlineData": {"mimeType": mime, "data": data}})
    return gw.MediaPart.model_validate({"fileData": {"mimeType": "image/*", "fileUri": url}})


MEDIA = Media(images=(b"inlineData", b"inline_data", b"fileData", b"file_data"),
              needles=(b"inlineData", b"inline_data", b"fileData", b"file_data"),
              tool_media_flag="gemini_tool_result_media",
              part=TypeAdapter(gw.Part), piece=_piece, image=_image,
              text_part=lambda text: gw.TextPart(text=text),
              user_message=lambda content: gw.Content(role="user", parts=[gw.TextPart(text=content)]
                                                      if isinstance(content, str) else content))
