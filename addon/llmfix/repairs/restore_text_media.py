"""restore-text-media: a tool result whose whole text is serialized media gets its images back as image parts.

Bug — opencode 1.18.33 with ``@ai-sdk/xai`` (a custom provider, or the built-in ``xai`` provider with
its base URL overridden) sends a ``read`` tool's image as TEXT: the ``role:"tool"`` message's ``content``
is a JSON string of AI-SDK parts, ``[{"type":"text","text":"Image read successfully"},{"type":"image-data",
"data":"iVBOR…","mediaType":"image/png"}]`` (seen in the capture
``tests/fixtures/opencode/xai-builtin__grok-4__two_png__turn2.json``; no public report is recorded). xAI answers
200: the model never sees the image, describes one anyway, and pays tokens for the base64 — the same silent loss
as a gateway dropping a tool result's image (restore-tool-media).

Repair: a tool result (Chat ``tool`` message, Responses ``*_call_output``, Anthropic ``tool_result``) whose
whole text — its string content, or one of its text parts — is exactly one of the shapes
:mod:`llmfix.repairs.text_media` recognises becomes those parts in the dialect's native form, in order:
its text parts stay text, its images become ``image_url`` / ``input_image`` (``detail`` ``"auto"``) /
base64 image blocks with the very base64 the client had put in the text. Nothing else is touched: text
that merely contains base64 stays text. Runs before hoist-tool-media, which then moves the images out of
tool results where the upstream takes none there, into ONE user message after the run (or, for a model
that takes no images, leaves a placeholder and a ``dropped`` record). An Anthropic upstream whose profile
takes no media in ``tool_result`` is left alone.
"""

from __future__ import annotations

from typing import Any

from llmfix.body.media import ref_for_url
from llmfix.dialects.base import Dialect
from llmfix.repairs import hoist_tool_media
from llmfix.repairs.base import Context, Repair
from llmfix.repairs.placeholders import count_words
from llmfix.repairs.text_media import recognise
from llmfix.report.changes import Change
from llmfix.wire.base import Textual, Wire
from llmfix.wire.toolresults import Piece, native

NAME = "restore-text-media"


def _summary(pieces: tuple[Piece, ...]) -> list[Any]:
    """A log-safe picture of what the text held: its texts, and each image as its reference."""
    return [p.text if p.kind == "text" else str(ref_for_url(p.url or "")) for p in pieces]


def _expand(content: Any, dialect: Dialect) -> tuple[list[Any], list[tuple[Piece, ...]]] | None:
    """``content`` (a string or a part list) with every recognised whole text replaced by native parts."""
    if isinstance(content, str):
        pieces = recognise(content)
        if pieces is None:
            return None
        return [native(p, dialect) for p in pieces], [pieces]
    if not isinstance(content, list):
        return None
    out: list[Any] = []
    found: list[tuple[Piece, ...]] = []
    for part in content:
        pieces = recognise(part.text) if isinstance(part, Textual) else None
        if pieces is None:
            out.append(part)
        else:
            out.extend(native(p, dialect) for p in pieces)
            found.append(pieces)
    return (out, found) if found else None


def _change(location: str, what: str, found: list[tuple[Piece, ...]]) -> Change:
    pieces = [p for ps in found for p in ps]
    images = count_words(p.kind for p in pieces if p.kind == "image")
    texts = sum(p.kind == "text" for p in pieces)
    summary = f"{what}: {images} serialized as text → image part(s)"
    if texts:
        summary += f", {texts} text part(s) kept"
    return Change(NAME, location, summary, before=[_summary(ps) for ps in found],
                  after=[p.text if p.kind == "text" else str(ref_for_url(p.url or "")) for p in pieces])


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    out: list[Any] = []
    changes: list[Change] = []
    for i, item in enumerate(items):
        new, change = _item(i, item, ctx)
        out.append(new)
        if change is not None:
            changes.append(change)
    return (out, changes) if changes else (items, [])


def _item(i: int, item: Any, ctx: Context) -> tuple[Any, Change | None]:
    """Item ``i`` with the whole texts of its tool results (the item itself, or results inside it) expanded."""
    field = item.PARTS if isinstance(item, Wire) else None
    if field is None:
        return item, None
    where = f"{ctx.dialect.at(i)}.{field}"
    if item.is_result():
        done = _expand(item.held(), ctx.dialect)
        if done is None:
            return item, None
        return item.holding(done[0]), _change(where, item.noun(), done[1])
    content = item.held()
    if not isinstance(content, list):
        return item, None
    expanded = {k: done for k, block in enumerate(content) if isinstance(block, Wire) and block.is_result()
                and (done := _expand(block.held(), ctx.dialect)) is not None}
    if not expanded:  # the common case, built nothing
        return item, None
    blocks = [b.holding(expanded[k][0]) if k in expanded else b for k, b in enumerate(content)]
    found = [pieces for done in expanded.values() for pieces in done[1]]
    return item.holding(blocks), _change(where, ", ".join(content[k].noun() for k in expanded), found)


def _extend(state: Any, items: list[Any], start: int, ctx: Context) -> Any:
    """Certain when no new item changes: each item is decided on its own (``settled.local``, without building
    the repaired list that :func:`_apply` builds)."""
    for i in range(start, len(items)):
        if _item(i, items[i], ctx)[1] is not None:
            return None
    return ()


NEEDLES = (b"mediaType", b"image_url", b"input_image", b"media_type", b"data:image/")
"""Bytes one of which every recognised shape carries (also inside an escaped JSON string)."""

def _wanted(profile: Any, dialect: Dialect) -> bool:
    """Where the upstream takes media in tool results, or hoist-tool-media moves them out of them after this."""
    return bool(getattr(profile, dialect.media.tool_media_flag)) or hoist_tool_media.serves(dialect)


REPAIR = Repair(NAME, _apply, needles=lambda _dialect: NEEDLES, wanted=_wanted,
                extend=_extend)  # each item decided on its own
