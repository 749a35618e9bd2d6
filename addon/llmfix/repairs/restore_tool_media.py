"""restore-tool-media: put back tool-result media that a gateway dropped, from the client's own request.

Bug — a gateway converting Responses → internal → Responses (axonhub before PR #2117) turned a
``function_call_output`` whose output was ``[input_image]`` into ``"output": ""``, and text + image
into the text alone. The upstream answers 200 and the model describes an image it never saw
(looplj/axonhub PR #2117; docs/evidence.md, "Tool-result media lost on the way"; the client side is Codex's
``view_image``, ``tests/fixtures/codex/turn2_request.json``).

When llmfix sits on both legs — client → gateway and gateway → upstream — it saw the client's request
a moment before the gateway's. A tool result with no media, whose text is empty or the same as the
client's, gets the client's media back in its own dialect's native form (Responses: an array output
with ``input_image``, ``detail`` kept or ``"auto"``; Anthropic: image blocks in the ``tool_result``;
Chat: image parts in the tool message, which hoist-tool-media then moves where the profile wants them).
Only from a correlated request — the latest request that carried that call id, still in flight or
ended within ``llmfix_restore_window`` — so a client that drops old images on purpose never gets them
back, and a request with no such correlation is left alone (:mod:`llmfix.memory.media_window`). Only what is
really missing: a gateway that moved the media out of the result itself (into a user message after the
run, or after each result) did not lose them, so media the request carries at or after the result are
not put back a second time.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from llmfix.idset import EMPTY, Ids
from llmfix.repairs import placeholders
from llmfix.repairs.base import Context, Repair
from llmfix.report.changes import Change
from llmfix.wire.toolresults import Result, holders, loose_media, native, results

NAME = "restore-tool-media"


def _squash(text: str) -> str:
    return "".join(text.split())


def _restorable(r: Result, ctx: Context) -> tuple[list[Any], list[str], tuple[Any, ...]] | None:
    """The native parts to put back for ``r``, the media kinds that could not be carried, and the media the
    client's request had outside tool results at or after that result."""
    if r.media:
        return None
    seen = ctx.window.correlated(r.call_id, ctx.flow_id)
    if seen is None or not seen.result.media:
        return None
    if _squash(r.text) not in ("", _squash(seen.result.text)):
        return None  # not the same result: never guess
    parts: list[Any] = []
    lost: list[str] = []
    for piece in seen.result.pieces:
        part = native(piece, ctx.dialect)
        if part is None:
            lost.append(piece.kind)
        else:
            parts.append(part)
    return parts, lost, seen.result.later


def _key(part: Any) -> tuple[str, str] | None:
    """A media part's identity across dialects: its kind and the hash of its payload (data, URL or file id)."""
    if not hasattr(part, "media"):
        return None
    ref = part.media()
    return ref.kind, ref.digest


def _call_ids(items: list[Any]) -> list[str | None]:
    """The call ids of the tool results, in order, without building anything else (a cheap first check)."""
    return [r.result_id() for _, r in holders(items)]


def _with_parts(item: Any, call_id: str, parts: list[Any]) -> tuple[Any, str, Any]:
    """``item`` with the tool result for ``call_id`` (the item itself, or a result inside it) holding ``parts``;
    where that is, and what it held."""
    if item.is_result():
        return item.holding(parts), f"{item.PARTS}", item.held()
    blocks = item.held()
    k = next(k for k, b in enumerate(blocks) if b.is_result() and b.result_id() == call_id)
    block = blocks[k]
    new = [*blocks[:k], block.holding(parts), *blocks[k + 1 :]]
    return item.holding(new), block.noun(), block.held()


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    window, flow = ctx.window, ctx.flow_id
    if not window or not flow or not any(c and window.correlated(c, flow) for c in _call_ids(items)):
        return items, []
    out = list(items)
    changes: list[Change] = []
    candidates = [(r, found) for r in results(ctx.dialect, items) if (found := _restorable(r, ctx)) is not None]
    if not candidates:
        return items, []
    # A gateway that already moved a result's media out of it (into a user message after the run, as pi-ai,
    # LiteLLM and sub2api do, or after each result, as Droid does) did not lose them: a media part the request
    # carries at or after the result, beyond the copies the client itself had there (a user who pasted the
    # same image), counts as moved, once; only what is left comes back. Matched from the last result back,
    # so the copies a later result's gateway moved after it are not claimed by an earlier result.
    loose = [(i, _key(p)) for i, p in loose_media(items)]
    taken: set[int] = set()
    todo: list[tuple[Result, list[Any], list[str]]] = []
    for r, (parts, lost, client_later) in reversed(candidates):
        own = Counter(_key(p) for p in client_later)
        present: list[int] = []
        for n, part in enumerate(parts):
            key = _key(part)
            spare = [k for k, (i, lk) in enumerate(loose) if key and lk == key and i >= r.index and k not in taken]
            if len(spare) > own[key]:
                taken.add(spare[0])
                present.append(n)
        parts = [p for n, p in enumerate(parts) if n not in present]
        if present and not any(hasattr(p, "media") for p in parts) and not lost:
            continue
        todo.append((r, parts, lost))
    for r, parts, lost in reversed(todo):
        out[r.index], what, before = _with_parts(out[r.index], r.call_id, parts)
        where = f"{ctx.dialect.at(r.index)}{'.' if out[r.index].is_result() else ' '}{what}"
        media = [p for p in parts if hasattr(p, "media")]
        summary = (f"{r.call_id}: {placeholders.count_words(p.media().kind for p in media)} put back from the "
                   "client's request (the gateway dropped them)")
        changes.append(Change(NAME, where, summary, before=before, after=[p.to_wire() for p in parts],
                              dropped=tuple(f"{k} from {r.call_id}: cannot be carried in {ctx.dialect}" for k in lost)))
    return (out, changes) if changes else (items, [])


def _extend(state: Ids | None, items: list[Any], start: int, ctx: Context) -> Ids | None:
    """Certain that nothing comes back: no tool result of the request, old or new, has a correlated
    observation (what :func:`_apply` checks first). The media window changes between turns, so the ids of
    the prefix's results (``state``) are asked again on every turn — those the window holds, at least."""
    ids = (EMPTY if state is None else state).plus(c for c in _call_ids(items[start:]) if c)
    window, flow = ctx.window, ctx.flow_id
    if window and flow and any(window.correlated(c, flow) for c in window.held_among(ids, flow)):
        return None
    return ids


REPAIR = Repair(NAME, _apply, extend=_extend, brings_media=True, needles=lambda d: d.tools.ANSWERS)
