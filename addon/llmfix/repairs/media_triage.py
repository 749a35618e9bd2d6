"""Media triage shared by the repairs that move or gate media: what kind a part is, and what may be sent.

A part the model cannot take (per the catalogue or a profiles-file ``input``) or the upstream cannot take
at all (an ``input_image`` with only a ``file_id`` where the profile needs ``image_url``) is split off
with the reason, so the caller puts a placeholder in its place and logs the drop.
"""

from __future__ import annotations

from typing import Any

from llmfix.catalogue import takes
from llmfix.profiles import TEXT_ONLY
from llmfix.repairs.base import Context
from llmfix.wire.base import Image, Media


def kind(part: Any) -> str:
    """The media kind of a part, from its own fields (describing it would hash its payload)."""
    if isinstance(part, Media):
        return part.kind()
    return str(getattr(part, "type", None) or "part")


def unsupported(part: Any, ctx: Context) -> str | None:
    """Why the model cannot take this media part (per the catalogue, a profiles-file ``input`` or a profile
    with ``media_input = false``), or None when it may."""
    k = kind(part)
    from_flag = ctx.modalities is TEXT_ONLY and not ctx.profile.media_input  # not a profiles-file ``input``
    note = f" (upstream profile {ctx.profile.name}: no media input)" if from_flag else ""
    if k in ("image", "audio") and not takes(k, ctx.modalities):
        return f"model {ctx.model} does not take {k} input{note}"
    if k == "file" and ctx.modalities is not None and "pdf" not in ctx.modalities:
        # the catalogue names file input "pdf"; a text-only model's upstream rejects file parts (DeepSeek:
        # ``unknown variant `file```), so a known text-only model gets the placeholder, as for images
        return f"model {ctx.model} does not take file input{note}"
    return None


def triage(parts: list[Any], ctx: Context, call_id: str | None) -> tuple[list[Any], list[tuple[Any, str]]]:
    """Split media parts into those to forward and those the upstream/model cannot take (with why)."""
    forward: list[Any] = []
    dropped: list[tuple[Any, str]] = []
    for p in parts:
        if (why := unsupported(p, ctx)) is not None:
            dropped.append((p, why))
        elif isinstance(p, Image) and ctx.profile.responses_image_requires_url and p.by_file_id():
            why = f"upstream profile {ctx.profile.name} needs image_url; a file_id-only image cannot be sent"
            dropped.append((p, why))
        else:
            forward.append(p)
    return forward, dropped
