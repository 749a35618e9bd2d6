"""fit-images: an image over the upstream's limits, or in a format it refuses, is made into one it takes.

Bug — an image the upstream refuses stays in the client's history, so every later turn is refused again, and
users cut their session files by hand or start over (docs/evidence.md, "Image limits per upstream"; the tenth of
the most often reported session killers, "Why one bad request fails every later turn"):

- Anthropic, from Claude Code (a pasted or read screenshot): ``messages.44.content.1.image.source.base64:
  image exceeds 5 MB maximum: 11641928 bytes > 5242880 bytes`` (the limit is on the base64 text: a 4 MB
  screenshot is over it; anthropics/claude-code #19631); ``… At least one of the image dimensions exceed max
  allowed size: 8000 pixels`` (#4778: "Exiting and coming back in doesn't help"); ``… exceed max allowed size
  for many-image requests: 2000 pixels`` once the request holds more than 20 images (#49537: a session that was
  fine becomes permanently rejected as screenshots accumulate); ``Could not process image``; a file whose bytes
  are not its declared type: ``… Image does not match the provided media type image/png`` (#6300, #13131).
- OpenAI, from Codex: ``view_image`` of an ``.svg`` → ``The image data you provided does not represent a valid
  image. Please check your input and try again with one of the supported image formats: ['image/jpeg',
  'image/png', 'image/gif', 'image/webp'].`` and the thread cannot recover (openai/codex #7459). OpenAI takes
  no animated GIF either.
- xAI takes JPEG and PNG only: a WebP screenshot → ``Invalid request content: Downloaded response does not
  contain a valid JPG or PNG image.``

Repair, where the profile has image limits (``image_*``, see profiles.py): each inline image (a Chat
``image_url`` data URL, a Responses ``input_image`` data URL in a message or a tool output, an Anthropic base64
``image`` block in user content or in a ``tool_result``) that the upstream would refuse, and only such an image,
is fitted by :mod:`llmfix.images`: downscaled to the pixel limit keeping its aspect ratio, re-encoded to meet the
byte limit as the upstream measures it, converted from a format it refuses (an SVG rasterized, an animated GIF's
first frame), or only given its true media type. The many-image limit is counted over the whole request, as the
upstream counts (every image block, those by URL too). An image that cannot be made to fit becomes a short
visible text in its place, naming it and why, with a ``dropped`` record; so does one that cannot be decoded, for
an upstream that refuses such an image (``image_undecodable_refused``); elsewhere it goes as it is (an upstream
may read formats llmfix does not: HEIC, AVIF). Images by URL or file id cannot be fitted and are left as they
are; so is one over llmfix's own decoding bounds (a decompression bomb), byte for byte, with a warning naming the
flow and why: every other image and every other repair go on as usual. The same image is converted once: the
next turn gets the very same bytes from the image cache.

An upstream llmfix has no profile for (``spec``: Gemini's OpenAI-compatible API, Ollama, vLLM, a company
gateway) is assumed to take what the client sends: only what no upstream takes is converted (SVG, BMP, TIFF to
PNG). A gateway in front of Claude or GPT names its vendor in its first rejection of an image (Anthropic's
``image exceeds 5 MB maximum``, OpenAI's ``does not represent a valid image``…): repair-and-retry learns that
vendor's limits for it (``image_limits_anthropic``, ``image_limits_openai``), resends once, and from then on its
images are fitted up front.

Runs after omit-unsupported-media (an image the model cannot take at all is already a placeholder, not worth
fitting) and before flatten-tool-text (a placeholder put in a Chat tool message is a text part it may join).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from llmfix import images
from llmfix.dialects.base import Dialect
from llmfix.images import Fits, Fitted, Limits, Unreadable, Unusable
from llmfix.images.shape import lower
from llmfix.profiles import VENDOR_IMAGES, Profile
from llmfix.repairs import placeholders
from llmfix.repairs.base import Context, Repair
from llmfix.repairs.restore_text_media import NEEDLES as RESTORED
from llmfix.report.changes import Change
from llmfix.wire.base import Image, Wire

NAME = "fit-images"
logger = logging.getLogger("llmfix")


@dataclass(frozen=True, slots=True)
class Rules:
    """A profile's image limits: per image, and the many-image rule (more than ``many_count`` images in one
    request: each at most ``many_side`` pixels)."""

    limits: Limits
    many_count: int | None
    many_side: int | None

    def for_count(self, count: int) -> Limits:
        if self.many_count is not None and self.many_side and count > self.many_count:
            return self.limits.at_most(self.many_side)
        return self.limits

    def stricter(self, other: Rules) -> Rules:
        """The rules of an upstream that holds images to both these and ``other`` (the stricter of each)."""
        limits = self.limits.stricter(other.limits)
        if self.many_side is None:
            return Rules(limits, other.many_count, other.many_side)
        if other.many_side is None:
            return Rules(limits, self.many_count, self.many_side)
        return Rules(limits, lower(self.many_count, other.many_count), min(self.many_side, other.many_side))


def rules_of(profile: Profile) -> Rules | None:
    """The image rules of a profile, its learned vendor limits included; None when it has none (the repair has
    nothing to do)."""
    return _rules_of(profile)


@functools.lru_cache(maxsize=256)
def _rules_of(profile: Profile) -> Rules | None:
    rules = _own_rules(profile)
    for flag, fields in VENDOR_IMAGES.items():
        if getattr(profile, flag):
            vendor = _own_rules(Profile(name=flag, **fields))
            assert vendor is not None
            rules = vendor if rules is None else rules.stricter(vendor)
    return rules


def _own_rules(profile: Profile) -> Rules | None:
    limits = Limits(
        formats=frozenset(profile.image_formats) if profile.image_formats is not None else None,
        max_base64=profile.image_max_base64, max_bytes=profile.image_max_bytes, max_side=profile.image_max_side,
        gif_animated=profile.image_gif_animated, exact_type=profile.image_media_type_checked,
        undecodable_refused=profile.image_undecodable_refused)
    many = (profile.image_many_count, profile.image_many_side) if profile.image_many_side else (None, None)
    if limits == Limits() and many == (None, None):
        return None
    return Rules(limits, *many)


@dataclass(frozen=True, slots=True)
class Slot:
    """One image part of the request: where it is, and its inline payload (``text[start:]``; ``inline`` False: by
    URL or file id)."""

    where: str
    part: Any
    text: str = ""
    start: int = 0
    inline: bool = False
    declared: str | None = None
    is_base64: bool = True

    @property
    def payload(self) -> str:
        return self.text[self.start:] if self.start else self.text

    def fit(self, limits: Limits) -> images.Result:
        return images.fit(lambda: self.payload, self.declared, limits, is_base64=self.is_base64, ident=self.ident())

    def ident(self) -> tuple[bytes, int]:
        """The payload's identity for the image cache: hashed once a request (the certain check, the repair and
        the log references share it), and again on each turn, whose parts are parsed anew."""
        return images.identify(self.text, self.start)


def _parts(where: str, parts: list[Any]) -> Iterator[Slot]:
    for k, p in enumerate(parts):
        if isinstance(p, Image):
            if p.kind() != "image":  # a document
                continue
            got = p.inline()
            if got is None:
                yield Slot(f"{where}[{k}]", p)
            else:
                yield Slot(f"{where}[{k}]", p, got.text, got.start, True, got.declared, got.is_base64)
        elif isinstance(inner := _inner(p), list):
            yield from _parts(f"{where}[{k}].{p.PARTS}", inner)


def _inner(p: Any) -> Any:
    """The part list inside a part (an Anthropic tool_result's content), or None."""
    return p.held() if isinstance(p, Wire) else None


def _may_hold(parts: list[Any]) -> bool:
    """Whether :func:`_parts` may find an image in ``parts``: an image part, or a part whose own parts may hold one.
    One plain pass, no strings built: most items of a history hold no image, and this runs over every item of a
    body seen for the first time."""
    for p in parts:
        if isinstance(p, Image):
            return True
        if isinstance(inner := _inner(p), list) and _may_hold(inner):
            return True
    return False


def slots(dialect: Dialect, i: int, item: Any) -> Iterator[Slot]:
    """Every image part of item ``i``, in document order (tool results' images included)."""
    parts = _inner(item)
    if not isinstance(parts, list) or not _may_hold(parts):
        return
    yield from _parts(f"{dialect.at(i)}.{item.PARTS}", parts)


def _fitted_part(slot: Slot, got: Fitted) -> Any:
    data = got.data if got.data is not None else slot.payload
    return slot.part.refitted(got.mime, data, got.data is not None or slot.is_base64)


def _replace(parts: list[Any], new: dict[int, Any]) -> list[Any] | None:
    """``parts`` with the replacements of ``new`` (by part identity), the parts inside parts included; None when
    none of them is here."""
    out: list[Any] = []
    changed = False
    for p in parts:
        if id(p) in new:
            out.append(new[id(p)])
            changed = True
        elif isinstance(inner := _inner(p), list) and (got := _replace(inner, new)):
            out.append(p.holding(got))
            changed = True
        else:
            out.append(p)
    return out if changed else None


def _rebuilt(item: Any, new: dict[int, Any]) -> Any:
    parts = _inner(item)
    got = _replace(parts, new) if isinstance(parts, list) else None
    return item.holding(got) if got is not None else item


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    rules = rules_of(ctx.profile)
    if rules is None:
        return items, []
    found = [(i, s) for i, item in enumerate(items) for s in slots(ctx.dialect, i, item)]
    if not found:
        return items, []
    refused: dict[str, str] = {}  # where → why, for each image over llmfix's own decoding bound: left as it is
    first = {id(s): got for _, s in found if s.inline and (got := _fit(s, rules.limits, refused)) is not None}
    count = len(found) - sum(isinstance(r, Unusable) for r in first.values())  # what the upstream will count
    limits = rules.for_count(count)
    many = f" (the request holds {count} images: more than {rules.many_count})" if limits != rules.limits else ""
    new: dict[int, Any] = {}
    touched: set[int] = set()
    changes: list[Change] = []
    for i, s in found:
        got = first.get(id(s))
        if got is None or isinstance(got, Unreadable) or (isinstance(got, Fits) and limits == rules.limits):
            continue
        if not isinstance(got, Unusable | Unreadable) and limits != rules.limits:
            got = _fit(s, limits, refused)
        if got is None or isinstance(got, Fits | Unreadable):
            continue
        if isinstance(got, Unusable):
            why = got.reason
            new[id(s.part)] = placeholders.text_part(ctx.dialect, placeholders.omitted_part("image", why))
            changes.append(Change(NAME, s.where, f"image → placeholder: {why}", before=s.part.to_wire(),
                                  after=new[id(s.part)].to_wire(), dropped=(f"{s.part.media()}: {why}",)))
        else:
            new[id(s.part)] = _fitted_part(s, got)
            changes.append(Change(NAME, s.where, f"image {got.summary()}{many}", before=s.part.to_wire(),
                                  after=new[id(s.part)].to_wire()))
        touched.add(i)
    _warn(ctx, refused)
    if not changes:
        return items, []
    return [_rebuilt(item, new) if i in touched else item for i, item in enumerate(items)], changes


def _fit(slot: Slot, limits: Limits, refused: dict[str, str]) -> images.Result | None:
    """The slot's answer; None for an image over llmfix's decoding bound (noted in ``refused``: it stays as it is,
    and the rest of the request is repaired as usual)."""
    try:
        return slot.fit(limits)
    except images.Refused as e:
        refused[slot.where] = str(e)
        return None


def _warn(ctx: Context, refused: dict[str, str]) -> None:
    """One warning per request for the images left as they are, naming its flow. A request llmfix runs again
    for its own ends (the probes of repair-and-retry) has no flow id: its flow was warned on its first pass."""
    flow = ctx.flow_id
    if not refused or flow is None:
        return
    head, _, message = str(flow).partition("/")  # a WebSocket message's id: "<flow id>/<index>"
    label = f"{head[:8]} message {message}" if message else head[:8]
    where = "; ".join(f"{k}: {why}" for k, why in refused.items())
    logger.warning("llmfix: flow %s (%s): %s: %d image(s) left as they are: %s", label,
                   ctx.upstream or "?", NAME, len(refused), where)


def _extend(state: tuple[int, int] | None, items: list[Any], start: int, ctx: Context) -> tuple[int, int] | None:
    """Certain when every image in ``items[start:]`` is taken as it is, and the many-image rule still holds over
    the whole request. State: (images so far, the widest inline one's long side), all the rule needs of
    ``items[:start]``."""
    rules = rules_of(ctx.profile)
    if rules is None:
        return (0, 0)
    count, widest = state if state is not None else (0, 0)
    for i in range(start, len(items)):
        for s in slots(ctx.dialect, i, items[i]):
            count += 1
            if not s.inline:
                continue
            try:
                got = s.fit(rules.limits)
            except images.Refused:
                return None  # the repair itself says why
            if isinstance(got, Unreadable):
                continue  # sent as it is, and it cannot be made smaller for the many-image rule either
            if not isinstance(got, Fits):
                return None
            widest = max(widest, got.shape.side)
    if rules.for_count(count) != rules.limits and widest > (rules.many_side or 0):
        return None
    return (count, widest)


REPAIR = Repair(NAME, _apply, wanted=lambda profile, _dialect: rules_of(profile) is not None, extend=_extend,
                # inline images as the client sent them, or as restore-text-media makes them from text
                needles=lambda d: (*d.media.images, *RESTORED))
