"""Real images for tests, made here with Pillow (never read from anywhere).

The strict mock upstreams decode every image, as the real ones do, and llmfix's fit-images puts a placeholder
where an image cannot be decoded: a test image must be a real one. These are a few dozen bytes each, distinct by
``seed`` (each gets its own pixels, so two seeds never share a hash), and the same bytes on every run.
"""

from __future__ import annotations

import base64
import io
import random
import struct
import zlib
from functools import cache
from typing import Any

from PIL import Image

MIME = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}


def _color(seed: int) -> tuple[int, int, int]:
    return (seed * 67 + 13) % 256, (seed * 151 + 101) % 256, (seed // 256 * 37 + seed * 29 + 7) % 256


@cache
def image_bytes(fmt: str = "png", seed: int = 0, size: tuple[int, int] = (2, 1), mode: str = "RGB",
                frames: int = 1) -> bytes:
    """An image of ``fmt`` (``png``, ``jpeg``, ``gif``, ``webp``, ``bmp``…) of ``size`` pixels, its first pixel
    colored by ``seed``; ``frames`` > 1 makes an animated GIF/WebP."""
    first = Image.new(mode, size, _color(seed) if mode == "RGB" else (*_color(seed), 255)[: len(mode)])
    first.putpixel((0, 0), (255, 255, 255)[: len(mode)] if mode != "RGBA" else (255, 255, 255, 128))
    buf = io.BytesIO()
    save: dict[str, Any] = {}
    if frames > 1:
        more = [Image.new(mode, size, _color(seed + k)) for k in range(1, frames)]
        save = {"save_all": True, "append_images": more, "duration": 100, "loop": 0}
    first.save(buf, fmt.upper(), **save)
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def png_b64(seed: int = 0) -> str:
    """The base64 of a 2×1 PNG, distinct by ``seed``."""
    return b64(image_bytes("png", seed))


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{b64(data)}"


def png_url(seed: int = 0) -> str:
    """A ``data:image/png;base64,…`` URL of a 2×1 PNG, distinct by ``seed``."""
    return data_url(image_bytes("png", seed))


@cache
def padded_png(total: int, seed: int = 0, noise: bool = False) -> bytes:
    """A valid 2×1 PNG of ``total`` bytes: a private ancillary chunk (decoders skip it) pads it, so a test gets a
    megabyte image without encoding a megabyte of pixels. ``noise``: the padding is seeded random bytes
    (incompressible, like a real image's data) rather than zeros."""
    png = image_bytes("png", seed)
    pad = max(0, total - len(png) - 12)
    chunk = struct.pack(">I", pad) + b"llFx" + (random.Random(seed).randbytes(pad) if noise else bytes(pad))
    chunk += struct.pack(">I", zlib.crc32(chunk[4:]) & 0xFFFFFFFF)
    return png[:33] + chunk + png[33:]  # right after IHDR (8-byte signature + 25-byte IHDR chunk)


def declared_png(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width``×``height`` pixels (1 bit each) and whose data holds a single row: what
    a decompression bomb looks like to a decoder that trusts the header. Never decodable in full."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    row = zlib.compress(b"\x00" + bytes((width + 7) // 8))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", row) + chunk(b"IEND", b"")


@cache
def noise_png(width: int, height: int, seed: int = 0) -> bytes:
    """A PNG of incompressible pixels: about 3 bytes a pixel, so its size is chosen by its dimensions."""
    rng = random.Random(seed)
    im = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    buf = io.BytesIO()
    im.save(buf, "PNG", compress_level=1)
    return buf.getvalue()


DISPLAY_P3 = ((0.5151, 0.2412, -0.0011), (0.2920, 0.6922, 0.0419), (0.1571, 0.0666, 0.7841))
"""Display P3's primaries as an ICC profile holds them (XYZ, adapted to D50): what a recent Mac's screenshots carry."""


def rgb_profile(primaries: tuple[tuple[float, float, float], ...] = DISPLAY_P3, gamma: float = 2.2) -> bytes:
    """A minimal ICC v2 display profile (matrix and one gamma curve) with these primaries: enough for a colour
    managed viewer, or LittleCMS, to show an image that embeds it."""

    def s15(v: float) -> bytes:
        return struct.pack(">i", round(v * 65536))

    def xyz(v: tuple[float, float, float]) -> bytes:
        return b"XYZ " + bytes(4) + b"".join(s15(c) for c in v)

    curve = b"curv" + bytes(4) + struct.pack(">IH", 1, round(gamma * 256)) + bytes(2)
    tags = [(b"wtpt", xyz((0.9642, 1.0, 0.8249))), (b"rXYZ", xyz(primaries[0])), (b"gXYZ", xyz(primaries[1])),
            (b"bXYZ", xyz(primaries[2])), (b"rTRC", curve), (b"gTRC", curve), (b"bTRC", curve)]
    offset = 128 + 4 + 12 * len(tags)
    table, data = b"", b""
    for sig, blob in tags:
        table += sig + struct.pack(">II", offset + len(data), len(blob))
        data += blob + bytes(-len(blob) % 4)
    size = offset + len(data)
    header = (struct.pack(">I", size) + b"lcms" + struct.pack(">I", 0x02100000) + b"mntrRGB XYZ "
              + struct.pack(">6H", 2024, 1, 1, 0, 0, 0) + b"acsp" + bytes(24) + struct.pack(">I", 0)
              + s15(0.9642) + s15(1.0) + s15(0.8249) + bytes(4) + bytes(44))
    assert len(header) == 128
    return header + struct.pack(">I", len(tags)) + table + data
