"""pair-tool-calls: every tool call answered once, every answer declared, ids unique — in all three dialects.

Bug — every agent after an interrupted tool call, a crash, a resume or a compaction: the history
holds a call without its result or a result without its call, the strict upstream answers 400, and the
client replays the same history on every later turn. Claude Code (anthropics/claude-code #473, #1894,
#3639: ``messages.N: `tool_use` ids were found without `tool_result` blocks immediately after …``, and
``unexpected `tool_use_id` found in `tool_result` blocks`` after compaction), Codex (openai/codex: Esc
during a tool call, then ``No tool output found for function call …`` on every command), Responses
clients (``No tool call found for function call output with call_id …``), OpenAI-compatible Chat
upstreams (``An assistant message with 'tool_calls' must be followed by tool messages responding to each
'tool_call_id'…``, qwen-code #199), opencode #5750 / #10616, goose #2951, copilot-cli #3183, pi #4189.
A second bug — opencode with Mistral-like model ids cuts tool-call ids to 9 alphanumerics, so two parallel
calls are both ``callmock0`` (capture ``tests/fixtures/opencode/chat__mistral-medium-latest__two_png__turn2.json``);
OpenAI answers ``Invalid parameter: Duplicate value for 'tool_call_id' …`` (agno-agi/agno #5116), and
empty Responses ``call_id``s are rejected likewise. Texts: docs/evidence.md, "Pairing and ordering texts".

Written once over the dialect-neutral view of :mod:`llmfix.wire.toolpairs`, in three passes:

1. **Unique ids.** The k-th declaration of an id belongs to the k-th result with it, counted within the
   turn (the assistant message and its results; a Responses block of calls and the outputs after it);
   every declaration after the first (and every empty id) gets a new id in the same format — same
   length, letters and digits where it had them, so 9 alphanumerics stay 9 alphanumerics — and so
   does its result.
2. **Results nobody declared** (Responses and Anthropic; Chat orphans are untangle-tool-run's, which runs
   before): the declaration comes back from memory (the streamed answer or an earlier request that
   issued the call, with its name and arguments) right before the result (Responses) or in the
   assistant message right before it (Anthropic); with no memory of it, the result's content is kept in
   a user message (Anthropic: text blocks in its own user message) that names the call id. A result
   beyond the number of declarations of its id (Chat included) is handled the same way. Not checked
   when the calls may live on the server: a Responses request with ``previous_response_id`` or
   ``conversation``, or holding ``item_reference`` items.
3. **Answers where the dialect wants them.** A declared call with no result gets one that says plainly
   that no result was recorded — never a fake success — placed in call order: Chat, a ``role:"tool"``
   message in the run right after the declaring assistant message; Responses, an output after the run
   of call/output items the call belongs to; Anthropic, an ``is_error: true`` ``tool_result`` among the
   results at the start of the NEXT user message (a new user message if there is none). Anthropic also:
   ``tool_result`` blocks first in their user message, text after, and all results of one assistant turn
   in the single next user message.

Pass 2 (results nobody declared) lives in :mod:`llmfix.repairs.pair_orphans`.

Gemini pairs by count and place (ids are optional there): after a model content with N calls, one user content with
N responses in call order, media right after the response they came with (google-gemini/gemini-cli #6379,
#16543). Not for Gemini's ``countTokens``: Gemini CLI counts a content holding only function responses there
(tests/fixtures/gemini-cli/count_tokens_request.json), which that method takes.

Valid histories, server-side tool blocks and ``item_reference`` items are left as they are, byte for
byte. Deterministic, idempotent and prefix-stable: a result placed for turn N is placed the same way on
every later turn, so provider prompt caches keep hitting.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from llmfix.dialects.base import Pairing
from llmfix.repairs import pair_orphans
from llmfix.repairs.base import Context, Repair
from llmfix.repairs.pair_orphans import orphans as _orphans
from llmfix.report.changes import Change
from llmfix.wire import paired
from llmfix.wire import toolpairs as tp

NAME = pair_orphans.NAME
_ORDINAL = {1: "2nd", 2: "3rd"}


def missing_text(call: tp.Call) -> str:
    name = f" ({call.name})" if call.name else ""
    return (f"[No result was recorded for tool call {call.call_id}{name}: the run was interrupted or the result "
            "was lost before it reached this conversation, so whether the call ran and what it returned is "
            "unknown. Call the tool again if its result is needed.]")


# --- 1. unique ids --------------------------------------------------------------------------------------------


def _unique(pairs: tp.Pairs, ctx: Context) -> tuple[list[Any], list[Change]]:
    """The first declaration of an id keeps it; each later one (and every empty id) gets a fresh id, and so
    does the j-th answer with that id among its own turn's answers, for the j-th such declaration there."""
    d, items = ctx.dialect, pairs.items
    decls = pairs.calls
    counts = Counter(c.call_id for c in decls)
    if all(c.call_id and counts[c.call_id] == 1 for c in decls):
        return items, []
    taken = {c.call_id for c in decls} | {a.call_id for a in pairs.answers}
    first: set[str] = set()
    seen: Counter[str] = Counter()
    call_ids: dict[tp.Key, str] = {}
    answer_ids: dict[tp.Key, str] = {}
    changes: list[tuple[str, int, str, list[str]]] = []  # (old id, k, new id, locations)
    for calls, answers in pairs.runs():
        finals: dict[str, list[str]] = {}
        where: dict[str, list[str]] = {}
        for c in calls:
            k = seen[c.call_id]
            seen[c.call_id] += 1
            if c.call_id and c.call_id not in first:
                first.add(c.call_id)
                finals.setdefault(c.call_id, []).append(c.call_id)
                continue
            new = tp.fresh_id(c.call_id, k, taken, d.tools.FRESH_PREFIX)
            taken.add(new)
            call_ids[c.key] = new
            finals.setdefault(c.call_id, []).append(new)
            where[new] = [d.tools.location(c.index, c.sub)]
            changes.append((c.call_id, k, new, where[new]))
        nth: Counter[str] = Counter()
        for a in answers:
            j = nth[a.call_id]
            nth[a.call_id] += 1
            new_ids = finals.get(a.call_id, [])
            if j < len(new_ids) and new_ids[j] != a.call_id:
                answer_ids[a.key] = new_ids[j]
                where[new_ids[j]].append(d.tools.location(a.index, a.sub))
    out = d.tools.rename(items, call_ids, answer_ids)
    records = []
    for old, k, new, locations in changes:
        what = "empty call id" if not old else f"duplicate call id {old}"
        nth_decl = "" if not old else f"{_ORDINAL.get(k, f'{k + 1}th')} declaration "
        has = "and its result " if len(locations) > 1 else "(no result with that id in its turn) "
        records.append(Change(NAME, ", ".join(locations), f"{what}: {nth_decl}{has}renamed to {new}", old, new))
    return out, records


# --- 3. answers where the dialect wants them -------------------------------------------------------------------


def _merge(present: list[Any], pos_of: Any, missing: list[tp.Call], build: Any, order: dict[str, int]) -> list[Any]:
    """``present`` answers in their order, each missing one inserted before the first answer of a later call."""
    pending = sorted(missing, key=lambda c: order[c.call_id])
    out = []
    for x in present:
        p = order.get(pos_of(x), len(order))
        while pending and order[pending[0].call_id] < p:
            out.append(build(pending.pop(0)))
        out.append(x)
    return out + [build(c) for c in pending]


def _answer(pairs: tp.Pairs, ctx: Context) -> tuple[list[Any], list[Change]]:
    d, items = ctx.dialect, pairs.items
    pairing = d.tools.PAIRING
    if pairing is Pairing.NEXT_TURN:
        return _next_turn(pairs, ctx)
    inserts: dict[int, list[tp.Call]] = {}  # by id anywhere later: after item index → missing calls
    replace: dict[int, tuple[int, list[tp.Call]]] = {}  # in a run after the call: anchor → (run end, missing calls)
    answered = {a.call_id for a in pairs.answers}
    by_id = pairing is Pairing.LATER_BY_ID
    if by_id and all(c.call_id in answered for c in pairs.calls):
        return items, []  # paired by id: every call answered somewhere, nothing to place
    for g in pairs.groups:
        have = {a.call_id for a in g.answers}
        missing = [c for c in g.calls if c.call_id not in have]
        if by_id:
            missing = [c for c in missing if c.call_id not in answered]  # an output before its call: left as is
            if missing:
                inserts.setdefault(g.end, []).extend(missing)
        elif missing:
            replace[g.anchor] = (g.end, missing)
    if not inserts and not replace:
        return items, []
    out: list[Any] = []
    changes = []
    key = d.shape.key
    i = 0
    while i < len(items):
        if i in replace:
            end, missing = replace[i]
            order = {c.call_id: n for n, c in enumerate(d.tools.calls([items[i]]))}
            zone = _merge(items[i + 1 : end + 1], lambda m: m.result_id(), missing,
                          lambda c: d.tools.missing_result(c, missing_text(c)), order)
            out += [items[i], *zone]
            changes.append(Change(NAME, f"{key}[{i + 1}:{end + 1}]", f"tool call(s) {tp.ids(missing)} of "
                                  f"{d.at(i)} had no result: added a tool message saying none was recorded",
                                  None, [z.to_wire() for z in zone if any(z.result_id() == c.call_id
                                                                              for c in missing)]))
            i = end + 1
            continue
        out.append(items[i])
        if i in inserts:
            missing = sorted(inserts[i], key=lambda c: c.index)
            added = [d.tools.missing_result(c, missing_text(c)) for c in missing]
            out += added
            changes.append(Change(NAME, f"{d.at(i)}+{len(added)}", f"tool call(s) {tp.ids(missing)} had no "
                                  f"output: added {len(added)} output(s) saying none was recorded, after {d.at(i)}",
                                  None, [a.to_wire() for a in added]))
        i += 1
    return out, changes


@dataclass(frozen=True, slots=True)
class _Unit:
    """A block of a turn and the blocks that came with it (a result's attached media): what moves together."""

    blocks: tuple[Any, ...]
    call_id: str | None  # the call a result answers ("" none); None: not a result


def _units(turns: Any, blocks: list[Any], ids: dict[int, str]) -> list[tuple[int, _Unit]]:
    """(index of its first block, unit) of ``blocks``; ``ids``: block index → the call id of each result."""
    out = []
    k = 0
    while k < len(blocks):
        if turns.is_result(blocks[k]):
            n = 1 + turns.attached(blocks, k)
            out.append((k, _Unit(tuple(blocks[k : k + n]), ids.get(k, ""))))
            k += n
        else:
            out.append((k, _Unit((blocks[k],), None)))
            k += 1
    return out


def _next_turn(pairs: tp.Pairs, ctx: Context) -> tuple[list[Any], list[Change]]:
    """Results in the next user turn: every result of a turn there, first and in call order, one added for each
    call with none, results found in a later turn moved back (with what came with them), a turn left empty
    removed."""
    d, items = ctx.dialect, pairs.items
    turns = d.turns
    assert turns is not None
    ids: dict[int, dict[int, str]] = {}
    for x in pairs.answers:
        ids.setdefault(x.index, {})[x.sub if x.sub is not None else 0] = x.call_id
    decl_at: dict[str, list[int]] = {}
    for c in pairs.calls:
        decl_at.setdefault(c.call_id, []).append(c.index)
    # where each result belongs: the model turn right before its message, else the first that declares it
    home: dict[tp.Key, int] = {}
    for x in pairs.answers:
        at = decl_at.get(x.call_id, [])
        if x.index - 1 in at or not at:
            continue
        earlier = [i for i in at if i < x.index]
        home[x.key] = earlier[-1] if earlier else at[0]
    units_at = {j: dict(_units(turns, turns.blocks(items[j]), ids.get(j, {}))) for j, _ in home}
    moved_in: dict[int, list[tuple[int, _Unit]]] = {}
    for (j, k), h in sorted(home.items()):
        moved_in.setdefault(h, []).append((j, units_at[j][k]))
    lost: dict[int, set[int]] = {}
    for j, k in home:
        lost.setdefault(j, set()).add(k)
    new_at: dict[int, Any] = {}  # message index → its new message (None: dropped)
    added_after: dict[int, Any] = {}
    changes: list[Change] = []
    for g in pairs.groups:
        a = g.anchor
        nxt = items[a + 1] if a + 1 < len(items) else None
        is_user = nxt is not None and turns.role(nxt) == "user"
        units = _units(turns, turns.blocks(nxt), ids.get(a + 1, {})) if is_user else []
        gone = lost.get(a + 1, set()) if is_user else set()
        mine = {c.call_id for c in g.calls}
        kept = [(k, u) for k, u in units if k not in gone]
        results = [u for _, u in kept if u.call_id in mine]
        others = [u for _, u in kept if u.call_id not in mine]
        incoming = [u for _, u in moved_in.get(a, [])]
        have = {u.call_id for u in results + incoming}
        missing = [c for c in g.calls if c.call_id not in have]
        order = {c.call_id: n for n, c in enumerate(g.calls)}
        present = results + incoming
        if incoming:  # results gathered from several messages go in call order
            present.sort(key=lambda u: order.get(u.call_id, len(order)))
        lead = _merge(present, lambda u: u.call_id, missing,
                      lambda c: _Unit((d.tools.missing_result(c, missing_text(c)),), c.call_id), order)
        content = [b for u in (*lead, *others) for b in u.blocks]
        first_other = next((n for n, (_, u) in enumerate(kept) if u.call_id is None), len(kept))
        out_of_place = any(u.call_id in mine for _, u in kept[first_other:])
        if not (missing or incoming or out_of_place or gone):
            continue
        if not is_user:
            added_after[a] = turns.user_turn(content)
        else:
            new_at[a + 1] = turns.with_blocks(nxt, content)
        notes = []
        if missing:
            notes.append(f"{turns.CALL} {tp.ids(missing)} had no {turns.RESULT}: added {turns.MISSING} saying "
                         "none was recorded")
        if incoming:
            src = ", ".join(d.at(j) for j, _ in moved_in[a])
            notes.append(f"{turns.RESULT} {', '.join(u.call_id or '(no id)' for u in incoming)} moved here from {src}, "
                         "with the other results of this turn")
        if out_of_place:
            notes.append(f"{turns.RESULT} blocks moved before the other content")
        where = d.at(a + 1) if is_user else f"{d.at(a)}+1 (new user message)"
        changes.append(Change(NAME, where, "; ".join(notes) or f"{turns.RESULT} blocks regrouped",
                              nxt.to_wire() if is_user else None, [b.to_wire() for b in content]))
    for j, ks in lost.items():
        if j in new_at:
            continue
        rest = [b for k, u in _units(turns, turns.blocks(items[j]), ids.get(j, {})) if k not in ks for b in u.blocks]
        new_at[j] = turns.with_blocks(items[j], rest) if rest else None
        if not rest:
            changes.append(Change(NAME, d.at(j), "user message held only tool results of an earlier "
                                  "turn; they moved there, the empty message is removed", items[j].to_wire(), None))
    out: list[Any] = []
    for i, m in enumerate(items):
        m = new_at.get(i, m)
        if m is not None:
            out.append(m)
        if i in added_after:
            out.append(added_after[i])
    return out, changes


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if ctx.counts_only or paired.surely_paired(ctx.dialect, items):
        return items, []
    return full(items, ctx)


def _extend(state: paired.Settled | None, items: list[Any], start: int, ctx: Context) -> paired.Settled | None:
    """Certain that nothing needs pairing: :func:`llmfix.wire.paired.settled` over the new items."""
    if ctx.counts_only:
        return state if state is not None else paired.settled(ctx.dialect, [], 0, None)
    return paired.settled(ctx.dialect, items, start, state)


def full(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    """The three passes, without the fast path (tests check the fast path never skips a change)."""
    changes: list[Change] = []
    pairs = tp.Pairs(ctx.dialect, items)
    for step in (_unique, _orphans, _answer):
        out, more = step(pairs, ctx)
        changes += more
        if out is not pairs.items:
            pairs = tp.Pairs(ctx.dialect, out)
    return pairs.items, changes


# these shapes are invalid at every upstream: on for every profile, spec included
REPAIR = Repair(NAME, _apply, extend=_extend, needles=lambda d: d.tools.PAIRS)
