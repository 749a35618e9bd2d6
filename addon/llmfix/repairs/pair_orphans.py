"""pair-tool-calls, pass 2: results whose call is declared nowhere (Responses, Anthropic), and second results.

Part of :mod:`llmfix.repairs.pair_tool_calls` (a broken tool history after an interrupted call, a crash, a resume
or a compaction; its docstring has the clients and the evidence): a result whose call is gone gets its declaration
back from llmfix's memory when llmfix saw the call, else its content is kept in a user message naming the call id;
a second result for an answered call moves to a user message after the run. Skipped for requests holding
server-side state (``previous_response_id``, ``conversation``, ``item_reference``), whose outputs may answer calls
held upstream.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from llmfix.dialects.base import Pairing
from llmfix.repairs import placeholders
from llmfix.repairs.base import Context
from llmfix.repairs.media_triage import kind, triage
from llmfix.repairs.untangle_tool_run import orphan_label
from llmfix.report.changes import Change
from llmfix.wire import toolpairs as tp
from llmfix.wire.base import Media, Wire

NAME = "pair-tool-calls"  # the repair this pass belongs to: its changes carry that name


def lookup(ctx: Context, call_ids: Iterable[str]) -> dict[str, Any]:
    wanted = [c for c in dict.fromkeys(call_ids) if c]
    if not wanted or ctx.memory is None:
        return {}
    return dict(ctx.memory.lookup(wanted))


# --- 2. results nobody declared ----------------------------------------------------------------------------------


def _server_state(items: list[Any], ctx: Context) -> bool:
    return ctx.server_state or ctx.dialect.tools.refers_upstream(items)


def _strays(pairs: tp.Pairs) -> list[tp.Answer]:
    """Answers with no declaration of their own: the id is declared nowhere, or fewer times than answered."""
    declared = Counter(c.call_id for c in pairs.calls)
    seen: Counter[str] = Counter()
    out = []
    for a in pairs.answers:
        seen[a.call_id] += 1
        if seen[a.call_id] > declared[a.call_id]:
            out.append(a)
    return out


def orphans(pairs: tp.Pairs, ctx: Context) -> tuple[list[Any], list[Change]]:
    items = pairs.items
    strays = _strays(pairs)
    if not strays or _server_state(items, ctx):
        return items, []
    declared = {c.call_id for c in pairs.calls}
    pairing = ctx.dialect.tools.PAIRING
    if pairing is Pairing.RUN_AFTER:  # a result declared nowhere is untangle-tool-run's, which ran before
        extra = [a for a in strays if a.call_id in declared]
        return _extra(items, extra, ctx) if extra else (items, [])
    known = lookup(ctx, (a.call_id for a in strays if a.call_id not in declared))
    if pairing is Pairing.LATER_BY_ID:
        return _items_orphans(items, strays, known, ctx)
    return _turn_orphans(items, strays, known, ctx)


def _gated(parts: list[Any], ctx: Context, call_id: str | None) -> tuple[list[Any], tuple[str, ...]]:
    """``parts`` for a user message: media the model cannot take become a placeholder (hoist's triage); the drops."""
    media = [p for p in parts if isinstance(p, Media)]
    _, lost = triage(media, ctx, call_id)
    if not lost:
        return parts, ()
    lost_ids = {id(p) for p, _ in lost}
    notes = [placeholders.omitted([kind(p) for p, r in lost if r == reason], reason)
             for reason in dict.fromkeys(r for _, r in lost)]
    kept = [p for p in parts if id(p) not in lost_ids] + [ctx.dialect.media.text_part(n) for n in notes]
    return kept, tuple(f"{p.media()} from {call_id}: {r}" for p, r in lost)


def _as_user(result: Any, label: str, ctx: Context) -> tuple[Any, tuple[str, ...]]:
    """A result item as a user message after ``label``, keeping its content (media the model cannot take gated)."""
    content = result.held()
    dropped: tuple[str, ...] = ()
    if isinstance(content, list):
        parts, dropped = _gated(list(content), ctx, result.result_id())
        result = result.holding(parts)
    return ctx.dialect.tools.result_as_user(result, label), dropped


def _extra(items: list[Any], extra: list[tp.Answer], ctx: Context) -> tuple[list[Any], list[Change]]:
    """Result messages beyond the declarations of their id: user messages after their run, naming the call."""
    at = {a.index for a in extra}
    out: list[Any] = []
    held: list[Any] = []
    changes = []
    for i, m in enumerate(items):
        if i in at:
            call_id = m.result_id()
            user, dropped = _as_user(m, f"[Another result of tool call {call_id}, which already has one]", ctx)
            held.append(user)
            changes.append(Change(NAME, ctx.dialect.at(i), f"{m.noun()} answers a call already answered; kept as a "
                                  "user message after the tool run, naming the call", m.to_wire(), user.to_wire(),
                                  dropped))
            continue
        if held and not (isinstance(m, Wire) and m.is_result()):
            out += held
            held = []
        out.append(m)
    out += held
    return out, changes


def _items_orphans(items: list[Any], strays: list[tp.Answer], known: dict[str, Any], ctx: Context
                   ) -> tuple[list[Any], list[Change]]:
    """Results that are items of their own and pair by id anywhere later: the declaration right before the
    result, or the result as a user message naming the call."""
    d = ctx.dialect
    at = {a.index for a in strays}
    out: list[Any] = []
    changes = []
    restored = set()
    for i, m in enumerate(items):
        if i not in at:
            out.append(m)
            continue
        call_id = m.result_id()
        call = known.get(call_id or "")
        if call is not None and call_id not in restored:
            restored.add(call_id)
            decl = d.tools.declaration(call, m.type)
            out += [decl, m]
            changes.append(Change(NAME, d.at(i), f"{m.noun()}: no call declared it; restored "
                                  f"{decl.type} {call.name} from memory right before it", None, decl.to_wire()))
        else:
            user, dropped = _as_user(m, orphan_label(call_id), ctx)
            out.append(user)
            changes.append(Change(NAME, d.at(i), f"{m.type} {call_id or '(no call id)'}: no call declared "
                                  "it and none in memory; kept as a user message naming the call",
                                  m.to_wire(), user.to_wire(), dropped))
    return out, changes


def _turn_orphans(items: list[Any], strays: list[tp.Answer], known: dict[str, Any], ctx: Context
                  ) -> tuple[list[Any], list[Change]]:
    """Results in a user turn: the declaration back in the model turn right before, or the result's content kept
    as plain blocks naming the call."""
    d = ctx.dialect
    turns = d.turns
    assert turns is not None
    out = list(items)
    changes = []
    by_message: dict[int, list[tp.Answer]] = {}
    for a in strays:
        by_message.setdefault(a.index, []).append(a)
    for j, found in by_message.items():
        prev = out[j - 1] if j > 0 else None
        can_declare = prev is not None and turns.role(prev) == "assistant"
        restore = [a for a in found if can_declare and a.call_id in known]
        restore = [a for a in restore if [b.call_id for b in restore].count(a.call_id) == 1]
        if restore:
            uses = [d.tools.declaration(known[a.call_id]) for a in restore]
            out[j - 1] = turns.with_blocks(prev, [*turns.blocks(prev), *uses])
            changes.append(Change(NAME, f"{d.at(j - 1)}.{prev.PARTS}", f"{turns.RESULT} {tp.ids(restore)} in "
                                  f"{d.at(j)}: no {turns.CALL} declared it; restored "
                                  f"{', '.join(u.name for u in uses)} from memory in the assistant message before",
                                  None, [u.to_wire() for u in uses]))
        convert = {a.sub: a.call_id for a in found if a not in restore}
        if not convert:
            continue
        msg = out[j]
        blocks: list[Any] = []
        for k, b in enumerate(turns.blocks(msg)):
            if k in convert:
                new = turns.result_as_blocks(b, orphan_label(convert[k]))
                blocks += new
                changes.append(Change(NAME, d.tools.location(j, k), f"{turns.RESULT} {convert[k] or '(no id)'}: no "
                                      f"{turns.CALL} declared it and none in memory; kept as text naming the call",
                                      b.to_wire(), [x.to_wire() for x in new]))
            else:
                blocks.append(b)
        out[j] = turns.with_blocks(msg, blocks)
    return out, changes
