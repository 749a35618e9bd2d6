"""An image's pixels as a viewer shows them: turned upright as its EXIF orientation says, in sRGB as its ICC profile
says. Re-encoding writes no metadata, so both must be applied to the pixels first, or be lost: a portrait photo
whose camera stored it landscape (Orientation 6, every phone) would go sideways, a Display-P3 screenshot (every
recent Mac) would shift colour.

The colour conversion needs Pillow's LittleCMS; a Pillow built without it keeps the profile instead, and the
encoders write it into the output. Both steps are pure functions of the image: the same image gives the same
pixels (and profile) every time.
"""

from __future__ import annotations

import io
from typing import Any

from PIL import ImageOps

try:
    from PIL import ImageCms
except ImportError:  # a Pillow without LittleCMS: profiles are kept, not applied
    ImageCms = None  # type: ignore[assignment]

SRGB = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")) if ImageCms is not None else None
ORIENTATION = 0x0112
_TURNS = {2: "mirrored", 3: "turned 180°", 4: "flipped", 5: "turned and mirrored", 6: "turned 90° clockwise",
          7: "turned and mirrored", 8: "turned 90° counter-clockwise"}
_SWAPS = frozenset({5, 6, 7, 8})
"""Orientations whose upright image has its width and height swapped."""


def upright(im: Any, how: list[str]) -> tuple[Any, bool]:
    """``im`` turned as its EXIF orientation says (the tag then dropped); whether that swapped its sides."""
    try:
        orientation = im.getexif().get(ORIENTATION, 1)
    except (OSError, ValueError, SyntaxError):  # a corrupt EXIF block: the pixels as they are stored
        return im, False
    if orientation not in _TURNS:
        return im, False
    how.append(f"{_TURNS[orientation]} as its EXIF orientation {orientation} says")
    return ImageOps.exif_transpose(im), orientation in _SWAPS


def in_srgb(im: Any, how: list[str]) -> tuple[Any, bytes | None]:
    """``im`` converted to sRGB from its embedded ICC profile, and None; or, when that cannot be done (no
    LittleCMS, a grayscale profile), ``im`` as it is and the profile to write with it. A profile LittleCMS cannot
    read is dropped (as every viewer ignores it)."""
    icc = im.info.get("icc_profile")
    if not icc:
        return im, None
    if ImageCms is None:
        return im, icc
    try:
        source = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        space = source.profile.xcolor_space.strip()
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return im, None
    try:
        if space == "RGB":
            mode = "RGBA" if im.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in im.info else "RGB"
            im = im if im.mode == mode else im.convert(mode)
        elif not (space == "CMYK" and im.mode == "CMYK"):
            return im, icc  # grayscale (or a profile that does not match the pixels): kept as it is
        else:
            mode = "RGB"
        out = ImageCms.profileToProfile(im, source, SRGB, outputMode=mode)
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return im, icc
    how.append("converted to sRGB from its ICC profile")
    return out, None
