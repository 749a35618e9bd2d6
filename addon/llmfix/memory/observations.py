"""Which tool results of a request the media window records, from the new items alone on a session's next turn.

The window (:mod:`llmfix.memory.media_window`) records, after llmfix's repairs, every tool result that
carries media and every one overriding an observation it holds (``MediaWindow.worth_keeping`` over
``toolresults.results``). Walking a whole history for that on every turn cost a pass over thousands of
items (issue 15); a turn that appends to a body whose record was kept (:class:`Observed`, in the prefix
cache's :class:`llmfix.repairs.settled.Verdict`) gives the same results from:

- the prefix's results with media, kept with their ``later`` media (those at or after them in the
  request), the appended items' loose media added to it;
- the prefix's results without media whose call id the window holds now, built again from their item
  (their ``later`` left empty: restore-tool-media reads it only from an observation with media);
- the appended items' results, as the whole walk builds them.

The window keeps one observation per call id, the last recorded: the order of these results matters only
for an id seen twice, so a record is kept only while every call id in it is unique (else the next turn
walks the whole history again).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from llmfix.idset import EMPTY, Ids
from llmfix.route import Dialect
from llmfix.wire.toolresults import Result, loose_media, results


@dataclass(frozen=True, slots=True)
class Observed:
    media: tuple[Result, ...]  # the results with media, ``later`` complete
    plain: Ids  # call id → item index of the results without media


def observed(window: Any, flow_id: str, dialect: Dialect, items: list[Any], start: int,
             prior: Observed | None) -> tuple[list[Result], Observed | None]:
    """The results ``window`` should record for ``items``, and the record to continue from on the next turn
    (None when a call id repeats). ``prior``: the record of ``items[:start]`` (None: ``start`` must be 0)."""
    new = [replace(r, index=r.index + start) for r in results(dialect, items[start:])] if start else \
        results(dialect, items)
    if prior is None:
        media: tuple[Result, ...] = ()
        plain = EMPTY
    else:
        extra = tuple(p for _, p in loose_media(dialect, items[start:]))
        media = tuple(replace(r, later=r.later + extra) for r in prior.media) if extra else prior.media
        plain = prior.plain
    held: list[Result] = []
    for call_id in window.held_among(plain, flow_id) if plain.size else ():
        at = plain.get(call_id)
        held += [replace(r, index=at, later=()) for r in results(dialect, [items[at]])
                 if r.call_id == call_id and not r.media]
    seen = window.worth_keeping(sorted([*media, *held], key=lambda r: r.index) + new)
    fresh = {r.call_id: r.index for r in new if not r.media}
    ids = [r.call_id for r in new]
    old = {r.call_id for r in media}
    if len(set(ids)) != len(ids) or any(c in old or c in plain for c in ids):
        return seen, None
    return seen, Observed(media + tuple(r for r in new if r.media), plain.plus(fresh))
