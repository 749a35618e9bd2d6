"""pair-reasoning-items: each Responses reasoning item directly before the item it produced; where the reasoning
item is gone, the ``id`` removed from the items that needed it.

The bug. A reasoning model answers e.g. ``[reasoning rs_1, function_call fc_1]``. OpenAI checks the replay: an
item sent with its ``id`` must come with the reasoning item that preceded it when it was issued (400 ``Item
'fc_…' of type 'function_call' was provided without its required 'reasoning' item: 'rs_…'.``, the same for
``msg_…`` messages), and a reasoning item must be directly followed by the item it produced (400 ``Item 'rs_…' of
type 'reasoning' was provided without its required following item.``). Clients that drop reasoning items but keep
the ids (Mastra with o3 / gpt-5, agency-swarm, Cline with gpt-5.5, Continue), that move them (Continue put
function calls between a reasoning item and its message), or that drop the item a reasoning item produced
(Vercel AI SDK, openai-agents, OpenHands sending a message without its ``id``) get that 400 on that turn and on
every later one (mastra-ai/mastra #8738, cline/cline #12242, continuedev/continue #11994, vercel/ai #7099;
docs/evidence.md, "Reasoning and thinking replay").

What it does, judged by what the upstream issued (``dialects/responses/learn.py``: which reasoning item each item
followed, which item followed each reasoning item) and by the upstream's own rejection, which names both ids
(``retry/rejections.py`` teaches it as the same kind of record):

- a reasoning item not directly before the item it produced: put back there — the produced item moves up to it
  when only items of the same answer (or tool outputs) sit between them, else the reasoning item moves down to
  it. Nothing else moves.
- an item whose reasoning item is not in the request: its ``id`` is removed; its ``call_id``, name, arguments
  and content stay, so pairing by ``call_id`` is untouched. An item without an id needs no reasoning item
  (pi-ai drops the ``fc_`` id for this very reason: ``openai-responses-shared.ts`` in badlogic/pi-mono).
- a reasoning item whose produced item is not in the request (or that the upstream rejected for lacking it): the
  reasoning item is dropped (its hidden reasoning cannot be replayed without the item it led to), and the ids of
  the items that needed it are removed; without a memory of those, the ids of its turn (the calls and messages
  around it, up to the nearest input message or other reasoning item: where a client that moved it put it).

With nothing in memory and no rejection it changes nothing: it never guesses which item a reasoning item led to
and never invents one. With ``previous_response_id`` / ``conversation`` the input carries only what the server
does not hold yet, so a reasoning item missing from it may well be in the server's chain, and an item id the
server already holds would be a duplicate anyway (``Duplicate item found with id …``, openai-agents-python #1789):
there it acts only on what the upstream's rejection said. Valid histories — Codex's own turns, reasoning items
present and in order — leave byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmfix.dialects.responses import learn as lr
from llmfix.idset import EMPTY, Ids
from llmfix.repairs import reasoning_items as ri
from llmfix.repairs.base import Context
from llmfix.report.changes import Change

NAME = "pair-reasoning-items"
Order = tuple[str | None, str | None, bool]  # (after, next, rejected), dialects/responses/learn.read_order


def _orders(ctx: Context, keys: set[str]) -> dict[str, Order]:
    """The order records of ``keys`` this request may act on: with server state, only taught ones."""
    server = ctx.server_state
    out: dict[str, Order] = {}
    for key, record in ri.recall(ctx, lr.ORDER, keys).items():
        order = lr.read_order(record.value)
        if order[2] or not server:
            out[key] = order
    return out


@dataclass
class _Plan:
    dropped: dict[int, str]  # index of a reasoning item → why it goes
    stripped: dict[int, str]  # index of an item → the name of the reasoning item it needed


def _plan(items: list[Any], names: dict[int, str], ids: dict[int, str], orders: dict[str, Order]) -> _Plan:
    """Which reasoning items go and which ids are removed: repeated until nothing more follows (removing an id
    can leave a reasoning item without the item it produced, dropping one can leave an item without it)."""
    plan = _Plan({}, {})
    changed = True
    while changed:
        changed = False
        live = {x for k, x in ids.items() if k not in plan.dropped and k not in plan.stripped}
        for k, r in names.items():
            if k in plan.dropped or r not in orders:
                continue
            _after, nxt, rejected = orders[r]
            if nxt and nxt not in live:
                plan.dropped[k] = f"the item it produced, {nxt}, is not in the request"
            elif rejected and not nxt:
                plan.dropped[k] = "the upstream rejected it for lacking the item it produced"
                for j in ri.turn(items, k):  # its turn: the items llmfix has no record of may have needed it
                    if (x := ids.get(j)) is not None and x not in orders and j not in plan.stripped:
                        plan.stripped[j] = r
            else:
                continue
            changed = True
        present = {r for k, r in names.items() if k not in plan.dropped}
        for k, x in ids.items():
            if k in plan.stripped or k in names or ri.is_reasoning(items[k]):
                continue
            after = orders.get(x, (None, None, False))[0]
            if after and after not in present:
                plan.stripped[k] = after
                changed = True
    return plan


def _own(item: Any, r: str, orders: dict[str, Order]) -> bool:
    """Whether ``item`` belongs to the answer of reasoning item ``r`` (or is a tool output)."""
    x = ri.item_id(item)
    return ri.is_tool_output(item) or (x is not None and orders.get(x, (None, None, False))[0] == r)


def _moves(out: list[tuple[int, Any]], names: dict[int, str], orders: dict[str, Order]) -> list[Change]:
    """Put each remaining reasoning item directly before the item it produced, in place in ``out``."""
    changes: list[Change] = []
    for k in sorted(names):
        r = names[k]
        nxt = orders.get(r, (None, None, False))[1]
        p = next((t for t, (orig, _) in enumerate(out) if orig == k), None)
        if p is None or not nxt:
            continue
        q = next((t for t, (_, item) in enumerate(out) if ri.item_id(item) == nxt and t != p), None)
        if q is None or q == p + 1:
            continue
        f_orig, f_item = out[q]
        if q > p and all(_own(item, r, orders) for _, item in out[p + 1 : q]):
            out.insert(p + 1, out.pop(q))
            changes.append(Change(NAME, f"input[{f_orig}]", f"{ri.kind(f_item)} {nxt} moved up to directly after "
                                  f"its reasoning item {r} (input[{k}]), as the upstream issued them", None, None))
        else:
            moved = out.pop(p)
            q = next(t for t, (orig, _) in enumerate(out) if orig == f_orig)
            out.insert(q, moved)
            changes.append(Change(NAME, f"input[{k}]", f"reasoning item {r} moved to directly before {nxt} "
                                  f"(input[{f_orig}]), the item it produced", None, None))
    return changes


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if not ri.active(ctx):
        return items, []
    names = ri.names(items, ctx)
    ids = ri.ids(items)
    orders = _orders(ctx, {*ids.values(), *names.values()})
    if not orders:
        return items, []
    plan = _plan(items, names, ids, orders)
    changes: list[Change] = []
    out: list[tuple[int, Any]] = []
    for k, item in enumerate(items):
        if k in plan.dropped:
            changes.append(Change(NAME, f"input[{k}]", f"reasoning item {names[k]} dropped: {plan.dropped[k]}, and "
                                  "its hidden reasoning cannot be replayed without it", ri.shown(item), None))
        elif k in plan.stripped:
            r = plan.stripped[k]
            changes.append(ri.id_removed(NAME, item, k, f"its reasoning item {r} is not in the request"))
            out.append((k, ri.strip_id(item)))
        else:
            out.append((k, item))
    kept = {k: r for k, r in names.items() if k not in plan.dropped}
    changes += _moves(out, kept, orders)
    if not changes:
        return items, []
    return [item for _, item in out], changes


@dataclass(frozen=True, slots=True)
class ItemsSeen:
    """What the fast path keeps of a prefix: the marker it was settled under, the names of its reasoning items."""

    marker: str | None
    present: Ids


def _extend(state: ItemsSeen | None, items: list[Any], start: int, ctx: Context) -> ItemsSeen | None:
    """Certain that nothing moves or loses an id: over the new items, every reasoning item the memory knows is
    directly followed by the item it produced, and every item that needed a reasoning item has it (in the prefix
    or among the new items). Older items were settled before and their records can only change by a rejection's
    teaching, which changes the upstream's marker: then nothing is certain and the repair runs."""
    if not ri.active(ctx):
        return ItemsSeen(None, EMPTY)
    mark = lr.marker(ctx.upstream)
    names = ri.names(items, ctx, start=start)
    ids = ri.ids(items, start)
    got = ri.recall(ctx, lr.ORDER, {*ids.values(), *names.values(), mark})
    now = got.pop(mark).value if mark in got else None
    if state is not None and now != state.marker:
        return None
    present = (EMPTY if state is None else state.present).plus(names.values())
    server = ctx.server_state
    for k in range(start, len(items)):
        key = names.get(k) or ids.get(k)
        record = got.get(key) if key is not None else None
        if record is None:
            continue
        after, nxt, rejected = lr.read_order(record.value)
        if server and not rejected:
            continue
        if k in names:
            if (rejected and not nxt) or (nxt and (k + 1 >= len(items) or ri.item_id(items[k + 1]) != nxt)):
                return None
        elif after and not ri.is_reasoning(items[k]) and after not in present:
            return None
    return ItemsSeen(now, present)


REPAIR = ri.repair(NAME, _apply, _extend)
