"""drop-repeated-responses: a Gemini function response sent twice for one call leaves with its first copy only.

Bug — Gemini CLI 0.61.0 resumed (``gemini --resume latest``) after a turn that called tools sends every function
response of that turn twice, each with its image (4 responses for 2 calls), and Gemini answers ``Please ensure that
the number of function response parts is equal to the number of function call parts of the function call turn.`` on
that turn and every later one, whatever the user types (the same text: google-gemini/gemini-cli #6379, #16543,
#21830, "can't recover from"). Seen with the real client in tests/e2e/test_gemini_cli.py; repaired with it in
tests/e2e/test_gemini_cli_llmfix.py (the resumed turn answered, one response per call reaching Gemini).

Repair: among the user contents after a call turn (one, as Gemini wants it, or several, as a client may split them:
NousResearch/hermes-agent PR #22261), a ``functionResponse`` part that repeats an earlier one exactly — the same
id, name and response — and carries the same parts after it (its image, compared by hash) as that one did goes, with
those parts: they are a copy, so nothing is lost. Without ids two equal responses may answer two calls that did the
same (one file read twice), so an id-less copy goes only while those contents hold more responses of its name than
the call turn made calls of that name, the last copies first. A response that differs in anything stays, for
pair-tool-calls to keep as text naming its call. A content that held nothing but copies goes whole. Nothing else
changes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson

from llmfix.repairs.base import Context, Repair
from llmfix.report.changes import Change
from llmfix.wire.base import Media, Wire

NAME = "drop-repeated-responses"


def _sameness(part: Any, attached: list[Any]) -> bytes:
    """What makes two responses copies of each other: the part (its id, name, response) and the media after it."""
    media = [p.media().digest if isinstance(p, Media) else orjson.dumps(p.to_wire()).decode() for p in attached]
    return orjson.dumps([part.to_wire(), media], option=orjson.OPT_SORT_KEYS)


class _Run:
    """The user contents after one call turn: what their responses are, in order, and which are copies."""

    def __init__(self) -> None:
        self.seen: set[bytes] = set()
        self.named: Counter[str] = Counter()  # responses by name
        self.copies: list[tuple[int, int, int, bool, str]] = []  # (content, first part, how many, has an id, name)


def _user(item: Any, ctx: Context) -> bool:
    turns = ctx.dialect.turns
    return turns is not None and isinstance(item, Wire) and turns.role(item) == "user"


def _scan(run: _Run, i: int, parts: list[Any], ctx: Context) -> None:
    turns = ctx.dialect.turns
    assert turns is not None
    k = 0
    while k < len(parts):
        if not turns.is_result(parts[k]):
            k += 1
            continue
        n = 1 + turns.attached(parts, k)
        key = _sameness(parts[k], parts[k + 1 : k + n])
        name = parts[k].name()
        run.named[name] += 1
        if key in run.seen:
            run.copies.append((i, k, n, parts[k].result_id() is not None, name))
        run.seen.add(key)
        k += n


def _gone(run: _Run, made: Counter[str]) -> set[tuple[int, int, int]]:
    """The copies that go: each with an id; id-less ones only while their name has more responses than the call turn
    made calls of it, and from the end: the first responses keep their place, so the n-th response named N still
    answers the n-th call named N."""
    gone = {(i, k, n) for i, k, n, has_id, _ in run.copies if has_id}
    for name in {c[4] for c in run.copies}:
        with_id = sum(1 for c in run.copies if c[3] and c[4] == name)
        spare = max(0, run.named[name] - made[name] - with_id)
        idless = [(i, k, n) for i, k, n, has_id, nm in run.copies if not has_id and nm == name]
        gone |= set(idless[len(idless) - spare :]) if spare else set()
    return gone


def _without(i: int, item: Any, ctx: Context, gone: list[tuple[int, int]]) -> tuple[Any, Change]:
    turns = ctx.dialect.turns
    assert turns is not None
    parts = turns.blocks(item)
    drop = {j for k, n in gone for j in range(k, k + n)}
    kept = [p for j, p in enumerate(parts) if j not in drop]
    where = ", ".join(f"{ctx.dialect.at(i)}.parts[{k}]" + (f"…[{k + n - 1}]" if n > 1 else "") for k, n in gone)
    summary = (f"{len(gone)} {turns.RESULT} part(s) repeating an earlier one after the same call turn exactly (with "
               f"{sum(n - 1 for _, n in gone)} part(s) after them) removed: a copy")
    if not kept:  # it held nothing but copies: it goes whole (Gemini refuses a content without parts)
        summary += "; the content, left with no part, removed"
    return turns.with_blocks(item, kept) if kept else None, Change(NAME, where, summary,
                                                                   [parts[j].to_wire() for j in sorted(drop)])


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    turns = ctx.dialect.turns
    if turns is None:
        return items, []
    made: dict[int, Counter[str]] = {}
    for c in ctx.dialect.tools.calls(items):
        made.setdefault(c.index, Counter())[c.name] += 1
    out: list[Any] = []
    changes: list[Change] = []
    i = 0
    while i < len(items):
        if not _user(items[i], ctx):
            out.append(items[i])
            i += 1
            continue
        end = i
        run = _Run()
        while end < len(items) and _user(items[end], ctx):
            _scan(run, end, turns.blocks(items[end]), ctx)
            end += 1
        gone = _gone(run, made.get(i - 1, Counter()))
        for j in range(i, end):
            here = sorted((k, n) for x, k, n in gone if x == j)
            if not here:
                out.append(items[j])
                continue
            new, change = _without(j, items[j], ctx, here)
            changes.append(change)
            if new is not None:
                out.append(new)
        i = end
    return (out, changes) if changes else (items, [])


def _extend(state: Any, items: list[Any], start: int, ctx: Context) -> Any:
    """Certain when nothing changes in the new items and they do not begin inside a group of user contents: a copy
    there may repeat a response of the prefix, which a check may not read (on a session's next turn the prefix's
    items are not parsed), so that case is left to the repair."""
    if 0 < start < len(items) and _user(items[start], ctx):
        return None
    _out, changes = _apply(items[start:], ctx)
    return None if changes else ()


REPAIR = Repair(NAME, _apply, needles={"gemini": (b"unctionResponse", b"unction_response")}, extend=_extend)
