"""Recognise a tool-result text that is really media a client serialized: exactly, or not at all.

Two shapes are recognised, each only as the WHOLE text (nothing before or after it):

- a JSON array of content parts, at least one of them an image, every one of them one of these exact
  shapes (the keys listed and no others, each of the right type):

  ===================  =====================================================================================
  AI SDK (opencode)    ``{"type":"text","text"}``, ``{"type":"image-data","data","mediaType"}``,
                       ``{"type":"media","data","mediaType"}``, ``{"type":"file-data","data","mediaType"
                       [,"filename"]}``, ``{"type":"file","data","mediaType"[,"filename"]}`` (``providerOptions``
                       allowed on each); the ``media``/``file`` shapes only with an ``image/…`` mediaType
  OpenAI Chat          ``{"type":"text","text"}``, ``{"type":"image_url","image_url":{"url"[,"detail"]}}``
  OpenAI Responses     ``{"type":"input_text","text"}``, ``{"type":"input_image","image_url"[,"detail"]}``
  Anthropic            ``{"type":"text","text"}``, ``{"type":"image","source":{"type":"base64","media_type",
                       "data"}}``
  ===================  =====================================================================================

- one data URL, ``data:image/<subtype>;base64,<payload>``.

Every image payload must be well-formed base64 (padded, standard alphabet) of an ``image/…`` type, and a
URL must be such a data URL; anything else (an http URL, a PDF, an unknown part type, an extra key, a
stray character) and the text is not recognised, so it stays text. Texts that merely contain base64 — a
``.b64`` file, a JSON config with an icon, a log line — are never recognised.
"""

from __future__ import annotations

import binascii
import re
from typing import Any

import orjson

from llmfix.wire.toolresults import Piece

_MIME = re.compile(r"image/[a-z0-9][a-z0-9.+-]{0,63}")
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_DATA_URL = re.compile(r"data:(image/[a-z0-9][a-z0-9.+-]{0,63});base64,([A-Za-z0-9+/]*={0,2})")
_AI_SDK_OPTIONAL = frozenset({"providerOptions"})
_AI_SDK_MEDIA = {"image-data": False, "media": True, "file-data": True, "file": True}  # type → may carry filename
_DETAILS = frozenset({"auto", "low", "high", "original"})
_IMAGE_KEYS = ('"mediaType"', '"image_url"', '"input_image"', '"media_type"')
"""One of these is in every recognised array that holds an image."""


def _base64(data: Any) -> bool:
    if not isinstance(data, str) or not data or len(data) % 4 or not _BASE64.fullmatch(data):
        return False
    try:
        binascii.a2b_base64(data, strict_mode=True)
    except binascii.Error:
        return False
    return True


def _image(mime: Any, data: Any) -> Piece | None:
    if not isinstance(mime, str) or not _MIME.fullmatch(mime) or not _base64(data):
        return None
    return Piece("image", url=f"data:{mime};base64,{data}")


def data_url(text: Any) -> Piece | None:
    """The image of a text that is exactly one base64 ``data:image/…`` URL, else None."""
    if not isinstance(text, str) or not text.startswith("data:image/"):
        return None
    m = _DATA_URL.fullmatch(text)
    return _image(m.group(1), m.group(2)) if m else None


def _keys(part: dict[str, Any], required: set[str], optional: frozenset[str] = frozenset()) -> bool:
    keys = set(part)
    return required <= keys and keys <= required | optional


def _part(part: Any) -> Piece | None:
    """One serialized part as a :class:`Piece`, or None when it is not exactly a recognised shape."""
    if not isinstance(part, dict):
        return None
    t = part.get("type")
    if t in ("text", "input_text"):
        ok = _keys(part, {"type", "text"}, _AI_SDK_OPTIONAL if t == "text" else frozenset())
        return Piece("text", text=part["text"]) if ok and isinstance(part["text"], str) else None
    if t in _AI_SDK_MEDIA:
        optional = _AI_SDK_OPTIONAL | ({"filename"} if _AI_SDK_MEDIA[t] else set())
        if not _keys(part, {"type", "data", "mediaType"}, frozenset(optional)):
            return None
        if "filename" in part and not isinstance(part["filename"], str):
            return None
        return _image(part["mediaType"], part["data"])
    if t == "image_url":
        inner = part.get("image_url")
        if not _keys(part, {"type", "image_url"}) or not isinstance(inner, dict):
            return None
        if not _keys(inner, {"url"}, frozenset({"detail"})):
            return None
        return _with_detail(data_url(inner["url"]), inner.get("detail"), "detail" in inner)
    if t == "input_image":
        if not _keys(part, {"type", "image_url"}, frozenset({"detail"})):
            return None
        return _with_detail(data_url(part["image_url"]), part.get("detail"), "detail" in part)
    if t == "image":
        src = part.get("source")
        if not _keys(part, {"type", "source"}) or not isinstance(src, dict):
            return None
        if not _keys(src, {"type", "media_type", "data"}) or src["type"] != "base64":
            return None
        return _image(src["media_type"], src["data"])
    return None


def _with_detail(piece: Piece | None, detail: Any, present: bool) -> Piece | None:
    if piece is None or not present:
        return piece
    if not isinstance(detail, str) or detail not in _DETAILS:
        return None
    return Piece("image", url=piece.url, detail=detail)


def part_array(text: Any) -> tuple[Piece, ...] | None:
    """The parts of a text that is exactly a JSON array of recognised parts with at least one image, else None."""
    if not isinstance(text, str) or not (text.startswith("[{") and text.endswith("}]")):
        return None
    if not any(marker in text for marker in _IMAGE_KEYS):  # a tool's JSON list output: not worth parsing
        return None
    try:
        parts = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parts, list):
        return None
    pieces: list[Piece] = []
    for part in parts:
        piece = _part(part)
        if piece is None:
            return None
        pieces.append(piece)
    return tuple(pieces) if any(p.kind == "image" for p in pieces) else None


def recognise(text: Any) -> tuple[Piece, ...] | None:
    """What a whole tool-result text really holds (text and image pieces, in order), or None: leave it as text."""
    if not isinstance(text, str):
        return None
    if text.startswith("data:"):
        image = data_url(text)
        return (image,) if image is not None else None
    return part_array(text)
