"""drop-repeated-responses: a Gemini function response sent twice for one call leaves with its first copy only.

Bug — Gemini CLI 0.61.0 resumed (``gemini --resume latest``) after a turn that called tools sends every function
response of that turn twice, each with its image (4 responses for 2 calls), and Gemini answers ``Please ensure that
the number of function response parts is equal to the number of function call parts of the function call turn.`` on
that turn and every later one, whatever the user types (the same text: google-gemini/gemini-cli #6379, #16543,
#21830, "can't recover from"). Seen with the real client in tests/e2e/test_gemini_cli.py; repaired with it in
tests/e2e/test_gemini_cli_llmfix.py (the resumed turn answered, one response per call reaching Gemini).

Repair: in a user content, a ``functionResponse`` part that repeats an earlier one of the same content exactly — the
same id, name and response — and carries the same parts after it (its image, compared by hash) as that one did goes,
with those parts: they are a copy, so nothing is lost. Without ids two equal responses may answer two calls that did
the same (one file read twice), so an id-less copy goes only while the content holds more responses than the call
turn before it made calls, the last copies first. A response that differs in anything stays, for pair-tool-calls
to keep as text naming its call. Nothing else changes.
"""

from __future__ import annotations

from typing import Any

import orjson

from llmfix.repairs import settled
from llmfix.repairs.base import Context, Repair
from llmfix.report.changes import Change
from llmfix.wire.base import Media, Wire

NAME = "drop-repeated-responses"


def _sameness(part: Any, attached: list[Any]) -> bytes:
    """What makes two responses copies of each other: the part (its id, name, response) and the media after it."""
    media = [p.media().digest if isinstance(p, Media) else orjson.dumps(p.to_wire()).decode() for p in attached]
    return orjson.dumps([part.to_wire(), media], option=orjson.OPT_SORT_KEYS)


def _item(i: int, item: Any, ctx: Context, calls_before: int) -> tuple[Any, Change | None]:
    turns = ctx.dialect.turns
    if turns is None or not isinstance(item, Wire) or turns.role(item) != "user":
        return item, None
    parts = turns.blocks(item)
    excess = sum(1 for p in parts if turns.is_result(p)) - calls_before
    seen: set[bytes] = set()
    copies: list[tuple[int, int, bool]] = []  # (first part, how many, whether it has an id)
    k = 0
    while k < len(parts):
        if not turns.is_result(parts[k]):
            k += 1
            continue
        n = 1 + turns.attached(parts, k)
        key = _sameness(parts[k], parts[k + 1 : k + n])
        if key in seen:
            copies.append((k, n, parts[k].result_id() is not None))
        seen.add(key)
        k += n
    # an id-less copy goes only while there are more responses than calls, and from the end: the first responses
    # keep their place, so the n-th response named N still answers the n-th call named N
    spare = max(0, excess - sum(1 for c in copies if c[2]))
    idless = [c for c in copies if not c[2]]
    late = set(idless[len(idless) - spare:]) if spare else set()
    gone = [(k, n) for k, n, has_id in copies if has_id or (k, n, has_id) in late]
    if not gone:
        return item, None
    drop = {j for k, n in gone for j in range(k, k + n)}
    kept = [p for j, p in enumerate(parts) if j not in drop]
    where = ", ".join(f"{ctx.dialect.at(i)}.parts[{k}]" + (f"…[{k + n - 1}]" if n > 1 else "") for k, n in gone)
    summary = (f"{len(gone)} {turns.RESULT} part(s) repeating an earlier one of this content exactly (with "
               f"{sum(n - 1 for _, n in gone)} part(s) after them) removed: a copy")
    return turns.with_blocks(item, kept), Change(NAME, where, summary, [parts[j].to_wire() for j in sorted(drop)])


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if ctx.dialect.turns is None:
        return items, []
    calls: dict[int, int] = {}
    for c in ctx.dialect.tools.calls(items):
        calls[c.index] = calls.get(c.index, 0) + 1
    out: list[Any] = []
    changes: list[Change] = []
    for i, item in enumerate(items):
        new, change = _item(i, item, ctx, calls.get(i - 1, 0))
        out.append(new)
        if change is not None:
            changes.append(change)
    return (out, changes) if changes else (items, [])


REPAIR = Repair(NAME, _apply, needles={"gemini": (b"unctionResponse", b"unction_response")},
                extend=settled.local(_apply))
