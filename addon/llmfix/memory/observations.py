"""Which tool results of a request the media window records, from the new items alone on a session's next turn.

The window (:mod:`llmfix.memory.media_window`) records, after llmfix's repairs, every tool result that
carries media and every one overriding an observation it holds (``MediaWindow.worth_keeping`` over
``toolresults.results``). Walking a whole history for that cost a pass over thousands of items on every
turn of a long session. Instead a record (:class:`Observed`) of where a conversation's tool results are is
extended turn by turn (:func:`extend`, kept in the prefix cache's :class:`llmfix.repairs.settled.Verdict`),
and the results to record are read from it (:func:`seen`):

- every result with media, with its ``later`` media (those at or after it in the request);
- the results without media whose call id the window holds now, built again from their item (their
  ``later`` left empty: restore-tool-media reads it only from an observation with media).

The window keeps one observation per call id, the last recorded: the order of these results matters only
for an id seen twice, so a record exists only while every call id in it is unique (else the whole
conversation is walked, as before).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from llmfix.dialects.base import Dialect
from llmfix.idset import EMPTY, Ids
from llmfix.wire.toolresults import Result, loose_media, refs, results


@dataclass(frozen=True, slots=True)
class Observed:
    media: tuple[Result, ...]  # the results with media, ``later`` complete
    plain: Ids  # call id → item index of the results without media


def extend(record: Observed | None, dialect: Dialect, items: list[Any], start: int) -> Observed | None:
    """The record of ``items`` from ``record``, that of ``items[:start]`` (None when ``start`` is 0); None when
    a call id repeats. Only the results with media are built whole (:func:`results`); of the others, the
    call id and the item are enough."""
    found = refs(items, start)
    loose = [(i + start, p) for i, p in loose_media(items[start:])]
    new_media: list[Result] = []
    fresh: dict[str, int] = {}
    for call_id, at, has in found:  # a part that is not text may still make no media piece (a "text" part
        if not has:                 # of an unknown shape): the item's results, built whole, decide
            fresh[call_id] = at
    for at in dict.fromkeys(i for _, i, has in found if has):
        later = tuple(p for i, p in loose if i >= at)
        for r in results(dialect, [items[at]]):
            if r.media:
                new_media.append(replace(r, index=at, later=later))
            else:
                fresh[r.call_id] = at
    if record is None:
        media: tuple[Result, ...] = ()
        plain = EMPTY
    else:
        extra = tuple(p for _, p in loose)
        media = tuple(replace(r, later=r.later + extra) for r in record.media) if extra else record.media
        plain = record.plain
    ids = [c for c, _, _ in found]
    old = {r.call_id for r in media}
    if len(set(ids)) != len(ids) or any(c in old or c in plain for c in ids):
        return None
    return Observed(media + tuple(new_media), plain.plus(fresh))


def reads_before(window: Any, flow_id: str, record: Observed, first: int) -> bool:
    """Whether :func:`seen` would read an item before ``first`` (a session's next turn has only its items from
    ``first`` on): a result without media whose call id the window holds, built again from its item."""
    if not record.plain.size:
        return False
    return any(record.plain.get(c) < first for c in window.held_among(record.plain, flow_id))


def seen(window: Any, flow_id: str, dialect: Dialect, items: list[Any], record: Observed) -> list[Result]:
    """What ``window`` should record for the request ``flow_id`` with these ``items`` (``record``: theirs)."""
    held: list[Result] = []
    for call_id in window.held_among(record.plain, flow_id) if record.plain.size else ():
        at = record.plain.get(call_id)
        held += [replace(r, index=at, later=()) for r in results(dialect, [items[at]])
                 if r.call_id == call_id and not r.media]
    return window.worth_keeping(sorted([*record.media, *held], key=lambda r: r.index))
