"""Responses parts as neutral pieces and back: ``input_text`` / ``output_text``, ``input_image`` (a data or http
URL, or a ``file_id``; ``detail`` defaults to ``"auto"``) and ``input_file``."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from llmfix.dialects.base import Media, Piece
from llmfix.dialects.responses import wire as rs


def _piece(p: Any) -> Piece:
    if isinstance(p, rs.TEXT_PARTS):
        return Piece("text", text=p.text)
    if isinstance(p, rs.InputImage):
        return Piece("image", url=p.image_url, detail=p.detail, raw=p)
    return Piece(getattr(p, "type", None) or "part", raw=p)


def _image(url: str, detail: str | None) -> Any:
    return rs.InputImage(type="input_image", image_url=url, detail=detail or "auto")


MEDIA = Media(images=(b"input_image",), needles=(b"input_image", b"input_file"),
              tool_media_flag="responses_tool_output_array", result_text_only=True,
              part=TypeAdapter(rs.Part), piece=_piece, image=_image,
              text_part=lambda text: rs.InputText(type="input_text", text=text),
              user_message=lambda content: rs.Message(type="message", role="user", content=content))
