"""The shape every repair has: a named, pure function of (items, context) → (items, changes).

A repair never mutates its input: it returns new wire objects for what it changed and the very same
objects for everything else, and an empty change list exactly when nothing changed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from llmfix.body.haystack import Searchable
from llmfix.profiles import Profile
from llmfix.report.changes import Change
from llmfix.route import Dialect


class CallMemory(Protocol):
    """What repairs may ask of llmfix's memory: the tool calls seen earlier (a `llmfix.memory.recall.Recall`)."""

    def lookup(self, call_ids: Iterable[str]) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Context:
    dialect: Dialect
    profile: Profile
    model: str | None
    modalities: frozenset[str] | None  # None: model unknown, assume it takes everything
    memory: CallMemory | None = None  # None (no memory: repairs that need it do what they can without)
    extras: Mapping[str, Any] = field(default_factory=dict)


type Apply = Callable[[list[Any], Context], tuple[list[Any], list[Change]]]
type Extend = Callable[[Any, list[Any], int, Context], Any]
"""(state for ``items[:start]`` or None, items, start, context) → the state for ``items``, or None when not
certain that the repair changes nothing (see :mod:`llmfix.repairs.settled`)."""


@dataclass(frozen=True, slots=True)
class Repair:
    """A repair as the pipeline sees it. Declared in its module as ``REPAIR = Repair(NAME, _apply, needles=…, …)``:
    its dialects are its needles' unless given, its documentation is its module's docstring unless given."""

    name: str
    apply: Apply
    needles: Mapping[Dialect, tuple[bytes, ...]] = field(default_factory=dict)
    """Per dialect, byte strings at least one of which a body must contain for this repair to apply."""
    wanted: Callable[[Profile, Dialect], bool] = lambda _profile, _dialect: True
    """Cheap check on the profile alone: False means this repair cannot change anything for it."""
    extend: Extend | None = None
    """The repair's certain no-change check, continued turn after turn (None: the repair always runs)."""
    dialects: frozenset[Dialect] = frozenset()
    """The dialects it applies to (empty: those of its needles)."""
    doc: str = ""
    brings_media: bool = False
    """It may put back media that the body's bytes do not hold (from llmfix's memory): when it does, the repairs
    after it run although their needles were not in the body, since its output may hold what they look for."""

    def __post_init__(self) -> None:
        if not self.dialects:
            object.__setattr__(self, "dialects", frozenset(self.needles))
        if not self.doc:
            module = sys.modules.get(getattr(self.apply, "__module__", ""))
            object.__setattr__(self, "doc", (module.__doc__ if module is not None else None) or "")

    def might_apply(self, dialect: Dialect, profile: Profile, body: Searchable | None) -> bool:
        """Whether it may change a body of ``dialect`` for ``profile``; ``body`` None: whatever the bytes hold."""
        if dialect not in self.dialects or not self.wanted(profile, dialect):
            return False
        needles = self.needles.get(dialect)
        return not needles or body is None or any(n in body for n in needles)
