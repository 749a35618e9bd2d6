"""Responses parts as neutral pieces and back: ``input_text`` / ``output_text``, ``input_image`` (a data or http
URL, or a ``file_id``; ``detail`` defaults to ``"auto"``) and ``input_file``."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from llmfix.dialects.base import Piece
from llmfix.dialects.responses import wire as rs

TEXT = rs.TEXT_PARTS
MEDIA = rs.MEDIA_PARTS
IMAGES = (b"input_image",)
MEDIA_NEEDLES = (b"input_image", b"input_file")
TOOL_MEDIA_FLAG = "responses_tool_output_array"
RESULT_TEXT_ONLY = True
TOOL_TEXT_FLAG: str | None = None
_PART: TypeAdapter[Any] = TypeAdapter(rs.Part)


def piece(p: Any) -> Piece:
    if isinstance(p, rs.TEXT_PARTS):
        return Piece("text", text=p.text)
    if isinstance(p, rs.InputImage):
        return Piece("image", url=p.image_url, detail=p.detail, raw=p)
    return Piece(getattr(p, "type", None) or "part", raw=p)


def native(piece: Piece) -> Any | None:
    if piece.kind == "text":
        return rs.InputText(type="input_text", text=piece.text or "")
    if piece.kind != "image" or not piece.url:
        return None
    return rs.InputImage(type="input_image", image_url=piece.url, detail=piece.detail or "auto")


def text_part(text: str) -> Any:
    return rs.InputText(type="input_text", text=text)


def user_message(content: str | list[Any]) -> Any:
    return rs.Message(type="message", role="user", content=content)


def part(raw: Any) -> Any:
    return _PART.validate_python(raw)
