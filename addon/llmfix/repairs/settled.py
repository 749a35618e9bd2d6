"""Settling a request without running its repairs: certain checks that carry over from one turn to the next.

Why: an agent session resends its whole history on every turn, and nearly every turn needs no
repair. Running each candidate repair over thousands of items to learn that it changes nothing cost
llmfix 5-18 ms of CPU per MB of history on every turn, growing with the session.

How. A repair may come with an ``extend`` check: ``extend(state, items, start, ctx)`` returns a new state
when it is *certain* that the repair would change nothing in the whole of ``items``, or None when it is
not (then the repair itself runs, on everything). A state is never mutated: the next turn continues from
it, and two requests may continue from the same one.

The contract every check keeps: it looks ONLY at ``items[start:]`` and at the ``state`` it returned for
``items[:start]`` (None when ``start`` is 0), and ``len(items)``; never at ``items[:start]``. What it needs
of earlier items goes into its state, and a state stays small (ids, counts, flags: not items). On a
session's next turn the items before ``start`` are not parsed at all: each is :data:`KNOWN`, a
placeholder with no fields (``body/prefix.py`` keeps per session only what recognises its known prefix,
so a proxy can hold hundreds of sessions). Only the new items cost anything, so a turn costs what it
adds, not what the session holds. tests/property/test_prefix.py holds the checks to it: on generated
sessions (interleaved, edited, restarted) every answer is the whole path's.

The states of a turn are kept with the body in the prefix cache (:mod:`llmfix.body.prefix`), under a
:class:`Verdict` whose key says what they were decided for (profile, model, modalities, the candidate
repairs, server state); a next turn with another key starts from scratch. The promise the tests hold
each check to (tests/property/test_prefix.py, tests/property/test_settled.py): a chain of sure
answers over any split of any conversation implies that every repair leaves it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llmfix.idset import EMPTY, Ids
from llmfix.repairs.base import Context, Repair

__all__ = ["EMPTY", "KNOWN", "Ids", "Known", "Verdict", "advance", "local", "settle"]


class Known:
    """An item of a session's known prefix on its next turn: not parsed, so no check may read it (it has no
    fields; an ``isinstance`` test of any wire model is False)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "KNOWN"


KNOWN = Known()



def local(apply: Callable[[list[Any], Context], tuple[list[Any], list[Any]]]) -> Callable[..., Any]:
    """The ``extend`` check of a repair that decides each item on its own (what it changes in one item never
    depends on another): certain when the repair changes nothing in the new items."""

    def extend(state: Any, items: list[Any], start: int, ctx: Context) -> Any:
        _out, changes = apply(items[start:], ctx)
        return None if changes else ()

    return extend


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the certain checks concluded for a body that needed no repair, to continue from on its append."""

    key: tuple[Any, ...]
    states: tuple[Any, ...]  # one per candidate repair, in pipeline order
    observed: Any = None  # the media window's record of its tool results (memory.observations.Observed)


def settle(repairs: Sequence[Repair], states: Sequence[Any] | None, items: list[Any], start: int,
           ctx: Context) -> tuple[tuple[Any, ...] | None, int]:
    """(the new states, len(repairs)) when every repair in ``repairs`` is certain to change nothing in
    ``items``; else (None, n): the first n are certain to change nothing, the next one is not.
    ``states``: the states for ``items[:start]`` (None: ``start`` must be 0)."""
    out: list[Any] = []
    for n, repair in enumerate(repairs):
        got = None if repair.extend is None else repair.extend(None if states is None else states[n], items, start,
                                                                ctx)
        if got is None:
            return None, n
        out.append(got)
    return tuple(out), len(repairs)


def advance(repairs: Sequence[Repair], states: list[Any], ats: list[int], items: list[Any], ctx: Context) -> int:
    """:func:`settle` with a start of its own for each repair: ``states[k]`` is repair k's state for
    ``items[:ats[k]]`` (None when ``ats[k]`` is 0). In order, each check is continued over the rest of ``items``
    until one is unsure; the certain ones' entries then hold their states for the whole of ``items``, the others
    are left as they were. Returns how many leading repairs are certain (``len(repairs)``: all).

    Why: a state depends on its own repair only, so when one check is unsure at a point (pairing, at the end of
    an assistant turn whose results come next), the checks before it need not walk those items again."""
    n = len(items)
    for k, repair in enumerate(repairs):
        got = None if repair.extend is None else repair.extend(states[k], items, ats[k], ctx)
        if got is None:
            return k
        states[k], ats[k] = got, n
    return len(repairs)
