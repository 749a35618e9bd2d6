"""Whether a history needs no pairing, in one cheap pass that carries over from one turn to the next.

pair-tool-calls (:mod:`llmfix.repairs.pair_tool_calls`) builds the view of :mod:`llmfix.wire.toolpairs` only
when this pass is not certain; its ``extend`` check continues the pass over a session's new items
(:mod:`llmfix.repairs.settled`). The rules are the repair's: tests/property/test_pairing.py holds this pass
to its full passes, tests/property/test_settled.py to them over any split of a conversation.
"""

from __future__ import annotations

from typing import Any

from llmfix.dialects.base import Dialect
from llmfix.idset import EMPTY

type Settled = tuple[Any, Any]
"""What :func:`settled` carries from a paired prefix to its append: the ids declared and the ids answered
(two :class:`llmfix.idset.Ids`)."""


def surely_paired(dialect: Dialect, items: list[Any]) -> bool:
    """True when one cheap pass shows nothing to pair (see :func:`settled`); False means "look closer".

    The common case — a valid agent history of hundreds of items — costs one isinstance pass, not the view."""
    return settled(dialect, items, 0, None) is not None


def settled(dialect: Dialect, items: list[Any], start: int, state: Settled | None) -> Settled | None:
    """The declared and answered ids of ``items`` when one pass over ``items[start:]`` shows nothing to pair
    in the whole list, given ``state``, what this returned for ``items[:start]`` (None when ``start`` is 0);
    None means "look closer" (the full view decides).

    Nothing to pair, as each dialect's ``tools.settled`` checks it: every id non-empty and declared once,
    answered at most once, and every call answered where the dialect wants its result. Each rule looks only at
    an item and its neighbours, and a paired prefix never ends in an open turn (a call is answered inside the
    prefix), so a prefix's answer holds for every append of it."""
    declared, answered = state if state is not None else (EMPTY, EMPTY)
    got = dialect.tools.settled(items, start, declared, answered)
    if got is None:
        return None
    new_declared, new_answered = got
    return declared.plus(new_declared), answered.plus(new_answered)
