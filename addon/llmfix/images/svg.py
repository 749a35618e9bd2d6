"""SVG images, rasterized within bounds and without reaching outside the request.

No LLM upstream takes SVG (OpenAI answers Codex's ``view_image`` of an ``.svg`` with "The image data you provided
does not represent a valid image"), so an SVG is rasterized to PNG with resvg (``resvg-py``). Before resvg sees
it, the SVG is parsed (Python's expat: external entities are never loaded, entity expansion is bounded) and:

- every reference that is not a fragment (``#id``) or an inline PNG/JPEG/GIF/WebP is removed: resvg itself never
  fetches ``http://…``, but it reads local files named by ``<image href>`` (absolute or relative paths), and a
  proxy must not put its own machine's files into a request. Inline images are bounded like any image;
- its canvas comes from its own ``width``/``height`` (absolute units) or ``viewBox``, as a browser reads a
  standalone SVG, and is written back on the root in pixels; the raster is at most :data:`RASTER_SIDE` pixels
  a side, whatever the SVG declares;
- an SVG over :data:`MAX_BYTES`, :data:`MAX_ELEMENTS` elements, or whose ``<use>`` references expand to more
  than :data:`MAX_EXPANDED` elements is :class:`~llmfix.images.shape.Refused` (not rendered at all).

Text renders with the machine's fonts (resvg loads the system's font list): the same SVG gives the same PNG on
one machine, every time.
"""

from __future__ import annotations

import base64
import io
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

from llmfix.images.raster import Undecodable, check_bounds, open_raster, short, sniff
from llmfix.images.shape import Refused

MAX_BYTES = 8 * 1024 * 1024
MAX_ELEMENTS = 100_000
MAX_EXPANDED = 500_000
RASTER_SIDE = 4096
DEFAULT_SIZE = (100.0, 100.0)
"""resvg's (and llmfix's) size for an SVG that declares neither width/height nor a viewBox."""
_UNITS = {"": 1.0, "px": 1.0, "pt": 4 / 3, "pc": 16.0, "mm": 96 / 25.4, "cm": 96 / 2.54, "in": 96.0, "q": 96 / 101.6,
          "em": 16.0, "ex": 8.0}
_LENGTH = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([a-zA-Z%]*)\s*$")
_INLINE_RASTER = re.compile(r"^data:image/(?:png|jpeg|jpg|gif|webp);base64,", re.IGNORECASE)
_XLINK = "{http://www.w3.org/1999/xlink}href"


class BadSvg(ValueError):
    """Not an SVG llmfix can render; the message says why."""


def looks_like(raw: bytes) -> bool:
    """Whether ``raw`` is XML text whose first 4 KB open an ``<svg`` element."""
    head = raw[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"<") and b"<svg" in head


@dataclass(frozen=True, slots=True)
class Svg:
    text: str  # the sanitized SVG, canvas in pixels on its root
    width: int  # its natural size, rounded (at least 1)
    height: int
    exact: tuple[float, float]
    removed: int  # references removed (external files, URLs, nested SVG)


def parse(raw: bytes) -> Svg:
    if len(raw) > MAX_BYTES:
        raise Refused(f"SVG of {len(raw)} bytes is over llmfix's bound of {MAX_BYTES} bytes: not rendered")
    try:
        root = ET.fromstring(raw.decode("utf-8-sig"))
    except (ET.ParseError, UnicodeDecodeError, ValueError) as e:
        raise BadSvg(f"its SVG cannot be parsed ({short(e)})") from None
    if _local(root.tag) != "svg":
        raise BadSvg(f"its XML root is <{_local(root.tag)}>, not <svg>")
    elements = list(root.iter())
    if len(elements) > MAX_ELEMENTS:
        raise Refused(f"SVG of {len(elements)} elements is over llmfix's bound of {MAX_ELEMENTS}: not rendered")
    removed = _strip_references(elements)
    if (n := _expanded(root, elements)) > MAX_EXPANDED:
        raise Refused(f"SVG whose <use> references expand to over {MAX_EXPANDED} elements ({n}): not rendered")
    w, h = natural_size(root)
    root.set("width", _fmt(w))
    root.set("height", _fmt(h))
    text = ET.tostring(root, encoding="unicode")
    return Svg(text, max(1, round(w)), max(1, round(h)), (w, h), removed)


def rasterize(svg: Svg, width: int, height: int) -> Any:
    """The SVG drawn on a transparent ``width``×``height`` canvas (its aspect ratio kept within it), as an RGBA
    PIL image. ``width`` and ``height`` are capped at :data:`RASTER_SIDE`."""
    import resvg_py
    from PIL import Image

    width, height = min(max(1, width), RASTER_SIDE), min(max(1, height), RASTER_SIDE)
    try:
        png = resvg_py.svg_to_bytes(svg_string=svg.text, width=width, height=height)
    except Exception as e:
        raise BadSvg(f"its SVG cannot be rendered ({short(e)})") from None
    except BaseException as e:  # a panic in the Rust code arrives as pyo3's PanicException (a BaseException)
        if type(e).__name__ != "PanicException":
            raise
        raise BadSvg(f"its SVG cannot be rendered ({short(e)})") from None
    im = Image.open(io.BytesIO(png), formats=("PNG",))
    im.load()
    return im.convert("RGBA")


def natural_size(root: ET.Element) -> tuple[float, float]:
    """The SVG's size in pixels, as a browser sizes a standalone SVG: absolute ``width``/``height``, else from the
    ``viewBox`` (one given side and the viewBox's aspect ratio give the other), else :data:`DEFAULT_SIZE`."""
    w, h = _length(root.get("width")), _length(root.get("height"))
    box = _view_box(root.get("viewBox"))
    if w is None or h is None:
        if box is not None:
            bw, bh = box
            if w is None and h is None:
                w, h = bw, bh
            elif w is None:
                w = h * bw / bh  # type: ignore[operator]
            else:
                h = w * bh / bw
        else:
            w = DEFAULT_SIZE[0] if w is None else w
            h = DEFAULT_SIZE[1] if h is None else h
    assert w is not None and h is not None
    if not (math.isfinite(w) and math.isfinite(h)) or w <= 0 or h <= 0:
        raise BadSvg(f"its SVG size is not a size ({w}×{h})")
    return w, h


def _length(value: str | None) -> float | None:
    """An absolute SVG length in pixels; None for a missing or relative one (a percentage)."""
    if value is None:
        return None
    m = _LENGTH.match(value)
    if m is None:
        raise BadSvg(f"its SVG size {value[:40]!r} cannot be read")
    unit = m.group(2).lower()
    if unit == "%":
        return None
    if unit not in _UNITS:
        raise BadSvg(f"its SVG size has an unknown unit {unit!r}")
    return float(m.group(1)) * _UNITS[unit]


def _view_box(value: str | None) -> tuple[float, float] | None:
    if not value:
        return None
    parts = value.replace(",", " ").split()
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        return None
    if len(numbers) != 4 or numbers[2] <= 0 or numbers[3] <= 0 or not all(map(math.isfinite, numbers)):
        return None
    return numbers[2], numbers[3]


def _strip_references(elements: list[ET.Element]) -> int:
    """Remove every ``href`` that is neither a fragment nor an inline raster within bounds; how many were."""
    removed = 0
    for el in elements:
        for name in [n for n in el.attrib if n in ("href", _XLINK)]:
            value = el.attrib[name].strip()
            if value.startswith("#"):
                continue
            if _INLINE_RASTER.match(value):
                try:
                    raw = base64.b64decode(value.partition(",")[2], validate=False)
                except ValueError:
                    raw = b""
                if (fmt := sniff(raw)) in ("png", "jpeg", "gif", "webp"):  # never an SVG inside an SVG
                    try:
                        shape = open_raster(raw, fmt, 0)[0]
                        check_bounds(shape.width, shape.height)  # resvg decodes it whole: Refused past the bound
                        continue
                    except Undecodable:
                        pass
            del el.attrib[name]
            removed += 1
    return removed


def _expanded(root: ET.Element, elements: list[ET.Element]) -> int:
    """How many elements the SVG holds once every ``<use>`` is replaced by what it references (capped)."""
    uses = [el for el in elements if _local(el.tag) == "use"]
    if not uses:
        return len(elements)
    by_id = {el.get("id"): el for el in elements if el.get("id")}
    memo: dict[int, int] = {}

    def cost(el: ET.Element, depth: int) -> int:
        key = id(el)
        if key in memo:
            return memo[key]
        if depth > 256:
            return MAX_EXPANDED + 1
        memo[key] = 1  # a reference cycle counts once (resvg drops it)
        total = 1 + sum(cost(child, depth + 1) for child in el)
        if _local(el.tag) == "use":
            ref = (el.get("href") or el.get(_XLINK) or "").strip()
            target = by_id.get(ref[1:]) if ref.startswith("#") else None
            if target is not None:
                total += cost(target, depth + 1)
        memo[key] = min(total, MAX_EXPANDED + 1)
        return memo[key]

    return cost(root, 0)


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _fmt(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".")
