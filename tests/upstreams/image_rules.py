"""What the real upstreams refuse in inline images: each one is decoded (Pillow, PNG/JPEG/GIF/WebP only, as the
upstreams take) and measured as the upstream measures it. Texts: reference/session-killers.md §4 (SK).

- Anthropic (``anthropic``, and ``spec`` on ``/messages``): every base64 ``image`` block, in user content and in
  ``tool_result`` content, in document order; the many-image rule counts every image block of the request (those
  by URL too), as Anthropic does:
  ``….image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'``
  (anthropics/claude-code #8184), ``….image.source.base64: image exceeds 5 MB maximum: N bytes > 5242880 bytes``
  (N: the base64 text's length; SK §4), ``Could not process image`` (SK §4), ``….image.source.base64.data: Image
  does not match the provided media type image/png`` (anthropics/claude-code #6300, #13131), ``….data: At least
  one of the image dimensions exceed max allowed size: 8000 pixels``, ``… for many-image requests: 2000 pixels``
  past 20 images (SK §4). The position of an image inside a ``tool_result`` (``messages.N.content.M.content.K``)
  is an inference: only top-level positions were reported.
- OpenAI Responses (``openai``, ``spec``): an ``input_image`` data URL that is not a PNG/JPEG/GIF/WebP image (Codex's
  ``view_image`` of an SVG, SK §4 [3]) → ``The image data you provided does not represent a valid image. Please
  check your input and try again with one of the supported image formats: ['image/jpeg', 'image/png',
  'image/gif', 'image/webp'].`` (``param:"input"``, ``code:"invalid_value"``); an animated GIF gets the same
  (inference: OpenAI takes "non-animated GIF" only, its text for one is not known). A tool output's
  ``image_url`` over 20971520 characters (the spec's maxLength, WF §1.3) → the ``string too long`` text OpenAI
  gives for every maxLength (inference from its texts for ids).
- OpenAI Chat: ``You uploaded an unsupported image. Please make sure your image has of one the following formats:
  ['png', 'jpeg', 'gif', 'webp'].`` (``code:"invalid_image_format"``, SK §4); over 20 MB decoded, the older
  ``… below 20 MB in size …`` text (``code:"sanitizer_server_error"``).
- xAI (both dialects): anything but JPEG/PNG → ``Invalid request content: Downloaded response does not contain a
  valid JPG or PNG image.`` (as a client's issue quotes it; its status, 400, is an inference). Its size limit is
  UNCERTAIN (10 or 20 MiB) and its text unknown: not checked.

Images by http(s) URL or file id are not fetched: a mock cannot see them.
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from PIL import Image

from tests.upstreams.access import as_dict, as_list, type_of
from tests.upstreams.errors import Rejection, anthropic_error, openai_error, xai_error

ANTHROPIC_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
ANTHROPIC_MAX_BASE64 = 5_242_880
ANTHROPIC_MAX_SIDE = 8000
ANTHROPIC_MANY = 20
ANTHROPIC_MANY_SIDE = 2000
OPENAI_URL_MAX = 20_971_520
OPENAI_CHAT_MAX_BYTES = 20 * 1024 * 1024
RESPONSES_INVALID = ("The image data you provided does not represent a valid image. Please check your input and try "
                     "again with one of the supported image formats: ['image/jpeg', 'image/png', 'image/gif', "
                     "'image/webp'].")
CHAT_UNSUPPORTED = ("You uploaded an unsupported image. Please make sure your image has of one the following "
                    "formats: ['png', 'jpeg', 'gif', 'webp'].")
CHAT_TOO_LARGE = ("You uploaded an unsupported image. Please make sure your image is below 20 MB in size and is of one "
                  "the following formats: ['png', 'jpeg', 'gif', 'webp'].")
XAI_INVALID = "Invalid request content: Downloaded response does not contain a valid JPG or PNG image."
_FORMATS = {"PNG": "png", "JPEG": "jpeg", "GIF": "gif", "WEBP": "webp"}


@dataclass(frozen=True)
class Decoded:
    format: str  # png, jpeg, gif, webp
    width: int
    height: int
    frames: int
    nbytes: int


def decode(data: bytes) -> Decoded | None:
    """The image, fully decoded as an upstream decodes it; None when it is not a PNG/JPEG/GIF/WebP image."""
    try:
        with Image.open(io.BytesIO(data), formats=tuple(_FORMATS)) as im:
            fmt, size, frames = _FORMATS[im.format or ""], im.size, int(getattr(im, "n_frames", 1) or 1)
            im.load()
    except Exception:  # whatever Pillow raises for bytes that are no image
        return None
    return Decoded(fmt, size[0], size[1], frames, len(data))


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        return None


def _data_url(url: Any) -> tuple[str, bytes | None] | None:
    """(declared type, bytes) of a data URL; None for any other URL."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    meta, _, payload = url[5:].partition(",")
    params = meta.split(";")
    if "base64" in params[1:]:
        return params[0], _b64(payload)
    from urllib.parse import unquote_to_bytes

    return params[0], unquote_to_bytes(payload)


# -------------------------------------------------------------------------------------------------- Anthropic


def _anthropic_images(messages: list[Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for i, message in enumerate(messages):
        for k, block in enumerate(as_list(as_dict(message).get("content"))):
            if type_of(block) == "image":
                yield f"messages.{i}.content.{k}", as_dict(block)
            elif type_of(block) == "tool_result":
                for j, inner in enumerate(as_list(as_dict(block).get("content"))):
                    if type_of(inner) == "image":
                        yield f"messages.{i}.content.{k}.content.{j}", as_dict(inner)


def check_anthropic(body: dict[str, Any]) -> Rejection | None:
    found = list(_anthropic_images(as_list(body.get("messages"))))
    side = ANTHROPIC_MANY_SIDE if len(found) > ANTHROPIC_MANY else ANTHROPIC_MAX_SIDE
    many = " for many-image requests" if len(found) > ANTHROPIC_MANY else ""
    for loc, block in found:
        source = as_dict(block.get("source"))
        if source.get("type") != "base64":
            continue
        media_type, data = source.get("media_type"), source.get("data")
        if media_type not in ANTHROPIC_TYPES:
            return anthropic_error(f"{loc}.image.source.base64.media_type: Input should be 'image/jpeg', "
                                   "'image/png', 'image/gif' or 'image/webp'", reason="image-media-type-invalid")
        if not isinstance(data, str):
            return anthropic_error(f"{loc}.image.source.base64.data: Input should be a valid string",
                                   reason="image-data-not-string")
        if len(data) > ANTHROPIC_MAX_BASE64:
            return anthropic_error(f"{loc}.image.source.base64: image exceeds 5 MB maximum: {len(data)} bytes > "
                                   f"{ANTHROPIC_MAX_BASE64} bytes", reason="image-too-large")
        raw = _b64(data)
        image = decode(raw) if raw is not None else None
        if image is None:
            return anthropic_error("Could not process image", reason="image-undecodable")
        if f"image/{image.format}" != media_type:
            return anthropic_error(f"{loc}.image.source.base64.data: Image does not match the provided media type "
                                   f"{media_type}", reason="image-media-type-mismatch")
        if max(image.width, image.height) > side:
            return anthropic_error(f"{loc}.image.source.base64.data: At least one of the image dimensions exceed max "
                                   f"allowed size{many}: {side} pixels",
                                   reason="image-too-many-pixels-many" if many else "image-too-many-pixels")
    return None


# ------------------------------------------------------------------------------------------------------ OpenAI


def _responses_images(items: list[Any]) -> Iterator[tuple[str, bool, dict[str, Any]]]:
    """(location, in a tool output, part) of every input_image."""
    for i, item in enumerate(items):
        d = as_dict(item)
        in_output = str(d.get("type", "")).endswith("_call_output")
        for k, part in enumerate(as_list(d.get("output") if in_output else d.get("content"))):
            if type_of(part) == "input_image":
                yield f"input[{i}].{'output' if in_output else 'content'}[{k}]", in_output, as_dict(part)


def check_openai_responses(body: dict[str, Any]) -> Rejection | None:
    for loc, in_output, part in _responses_images(as_list(body.get("input"))):
        url = part.get("image_url")
        if in_output and isinstance(url, str) and len(url) > OPENAI_URL_MAX:
            return openai_error(
                f"Invalid '{loc}.image_url': string too long. Expected a string with maximum length {OPENAI_URL_MAX},"
                f" but got a string with length {len(url)} instead.", reason="image-url-too-long",
                param=f"{loc}.image_url", code="string_above_max_length")
        inline = _data_url(url)
        if inline is None:
            continue
        image = decode(inline[1]) if inline[1] is not None else None
        if image is None or (image.format == "gif" and image.frames > 1):
            return openai_error(RESPONSES_INVALID, reason="image-invalid", param="input", code="invalid_value")
    return None


def check_openai_chat(body: dict[str, Any]) -> Rejection | None:
    for message in as_list(body.get("messages")):
        for part in as_list(as_dict(message).get("content")):
            if type_of(part) != "image_url":
                continue
            inline = _data_url(as_dict(as_dict(part).get("image_url")).get("url"))
            if inline is None:
                continue
            raw = inline[1]
            if raw is not None and len(raw) > OPENAI_CHAT_MAX_BYTES:
                return openai_error(CHAT_TOO_LARGE, reason="image-too-large", code="sanitizer_server_error")
            image = decode(raw) if raw is not None else None
            if image is None or (image.format == "gif" and image.frames > 1):
                return openai_error(CHAT_UNSUPPORTED, reason="image-invalid", code="invalid_image_format")
    return None


# --------------------------------------------------------------------------------------------------------- xAI


def check_xai(dialect: str, body: dict[str, Any]) -> Rejection | None:
    if dialect == "responses":
        urls = [p.get("image_url") for _, _, p in _responses_images(as_list(body.get("input")))]
    else:
        urls = [as_dict(as_dict(p).get("image_url")).get("url") for m in as_list(body.get("messages"))
                for p in as_list(as_dict(m).get("content")) if type_of(p) == "image_url"]
    for url in urls:
        inline = _data_url(url)
        if inline is None:
            continue
        image = decode(inline[1]) if inline[1] is not None else None
        if image is None or image.format not in ("jpeg", "png"):
            return xai_error(XAI_INVALID, reason="image-not-jpg-or-png", status=400)
    return None
