"""The shape every repair has: a named, pure function of (items, context) → (items, changes).

A repair never mutates its input: it returns new wire objects for what it changed and the very same
objects for everything else, and an empty change list exactly when nothing changed.

A repair says which dialects it serves in its declaration. One that serves one dialect names it (``needles=
{"chat": (…)}``: names are checked against :mod:`llmfix.dialects.registry` when the repair is declared, so an
unknown one is an error then, never a silent miss); one that serves several asks each dialect for what it looks
for (``needles=lambda d: d.tools.ANSWERS``) and never branches on which dialect it has.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from llmfix.body.haystack import Searchable
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import named
from llmfix.profiles import Profile
from llmfix.report.changes import Change


class CallMemory(Protocol):
    """What repairs may ask of llmfix's memory: the tool calls seen earlier (a `llmfix.memory.recall.Recall`)."""

    def lookup(self, call_ids: Iterable[str]) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Context:
    """What a repair knows of the request besides its items."""

    dialect: Dialect
    profile: Profile
    model: str | None
    modalities: frozenset[str] | None  # None: model unknown, assume it takes everything
    memory: CallMemory | None = None  # None (no memory: repairs that need it do what they can without)
    window: Any = None
    """The in-flight media of recent requests (a :class:`llmfix.memory.media_window.MediaWindow` or its Redis twin;
    None: restore-tool-media is off)."""
    flow_id: str | None = None
    """The request's key in the media window (None: a request llmfix runs again for its own ends)."""
    server_state: bool = False
    """The upstream holds earlier turns the request only points at (Responses ``previous_response_id``)."""
    reasoning: Any = None
    """What answers said about reasoning (a :class:`llmfix.memory.store.ReasoningStore`; None: not kept)."""
    upstream: str = ""
    """``host:port/dialect`` of the upstream (:func:`llmfix.memory.store.upstream_id`)."""
    counts_only: bool = False
    """The request asks only for a token count (Gemini's ``countTokens``): nothing is generated from it."""


type Apply = Callable[[list[Any], Context], tuple[list[Any], list[Change]]]
type Extend = Callable[[Any, list[Any], int, Context], Any]
"""(state for ``items[:start]`` or None, items, start, context) → the state for ``items``, or None when not
certain that the repair changes nothing (see :mod:`llmfix.repairs.settled`)."""
type Needles = Mapping[str, tuple[bytes, ...]] | Callable[[Dialect], tuple[bytes, ...] | None]
"""Per dialect, byte strings at least one of which a body must contain for the repair to apply (``()``: none
needed; a dialect it does not serve: absent, or None)."""


@dataclass(frozen=True, slots=True)
class Repair:
    """A repair as the pipeline sees it. Declared in its module as ``REPAIR = Repair(NAME, _apply, needles=…, …)``;
    its documentation is its module's docstring unless given."""

    name: str
    apply: Apply
    needles: Needles = field(default_factory=dict)
    wanted: Callable[[Profile, Dialect], bool] = lambda _profile, _dialect: True
    """Cheap check on the profile alone: False means this repair cannot change anything for it, unless the body holds
    one of :attr:`unwanted_needles`."""
    unwanted_needles: Callable[[Dialect], tuple[bytes, ...] | None] | None = None
    """For a profile ``wanted`` declines: bytes a body must hold for the repair to change it all the same (None: it
    cannot)."""
    extend: Extend | None = None
    """The repair's certain no-change check, continued turn after turn (None: the repair always runs)."""
    doc: str = ""
    brings_media: bool = False
    """It may put back media that the body's bytes do not hold (from llmfix's memory): when it does, the repairs
    after it run although their needles were not in the body, since its output may hold what they look for."""

    def __post_init__(self) -> None:
        if isinstance(self.needles, Mapping):  # names checked now: a typo is an error at import, not a silent miss
            object.__setattr__(self, "needles", {named(name): n for name, n in self.needles.items()})
        if not self.doc:
            module = sys.modules.get(getattr(self.apply, "__module__", ""))
            object.__setattr__(self, "doc", (module.__doc__ if module is not None else None) or "")

    def needles_for(self, dialect: Dialect) -> tuple[bytes, ...] | None:
        """The needles of ``dialect``'s bodies; None when this repair does not serve it."""
        n = self.needles
        # __post_init__ made any Mapping a dict: no ABC instance check (a Python-level call) on every request
        return n.get(dialect) if type(n) is dict else n(dialect)

    def might_apply(self, dialect: Dialect, profile: Profile, body: Searchable | None) -> bool:
        """Whether it may change a body of ``dialect`` for ``profile``; ``body`` None: whatever the bytes hold."""
        needles = self.needles_for(dialect)
        if needles is None:
            return False
        if not self.wanted(profile, dialect):
            needles = self.unwanted_needles(dialect) if self.unwanted_needles is not None else None
            if not needles:
                return False
        return not needles or body is None or any(n in body for n in needles)
