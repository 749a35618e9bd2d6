"""drop-unverifiable-reasoning: reasoning state the upstream said it cannot verify or does not hold, removed.

The bug. A reasoning item's ``encrypted_content`` can only be read by the organization (account, key) that produced
it. Replayed to another — a Codex thread after an account switch, a gateway rotating channels or keys (new-api,
sub2api), an old thread after an account change — OpenAI answers 400 ``The encrypted content for item rs_… could not
be verified. Reason: …`` (``code: invalid_encrypted_content``; older form ``The encrypted content gAAA...DQ== could
not be verified.``; also ``… organization_id did not match the target organization``), and Codex users see their
thread "die": every later turn replays the same items (openai/codex #8119, #8145, #13724; Wei-Shaw/sub2api #2863,
QuantumNous/new-api #4662). With ``store: false`` an item the server would have to look up by its id (a reasoning
item referenced by id only, an ``item_reference``) is not there: ``Item with id 'rs_…' not found. Items are not
persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.``
(a 404 in one report, can1357/oh-my-pi #41; also anomalyco/opencode #7724, router-for-me/CLIProxyAPI #2381).

Only the upstream can judge either, so this repair acts on what its rejection taught (``retry/rejections.py``
notes ``responses.refused`` records for that upstream, then the request is repaired and resent once, and every
later request is repaired up front):

- an ``encrypted_content`` this upstream cannot verify is removed from its reasoning item; a reasoning item left
  with no summary and no reasoning text is dropped, and the ``id`` is removed from the items of its run (the
  calls and messages that followed it, which would otherwise ask for it). Reasoning continuity is lost, no text,
  call or output is: only the hidden reasoning goes, which this upstream cannot read anyway (bifrost does the
  same, maximhq/bifrost #5892).
- an item this upstream does not hold: a reasoning item or an ``item_reference`` is dropped (nothing of it can be
  sent: the server would look it up again), any other item loses its ``id`` and keeps its content.

With nothing taught for this upstream it changes nothing. Which upstream: host, port and dialect — never the API
key (llmfix keeps none), so content refused after an account switch stays refused for that host should the
client switch back; the session then goes on without that hidden reasoning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmfix.dialects.responses import learn as lr
from llmfix.repairs import reasoning_items as ri
from llmfix.repairs.base import Context
from llmfix.report.changes import Change
from llmfix.wire.base import without

NAME = "drop-unverifiable-reasoning"


@dataclass(frozen=True, slots=True)
class _Refused:
    unverified: bool  # its encrypted_content cannot be verified by this upstream
    absent: bool  # this upstream does not hold an item with its id


def _refused(items: list[Any], ctx: Context, start: int = 0) -> tuple[dict[int, _Refused], str | None]:
    """What this upstream refused of ``items[start:]``, by index; and the upstream's marker. Without a marker
    nothing was ever taught for this upstream (every teaching writes one with its records, and it is the newest
    of them): then no item is looked up."""
    upstream = ctx.upstream
    mark = lr.marker(upstream)
    found = ri.recall(ctx, lr.REFUSED, [mark]).get(mark)
    if found is None:
        return {}, None
    keys: dict[int, tuple[str | None, str | None]] = {}
    for k in range(start, len(items)):
        item = items[k]
        content = ri.encrypted(item) if ri.is_reasoning(item) else None
        x = ri.item_id(item)
        if content is not None or x is not None:
            keys[k] = (lr.refused_content(upstream, content) if content is not None else None,
                       lr.refused_item(upstream, x) if x is not None else None)
    got = ri.recall(ctx, lr.REFUSED, {key for pair in keys.values() for key in pair if key})
    refused = {k: _Refused(c in got, i in got) for k, (c, i) in keys.items()}
    return {k: r for k, r in refused.items() if r.unverified or r.absent}, found.value


@dataclass
class _Edit:
    drop: dict[int, str]  # index → why the item goes
    unseal: set[int]  # reasoning items whose encrypted_content goes
    strip: dict[int, str]  # index → why its id goes


def _edits(items: list[Any], refused: dict[int, _Refused]) -> _Edit:
    edit = _Edit({}, set(), {})
    for k, why in refused.items():
        item = items[k]
        if ri.is_reasoning(item):
            if why.absent:
                edit.drop[k] = "this upstream does not hold it (not persisted)"
            elif not ri.has_text(item):
                edit.drop[k] = "this upstream cannot verify its encrypted_content, and it holds nothing else"
            else:
                edit.unseal.add(k)
                continue
            name = ri.item_id(item) or f"input[{k}]"
            for j in ri.run(items, k):  # the items that followed it would ask for it
                if ri.item_id(items[j]) is not None and j not in refused:
                    edit.strip.setdefault(j, f"its reasoning item {name} was dropped")
        elif ri.kind(item) == "item_reference":
            edit.drop[k] = "this upstream does not hold the item it refers to (not persisted)"
        else:
            edit.strip[k] = "this upstream does not hold an item with that id (not persisted)"
    return edit


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if not ri.active(ctx):
        return items, []
    refused, _ = _refused(items, ctx)
    if not refused:
        return items, []
    edit = _edits(items, refused)
    out: list[Any] = []
    changes: list[Change] = []
    for k, item in enumerate(items):
        if k in edit.drop:
            what = f"reasoning item {ri.item_id(item) or ''}".rstrip() if ri.is_reasoning(item) else \
                f"{ri.kind(item)} {ri.item_id(item) or ''}".rstrip()
            changes.append(Change(NAME, f"input[{k}]", f"{what} dropped: {edit.drop[k]}", ri.shown(item), None))
            continue
        if k in edit.unseal:
            new = without(item, "encrypted_content")
            changes.append(Change(NAME, f"input[{k}].encrypted_content", f"reasoning item {ri.item_id(item)}: "
                                  "encrypted_content removed, this upstream cannot verify it (its summary stays)",
                                  ri.shown(item), new.to_wire()))
            item = new
        if k in edit.strip:
            changes.append(ri.id_removed(NAME, item, k, edit.strip[k]))
            item = ri.strip_id(item)
        out.append(item)
    return (out, changes) if changes else (items, [])


def _extend(state: ri.Marked | None, items: list[Any], start: int, ctx: Context) -> ri.Marked | None:
    """Certain that nothing goes: no new item is refused by this upstream, and the upstream has been taught
    nothing since the prefix was settled (its marker; older items are only refused by a teaching)."""
    if not ri.active(ctx):
        return ri.Marked(None)
    refused, now = _refused(items, ctx, start)
    if refused or (state is not None and now != state.marker):
        return None
    return ri.Marked(now)


REPAIR = ri.repair(NAME, _apply, _extend)
