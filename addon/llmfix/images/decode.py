"""Reading any image llmfix reads: its format from its first bytes, then a raster's header (:mod:`.raster`, whose
docstring says the bounds every decode is held to) or an SVG's document (:mod:`.svg`), then, only when asked, a
raster's pixels (:func:`load`)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from PIL import Image

from llmfix.images import raster, svg
from llmfix.images.raster import MAX_PIXELS, Undecodable, check_bounds, short
from llmfix.images.shape import Refused, Shape

__all__ = ["MAX_PIXELS", "Decoded", "Undecodable", "check_bounds", "load", "open_image", "payload", "short", "sniff"]


def payload(text: str, is_base64: bool = True) -> bytes:
    """The bytes of an inline image's payload (base64, or a data URL's percent-encoded text)."""
    if not is_base64:
        from urllib.parse import unquote_to_bytes

        return unquote_to_bytes(text)
    try:
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError) as e:
        raise Undecodable(f"its base64 is invalid ({e})") from None


def sniff(raw: bytes) -> str | None:
    """The format the bytes are, from their first bytes; None when they are none llmfix reads."""
    return raster.sniff(raw) or ("svg" if svg.looks_like(raw) else None)


@dataclass(slots=True)
class Decoded:
    """An opened image: its shape, and a raster not yet loaded (or the parsed SVG to rasterize)."""

    shape: Shape
    raster: Any = None  # a PIL image, header read, pixels not decoded
    vector: svg.Svg | None = None


def open_image(raw: bytes, b64_length: int) -> Decoded:
    """Open ``raw``: format, size and frames from the header alone. Raises :class:`Undecodable` for what is not an
    image llmfix reads, :class:`Refused` for one over the bounds."""
    fmt = sniff(raw)
    if fmt is None:
        raise Undecodable("its bytes are not a PNG, JPEG, GIF, WebP, BMP, TIFF or SVG image")
    if fmt == "svg":
        vector = svg.parse(raw)
        return Decoded(Shape("svg", vector.width, vector.height, len(raw), b64_length), vector=vector)
    shape, im = raster.open_raster(raw, fmt, b64_length)
    return Decoded(shape, raster=im)


def load(decoded: Decoded, draft: tuple[int, int] | None = None) -> Any:
    """The image's first frame, decoded (the pixels are checked here: a corrupt or truncated file raises
    :class:`Undecodable`; a frame over :data:`MAX_PIXELS` as it would be decoded, :class:`Refused`). ``draft``: a
    JPEG may be decoded straight at a smaller scale, at least this size."""
    im = decoded.raster
    if decoded.vector is not None:
        raise TypeError("an SVG is rasterized, not loaded")
    try:
        if draft is not None and im.format == "JPEG":
            im.draft(im.mode if im.mode in ("RGB", "L", "CMYK") else "RGB", draft)  # sets the scale it decodes at
        check_bounds(*im.size)  # at the size it decodes at
        im.seek(0)
        im.load()
    except Refused:
        raise
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError) as e:
        raise Undecodable(f"its {decoded.shape.format.upper()} data cannot be decoded ({short(e)})") from None
    return im
