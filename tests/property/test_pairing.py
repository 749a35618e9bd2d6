"""DESIGN §4 on broken tool histories (tests/property/breakage.py), every dialect × built-in upstream × memory.

The same promises as test_promises.py, turn after turn — never raises, nothing lost, media in place,
top-level fields kept, accepted by the strict upstream's rules, idempotent, deterministic, each turn's
repaired list a byte-exact prefix of the next — with one difference in "minimal change": pairing may
also rewrite the user message that must carry an Anthropic turn's results (results first, missing ones
added), so only items outside every tool turn must leave exactly as sent.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from llmfix.body.conversation import loads, parse
from llmfix.dialects.registry import named
from llmfix.engine import Outcome
from llmfix.profiles import ProfileTable
from llmfix.repairs import pair_tool_calls
from llmfix.repairs.base import Context
from llmfix.wire import paired
from tests.property import promises
from tests.property.breakage import broken_conversation
from tests.property.budget import BUDGET
from tests.property.strategies import CONVERSATIONS, HOSTS, PATHS, Conversation
from tests.property.test_promises import idempotent_and_deterministic, send, turn_after_turn

NOT_RECORDED = "No result was recorded for tool call"


def _may_change(item: Any, previous: Any) -> bool:
    if not isinstance(item, dict):
        return True
    content = item.get("content")
    holds_results = isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    after_calls = isinstance(previous, dict) and isinstance(previous.get("content"), list) and any(
        isinstance(b, dict) and b.get("type") == "tool_use" for b in previous["content"])
    renamed = item.get("type") in ("function_call", "custom_tool_call")  # a duplicate or empty call_id
    return promises._may_change(item) or holds_results or after_calls or renamed


def untouched_items_kept(sent_items: list[Any], got_items: list[Any], outcome: Outcome) -> None:
    """Items outside every tool turn leave exactly as sent (or with dropped media as placeholders)."""
    promises.untouched_items_kept(sent_items, got_items, promises.dropped_of(outcome),
                                  may_change=lambda k: _may_change(sent_items[k], sent_items[k - 1] if k else None),
                                  fitted=promises.fitted_of(outcome))


def check_turn(settings: Any, conv: Conversation, turns: int, mode: str) -> list[Any]:
    raw, sent = conv.raw(turns), conv.body(turns)
    outcome = send(settings, conv, raw, f"t{turns}")
    assert outcome.status != "failed", f"a valid body was reported as bad input: {outcome.reason}"
    event(f"{conv.dialect}/{conv.host.rules}: {'+'.join(outcome.repairs) or 'untouched'}")
    out, got = promises.body_of(raw, outcome)
    promises.nothing_lost(sent, got, outcome, host=conv.host.name, model=conv.model)
    promises.media_in_place(conv.dialect, sent[conv.key], got[conv.key])
    promises.same_top_level(sent, got, conv.key)
    untouched_items_kept(sent[conv.key], got[conv.key], outcome)
    promises.accepted(conv.host.rules, PATHS[conv.dialect], got)
    for s in promises.strings(got):
        assert not ("success" in s.lower() and NOT_RECORDED in s), "a missing result must never claim success"
    idempotent_and_deterministic(settings, conv, raw, out, turns, mode)
    return got[conv.key]


@pytest.mark.parametrize("host", list(HOSTS))
@pytest.mark.parametrize("dialect", ["chat", "responses", "messages"])
@BUDGET
@given(data=st.data())
def test_broken_histories_are_repaired_turn_after_turn(dialect: str, host: str, data: st.DataObject) -> None:
    turn_after_turn(data, data.draw(broken_conversation(dialect, host), label="conversation"), check_turn)


@pytest.mark.parametrize("dialect", ["chat", "responses", "messages"])
@BUDGET
@given(data=st.data())
def test_the_fast_path_never_skips_a_change(dialect: str, data: st.DataObject) -> None:
    """``surely_paired`` says "nothing to pair" only where the full passes indeed change nothing."""
    host = data.draw(st.sampled_from(list(HOSTS)), label="host")
    strategy = st.one_of(broken_conversation(dialect, host), CONVERSATIONS[dialect](host))
    conv = data.draw(strategy, label="conversation")
    d = named(dialect)
    parsed = parse(d, loads(conv.raw()))
    assert parsed is not None
    items = parsed.items
    ctx = Context(d, ProfileTable().resolve(conv.host.name, 443, conv.model).profile, conv.model, None)
    fast = paired.surely_paired(d, items)
    event(f"surely paired: {fast}")
    if fast:
        assert pair_tool_calls.full(items, ctx)[1] == []
