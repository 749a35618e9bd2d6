"""Making an image fit: downscaled keeping its aspect ratio, re-encoded to meet a byte limit with as much quality as
the limits allow, converted from a format the upstream refuses (an SVG rasterized, an animated GIF's first frame).

Quality order, from best: the image's own pixels re-encoded losslessly (PNG) unless it was a JPEG; then JPEG at
quality 92 (4:4:4, so text stays sharp), 85, 75, 65, 50; then the same at a smaller size, each step sized from how
far the last one was over. The pixels are first made what a viewer shows (:mod:`llmfix.images.appearance`: turned
upright as its EXIF orientation says, converted to sRGB from its ICC profile), since no metadata is written (no
EXIF or text chunks; an ICC profile only where it could not be applied). Every step is a pure function of the
image and the limits, with fixed encoder settings, so the same image always gives the very same bytes.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import replace
from typing import Any

from PIL import Image

from llmfix.images import appearance, decode, svg
from llmfix.images.decode import Decoded
from llmfix.images.shape import Fits, Fitted, Limits, Result, Shape, base64_length, offences

JPEG_QUALITIES = (92, 85, 75, 65, 50)
MIN_SIDE = 16
"""An image is never made smaller than this many pixels on its long side: then it cannot be made to fit."""
MAX_ROUNDS = 10
_RESAMPLE = Image.Resampling.LANCZOS


class CannotFit(ValueError):
    """No encoding within the limits exists (or none of the formats the upstream takes can be written)."""


def fit_decoded(decoded: Decoded, declared: str | None, limits: Limits) -> Result:
    """The answer for one opened image: it fits (its pixels decode), or the image made to fit."""
    shape = decoded.shape
    why = offences(shape, declared, limits)
    if not why:
        if decoded.vector is None and limits.undecodable_refused:
            decode.load(decoded)  # a truncated or corrupt image is refused by the upstream: found here
        return Fits(shape)
    if _only_mislabelled(shape, limits):
        if decoded.vector is None and limits.undecodable_refused:
            decode.load(decoded)
        return Fitted(shape, shape, shape.mime, None, why, (f"declared as {shape.mime} (the same bytes)",))
    how: list[str] = []
    target = _target(shape, limits)
    image, turned, icc = _source(decoded, target, how)
    if turned:  # fitted as it is shown: its sides swapped
        shape, target = replace(shape, width=shape.height, height=shape.width), (target[1], target[0])
    data, fmt, size = _encode_to_fit(image, shape, target, limits, how, icc)
    after = Shape(fmt, size[0], size[1], len(data), base64_length(len(data)))
    return Fitted(decoded.shape, after, after.mime, base64.b64encode(data).decode("ascii"), why, tuple(how))


def _only_mislabelled(shape: Shape, limits: Limits) -> bool:
    """Whether the one thing wrong is the declared type (the format, size and pixels are all taken)."""
    return not offences(shape, None, replace(limits, exact_type=False))


def _target(shape: Shape, limits: Limits) -> tuple[int, int]:
    """The image's size scaled down (never up) to the pixel limit, aspect ratio kept (the long side exactly at it)."""
    cap = min(c for c in (limits.max_side, svg.RASTER_SIDE if shape.format == "svg" else None, shape.side) if c)
    return _scaled(shape.width, shape.height, cap)


def _scaled(width: int, height: int, long_side: int) -> tuple[int, int]:
    if max(width, height) <= long_side:
        return width, height
    s = long_side / max(width, height)
    return (long_side, max(1, round(height * s))) if width >= height else (max(1, round(width * s)), long_side)


def _source(decoded: Decoded, target: tuple[int, int], how: list[str]) -> tuple[Any, bool, bytes | None]:
    """The image's pixels as a viewer shows them, in a working mode (RGB, RGBA or L): an SVG rasterized at the
    target size, a raster's first frame (a JPEG decoded straight at a smaller scale when the target allows) turned
    upright and in sRGB; whether turning it swapped its sides; the ICC profile to keep (None: applied, or none)."""
    shape = decoded.shape
    if decoded.vector is not None:
        how.append("rasterized")
        return svg.rasterize(decoded.vector, *target), False, None
    im = decode.load(decoded, draft=target if target != (shape.width, shape.height) else None)
    if shape.frames > 1:
        how.append(f"first frame of {shape.frames}")
    im, turned = appearance.upright(im, how)
    im, icc = appearance.in_srgb(im, how)
    return _working(im), turned, icc


def _working(im: Any) -> Any:
    if im.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        im = im.convert("I").point(lambda v: v * (1 / 256)).convert("L")
    alpha = im.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in im.info
    gray = im.mode in ("1", "L", "LA", "La")
    mode = "RGBA" if alpha else "L" if gray else "RGB"
    return im if im.mode == mode else im.convert(mode)


def _resized(im: Any, size: tuple[int, int]) -> Any:
    if im.size == size:
        return im
    if im.mode == "RGBA":  # premultiplied, so that transparent pixels do not bleed their color into the edges
        return im.convert("RGBa").resize(size, _RESAMPLE, reducing_gap=3.0).convert("RGBA")
    return im.resize(size, _RESAMPLE, reducing_gap=3.0)


def _encode_to_fit(image: Any, shape: Shape, target: tuple[int, int], limits: Limits, how: list[str],
                   icc: bytes | None = None) -> tuple[bytes, str, tuple[int, int]]:
    lossless = "png" if limits.takes("png") else None
    lossy = "jpeg" if limits.takes("jpeg") else "webp" if limits.takes("webp") else None
    if lossless is None and lossy is None:
        raise CannotFit("the upstream takes none of the formats llmfix writes (PNG, JPEG, WebP)")
    if shape.format == "jpeg" and lossy is not None:
        lossless = None  # a photo as PNG only grows
    budget = limits.budget
    # bytes per pixel a PNG of these pixels is expected to take: the source's own, when it is a PNG
    png_bpp = shape.nbytes / (shape.width * shape.height) if shape.format == "png" else None
    size = target
    for _ in range(MAX_ROUNDS):
        frame = _resized(image, size)
        pixels = size[0] * size[1]
        smallest = None
        if lossless and (budget is None or png_bpp is None or png_bpp * pixels <= budget):
            data = _png(frame, icc)
            if _within(data, limits):
                _describe(how, shape, size, "PNG")
                return data, "png", size
            png_bpp = len(data) / pixels
            smallest = len(data)
        if lossy:
            for q in JPEG_QUALITIES:
                data = _lossy(frame, lossy, q, icc)
                if _within(data, limits):
                    _describe(how, shape, size, f"{lossy.upper()} quality {q}")
                    if frame.mode == "RGBA" and lossy == "jpeg":
                        how.append("transparency flattened on white")
                    return data, lossy, size
                smallest = len(data)
        if budget is None or smallest is None:
            break
        factor = min(0.9, max(0.5, math.sqrt(budget / smallest) * 0.95))
        long_side = math.floor(max(size) * factor)
        if long_side < MIN_SIDE:
            break
        size = _scaled(shape.width, shape.height, long_side)
    raise CannotFit(f"no encoding of it at {MIN_SIDE} px or more is within the size limit")


def _within(data: bytes, limits: Limits) -> bool:
    if limits.max_bytes is not None and len(data) > limits.max_bytes:
        return False
    return limits.max_base64 is None or base64_length(len(data)) <= limits.max_base64


def _describe(how: list[str], shape: Shape, size: tuple[int, int], encoding: str) -> None:
    if size != (shape.width, shape.height):
        how.append(f"downscaled to {size[0]}×{size[1]}")
    how.append(f"encoded as {encoding}")


def _png(im: Any, icc: bytes | None = None) -> bytes:
    buf = io.BytesIO()
    clean = im.copy()
    clean.info = {}
    clean.save(buf, "PNG", optimize=False, compress_level=6, **({"icc_profile": icc} if icc else {}))
    return buf.getvalue()


def _lossy(im: Any, fmt: str, quality: int, icc: bytes | None = None) -> bytes:
    if fmt == "jpeg" and im.mode == "RGBA":
        flat = Image.new("RGB", im.size, (255, 255, 255))
        flat.paste(im, mask=im.getchannel("A"))
        im = flat
    else:
        im = im.copy()
    im.info = {}
    buf = io.BytesIO()
    if fmt == "jpeg":
        # optimize=True would need libjpeg to hold the whole output in a buffer Pillow sizes at one byte a pixel:
        # a noisy image at quality 92 is larger and fails ("Suspension not allowed here")
        im.save(buf, "JPEG", quality=quality, optimize=False, progressive=False, subsampling=0 if quality >= 90 else 2,
                **({"icc_profile": icc} if icc else {}))
    else:
        im.save(buf, "WEBP", quality=quality, method=4, lossless=False, **({"icc_profile": icc} if icc else {}))
    return buf.getvalue()


