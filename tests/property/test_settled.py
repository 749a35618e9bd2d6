"""The certain checks of ``repairs/settled.py`` hold their one promise on generated conversations,
valid and broken, in every dialect and for every built-in upstream: when the chain of checks — from scratch
on the first turns, then continued over each later turn's new items — says "certain", every candidate
repair, run on the whole conversation, changes nothing. And the checks do say "certain" on valid histories
(else the fast path would never be taken: checked on the generated valid conversations, where pairing,
media and text all need nothing).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from llmfix.body.conversation import loads, parse
from llmfix.body.haystack import haystack
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import named
from llmfix.memory.media_window import MediaWindow
from llmfix.profiles import ProfileTable
from llmfix.repairs import pair_tool_calls, pipeline, settled
from llmfix.repairs.base import Context
from tests.property.breakage import valid_or_broken
from tests.property.budget import BUDGET
from tests.property.strategies import CONVERSATIONS, HOSTS
from tests.property.test_promises import Tick


def _context(conv: Any, d: Dialect, window: MediaWindow) -> tuple[Context, list[Any]]:
    resolved = ProfileTable().resolve(conv.host.name, 443, conv.model, d)
    todo = pipeline.candidates(d, resolved.profile, haystack(conv.raw()), frozenset(pipeline.NAMES))
    ctx = Context(d, resolved.profile, conv.model, resolved.modalities, None, window=window, flow_id="this",
                  server_state=False)
    return ctx, todo


@pytest.mark.parametrize("host", list(HOSTS))
@pytest.mark.parametrize("dialect", ["chat", "responses", "messages"])
@BUDGET
@given(data=st.data())
def test_a_certain_chain_means_no_repair_changes_anything(dialect: str, host: str, data: st.DataObject) -> None:
    broken, conv = valid_or_broken(data, dialect, host)
    d = named(dialect)
    window = MediaWindow(0.0, clock=Tick())
    ctx, todo = _context(conv, d, window)
    if data.draw(st.booleans(), label="another request carried the results"):
        # a window holding what another request in flight carried for some call ids: restore may apply
        other = parse(d, loads(conv.raw()))
        assert other is not None
        from llmfix.wire.toolresults import results
        window.observe("other", results(d, other.items))
    ends = sorted({len([i for c in conv.chunks[:t] for i in c]) for t in range(1, len(conv.chunks) + 1)})
    items = parse(d, loads(conv.raw())).items
    states = None
    start = 0
    sure = True
    for end in ends:
        got, _n = settled.settle(todo, states, items[:end], start, ctx)
        if got is None:
            sure = False
            break
        states, start = got, end
    event(f"{'broken' if broken else 'valid'}: {'certain' if sure else 'unsure'}")
    for repair in todo:  # each check on its own: certain means its repair changes nothing in the items as sent
        state, at, own = None, 0, True
        for end in ends:
            got, _n = settled.settle([repair], None if state is None else (state,), items[:end], at, ctx)
            if got is None:
                own = False
                break
            state, at = got[0], end
        if own:
            apply = pair_tool_calls.full if repair.name == pair_tool_calls.NAME else repair.apply
            _out, changes = apply(items, ctx)
            lines = [c.line() for c in changes]
            assert changes == [], f"{repair.name}'s own check is certain, the repair changes: {lines}"
    # as the engine walks a body's marks: each check continued from the last point it was certain at, past the
    # points where another (or itself) was unsure (settled.advance); certain at the end means certain
    states_each, ats = [None] * len(todo), [0] * len(todo)
    for end in ends:
        advanced = settled.advance(todo, states_each, ats, items[:end], ctx)
    if ends and advanced == len(todo):
        sure = True  # judged below, as the one chain's answer is
    if sure:
        for repair in todo:
            # pair-tool-calls' apply starts with the very check its extend continues: judge it by its full passes
            apply = pair_tool_calls.full if repair.name == pair_tool_calls.NAME else repair.apply
            out, changes = apply(items, ctx)
            assert changes == [], f"{repair.name} changes what the checks called certain: {[c.line() for c in changes]}"
            assert out == items


@pytest.mark.parametrize("dialect", ["chat", "responses", "messages"])
@BUDGET
@given(data=st.data())
def test_valid_histories_are_settled(dialect: str, data: st.DataObject) -> None:
    """On the valid conversations with text-only tool results, nothing needs a repair at OpenAI / Anthropic,
    and the checks are certain of it (the fast path is taken)."""
    host = "anthropic" if dialect == "messages" else "openai"
    conv = data.draw(CONVERSATIONS[dialect](host), label="conversation")
    raw = conv.raw()
    d = named(dialect)
    window = MediaWindow(0.0, clock=Tick())
    ctx, todo = _context(conv, d, window)
    items = parse(d, loads(raw)).items
    changed = pipeline.run(items, ctx, todo)[1]
    got, n = settled.settle(todo, None, items, 0, ctx)
    event(f"changed: {bool(changed)}, certain: {got is not None}")
    if not changed and not any(m in raw for m in (b"image", b"file", b"audio", b"document")):
        assert got is not None, f"unsure at {todo[n].name} on a history that needs nothing"
