"""Raster images within hard bounds: their format from their first bytes, their header, then (only when asked)
their pixels. What :mod:`.decode` and :mod:`.svg` (for a raster embedded in an SVG) both read.

Bound, checked before a single pixel is decoded, on the frame as it would really be decoded (a JPEG at the
reduced scale its target size allows): at most :data:`MAX_PIXELS` pixels (a 60 KB PNG can declare 40000×40000
pixels: 6 GB once decoded). Its sides are not bounded: a 41000×8 strip is 0.3 megapixels. Over the bound an
image is :class:`~llmfix.images.shape.Refused`: never decoded, left as it is, with a warning. Only Pillow's
plugins for the formats below are ever used (``Image.open(formats=…)``): never the ones that run external
programs (EPS runs Ghostscript) or read exotic containers.
"""

from __future__ import annotations

import io
import re
from typing import Any

from PIL import Image, UnidentifiedImageError

from llmfix.images.shape import Refused, Shape

MAX_PIXELS = 80_000_000
"""Pixels llmfix decodes at most in one image, whatever its shape: at most 320 MB (Pillow stores a pixel in 4
bytes at most), below Pillow's own bomb warning (89 MP). The largest image Anthropic takes, 8000×8000, is 64 MP.
A larger JPEG is decoded at a reduced scale when its target allows (a 108 MP photo for a 2000 px limit: 6.8 MP)."""
DECODERS = ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF")
_FORMAT = {"PNG": "png", "JPEG": "jpeg", "GIF": "gif", "WEBP": "webp", "BMP": "bmp", "TIFF": "tiff"}


class Undecodable(ValueError):
    """The bytes are not an image llmfix can read; the message says why, in a few words."""


def sniff(raw: bytes) -> str | None:
    """The raster format the bytes are, from their first bytes; None when they are none llmfix reads."""
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if raw.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if raw[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "webp"
    if raw.startswith(b"BM") and len(raw) > 26:
        return "bmp"
    if raw[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    return None


def open_raster(raw: bytes, fmt: str, b64_length: int) -> tuple[Shape, Any]:
    """The shape of the raster ``raw`` (of format ``fmt``, as :func:`sniff` read it) and its image, header read,
    pixels not decoded. Raises :class:`Undecodable` or :class:`Refused`."""
    try:
        im = Image.open(io.BytesIO(raw), formats=DECODERS)
    except Image.DecompressionBombError as e:
        raise Refused(f"image over llmfix's decoding bound ({e})") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as e:
        raise Undecodable(f"its {fmt.upper()} header cannot be read ({short(e)})") from None
    width, height = im.size
    if width <= 0 or height <= 0:
        raise Undecodable(f"it has no pixels ({width}×{height})")
    return Shape(_FORMAT.get(im.format or "", fmt), width, height, len(raw), b64_length, _frames(im)), im


def check_bounds(width: int, height: int) -> None:
    """Raises :class:`Refused` when decoding ``width``×``height`` pixels is over llmfix's bound."""
    if width * height > MAX_PIXELS:
        raise Refused(f"image of {width}×{height} px ({width * height / 1e6:.1f} megapixels decoded) is over "
                      f"llmfix's decoding bound of {MAX_PIXELS // 1_000_000} megapixels: not decoded")


def _frames(im: Any) -> int:
    try:
        return int(getattr(im, "n_frames", 1) or 1)
    except (OSError, ValueError, EOFError):
        return 1


_ADDRESS = re.compile(r"\s*<[^<>]* at 0x[0-9a-fA-F]+>|\s*\b0x[0-9a-fA-F]{6,}\b")


def short(e: BaseException) -> str:
    """An error's text for a placeholder: deterministic (no object addresses: the text goes into the request, whose
    bytes must be the same on every turn) and short."""
    text = _ADDRESS.sub("", str(e)).strip() or type(e).__name__
    return text if len(text) <= 120 else text[:117] + "…"
