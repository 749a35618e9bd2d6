"""Repairs of a request's top-level members, beside its conversation: request knobs an upstream refuses, tool
declarations. Each is a pure function of the decoded body's bytes and a small :class:`TopContext`, run by the engine
on the body the pipeline produced (:func:`llmfix.engine.process`), in :data:`llmfix.repairs.pipeline.TOP`'s order.

Why apart from the pipeline: its repairs change the conversation's items, typed, and a long session's history is
parsed only as far as it is new (``body/prefix.py``); these change members the pipeline never types, so each reads
only what it needs of the body (a byte search first: most requests have nothing for any of them, and cost nothing
more) and leaves it byte for byte when it has nothing to change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmfix.dialects.base import Dialect
from llmfix.profiles import Learned, Profile
from llmfix.report.changes import Change


@dataclass(frozen=True, slots=True)
class TopContext:
    """What a top-level repair knows of the request besides its bytes."""

    dialect: Dialect
    host: str
    port: int | None
    profile: Profile
    model: str | None
    learned: Learned
    """The flags and refused fields learned for this upstream (``strip:<field>``)."""
    quirks: Any = None
    """The learned quirks themselves, for what taught each (a :class:`llmfix.retry.learned.LearnedQuirks`)."""


type TopApply = Callable[[bytes, TopContext], tuple[bytes, list[Change]] | None]
"""(the decoded body, context) → the new body and its changes, or None when it changes nothing. Raises ValueError
when the body cannot be written again (the request then goes unchanged, with a warning)."""


@dataclass(frozen=True, slots=True)
class TopRepair:
    """A top-level repair as the engine sees it. ``wants``: a cheap check before the body is even read (a learned
    field to strip, a dialect whose tool declarations may be refused)."""

    name: str
    apply: TopApply
    wants: Callable[[TopContext], bool]
