"""The image module's vocabulary: what an image is as an upstream measures it, what an upstream takes, and the
four answers to "does it fit?".

An upstream measures an image by its format (the bytes, not the declared type: Anthropic checks one against the
other), its pixels, its frames (OpenAI takes no animated GIF) and its size — Anthropic's 5 MB limit is on the
*base64 text* (5242880 characters, ~3.75 MB of image), OpenAI's and xAI's on the image itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from llmfix.body.conversation import BadBody
from llmfix.body.media import human_size

FORMATS = ("jpeg", "png", "gif", "webp", "bmp", "tiff", "svg")
"""Every format llmfix can read (and so name in a profile's ``image_formats``)."""
MIME = {"jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp", "bmp": "image/bmp",
        "tiff": "image/tiff", "svg": "image/svg+xml"}
_ALIASES = {"image/jpg": "jpeg", "image/pjpeg": "jpeg", "image/x-png": "png", "image/svg": "svg",
            "image/x-ms-bmp": "bmp", "image/x-bmp": "bmp", "image/tif": "tiff"}


def format_of_mime(mime: str | None) -> str | None:
    """The format a declared MIME type names (``image/jpg`` → ``jpeg``), None for one llmfix does not know."""
    if not mime:
        return None
    m = mime.split(";", 1)[0].strip().lower()
    if m in _ALIASES:
        return _ALIASES[m]
    return next((f for f, known in MIME.items() if known == m), None)


@dataclass(frozen=True, slots=True)
class Limits:
    """What one upstream takes, per image (None: no such limit). Hashable: part of the cache key."""

    formats: frozenset[str] | None = None  # formats taken as they are (None: any llmfix can read)
    max_base64: int | None = None  # characters of base64 text
    max_bytes: int | None = None  # bytes of the image itself
    max_side: int | None = None  # pixels, width and height alike
    gif_animated: bool = True  # False: an animated GIF is not taken (its first frame is sent as a still)
    exact_type: bool = False  # the declared type must be exactly the bytes' type (``image/jpeg``, never ``image/jpg``)
    undecodable_refused: bool = False  # an image that cannot be decoded is refused (True: every pixel is checked)

    def at_most(self, side: int) -> Limits:
        """These limits with pixels capped at ``side`` as well (the many-image rule)."""
        return replace(self, max_side=lower(self.max_side, side))

    def stricter(self, other: Limits) -> Limits:
        """What an upstream holding images to both these limits and ``other`` takes: the stricter of each."""
        formats = other.formats if self.formats is None else self.formats if other.formats is None else \
            self.formats & other.formats
        return Limits(formats, lower(self.max_base64, other.max_base64), lower(self.max_bytes, other.max_bytes),
                      lower(self.max_side, other.max_side), self.gif_animated and other.gif_animated,
                      self.exact_type or other.exact_type, self.undecodable_refused or other.undecodable_refused)

    def takes(self, fmt: str) -> bool:
        return self.formats is None or fmt in self.formats

    @property
    def budget(self) -> int | None:
        """The most bytes an image may have to meet both size limits (None: no size limit)."""
        caps = [c for c in (self.max_bytes, self.max_base64 // 4 * 3 if self.max_base64 is not None else None)
                if c is not None]
        return min(caps) if caps else None


def lower(a: int | None, b: int | None) -> int | None:
    """The stricter of two limits (None: no limit)."""
    return b if a is None else a if b is None else min(a, b)


def base64_length(nbytes: int) -> int:
    """How many characters ``nbytes`` take as (padded) base64."""
    return (nbytes + 2) // 3 * 4


@dataclass(frozen=True, slots=True)
class Shape:
    """One image as an upstream measures it."""

    format: str  # one of FORMATS, read from the bytes
    width: int
    height: int
    nbytes: int  # bytes of the image
    b64: int  # characters of its base64 text as sent
    frames: int = 1

    @property
    def side(self) -> int:
        return max(self.width, self.height)

    @property
    def mime(self) -> str:
        return MIME[self.format]

    def __str__(self) -> str:
        anim = f", {self.frames} frames" if self.frames > 1 else ""
        return (f"{self.format.upper()} {self.width}×{self.height}{anim}, {human_size(self.nbytes)} "
                f"({human_size(self.b64)} as base64)")


def offences(shape: Shape, declared: str | None, limits: Limits) -> tuple[str, ...]:
    """Why an upstream with ``limits`` would refuse this image as it is (empty: it takes it)."""
    why: list[str] = []
    if not limits.takes(shape.format):
        why.append(f"{shape.format.upper()} is not taken (takes {', '.join(sorted(limits.formats or ()))})")
    elif shape.format == "gif" and shape.frames > 1 and not limits.gif_animated:
        why.append("an animated GIF is not taken")
    elif limits.exact_type and declared != shape.mime:  # Anthropic takes only its four exact strings
        why.append(f"declared {declared or 'without a type'} but the bytes are {shape.format.upper()}")
    if limits.max_base64 is not None and shape.b64 > limits.max_base64:
        why.append(f"{shape.b64} characters of base64 > {limits.max_base64}")
    if limits.max_bytes is not None and shape.nbytes > limits.max_bytes:
        why.append(f"{shape.nbytes} bytes > {limits.max_bytes}")
    if limits.max_side is not None and shape.side > limits.max_side:
        why.append(f"{shape.side} px > {limits.max_side} px")
    return tuple(why)


@dataclass(frozen=True, slots=True)
class Fits:
    """The upstream takes the image as it is: send it unchanged."""

    shape: Shape


@dataclass(frozen=True, slots=True)
class Fitted:
    """The image made into one the upstream takes. ``data`` None: the very same bytes, only declared as ``mime``."""

    before: Shape
    after: Shape
    mime: str
    data: str | None  # base64 text
    why: tuple[str, ...]  # what the upstream would have refused
    how: tuple[str, ...] = field(default=())  # what was done, in words

    def summary(self) -> str:
        return f"{self.before} → {self.after}: {', '.join(self.how)} ({'; '.join(self.why)})"


@dataclass(frozen=True, slots=True)
class Unusable:
    """Not an image llmfix can read or make fit: a placeholder goes in its place, and the log says why."""

    reason: str
    before: Shape | None = None


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Not an image llmfix can read, for an upstream not known to refuse such an image (it may read more formats
    than llmfix: HEIC, AVIF): send it unchanged."""

    reason: str
    before: Shape | None = None


type Result = Fits | Fitted | Unusable | Unreadable


class Refused(BadBody):
    """An image over llmfix's own decoding bounds (a decompression bomb, a huge canvas): not decoded at all; the
    image goes through unchanged, with the reason in a warning (a :class:`BadBody`, so that a caller that does not
    catch it leaves the whole request unchanged rather than fail)."""


class WouldBlock(Exception):
    """Image work (a decode, a conversion) was asked for on the event loop (or in a shared worker thread, see
    ``images.deferring``): ``engine.process`` answers ``Outcome("deferred")``, and ``llmfix.offload`` runs it
    again on the image workers."""
