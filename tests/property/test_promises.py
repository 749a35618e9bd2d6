"""DESIGN §4 under generated input: every dialect × every built-in upstream × memory that knows the calls or not.

For each generated conversation, each of its turns N is sent through ``engine.process`` as a client
resends its history (turns 0..N, one request per turn, the same memory and media window throughout,
each request finished before the next, as mitmproxy would report it), and for every turn:

- it never raises, and never reports a generated body as bad input;
- nothing is lost (text and media by payload; a dropped part has a placeholder, a ``dropped`` record
  and a reason the profile/model catalogue gives), no media part is duplicated or invented, and a tool
  result's media reach the upstream after that result, in order;
- minimal change: the top-level fields other than the message list, and every item no repair rewrites
  (anything but tool results and assistant messages), leave with the same keys, order and values;
- the strict mock upstream of that host (``tests/upstreams/rules.check``) accepts the output;
- idempotent: the output sent again (a new flow) comes back untouched;
- deterministic: the same bytes again, from a fresh llmfix and from the warmed-up one;
- cache-stable: the repaired list of turn N (``messages`` for Chat and Messages, ``input`` for
  Responses) is, item by item and byte by byte (orjson, key order kept), a prefix of turn N+1's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from llmfix import engine
from llmfix.dialects.registry import named
from llmfix.engine import Outcome, Request, Settings
from llmfix.memory.media_window import MediaWindow
from llmfix.memory.recall import Recall
from llmfix.memory.sqlite import SqliteStore
from llmfix.memory.store import ToolCall
from tests.property import promises
from tests.property.budget import BUDGET
from tests.property.strategies import CONVERSATIONS, HOSTS, PATHS, Conversation

MEMORY_MODES = ("none", "empty", "knows")


class Tick:
    """A clock that moves on at every reading: "finished" is always strictly before "now"."""

    def __init__(self) -> None:
        self._n = itertools.count()

    def __call__(self) -> float:
        return float(next(self._n))


@contextmanager
def llmfix(mode: str, calls: list[ToolCall]) -> Iterator[Settings]:
    """Settings as the addon builds them: a media window always; a memory unless ``mode`` is "none"."""
    memory = None
    if mode != "none":
        store = SqliteStore(":memory:")
        if mode == "knows":
            store.remember(calls)
        memory = Recall(store)
    try:
        yield Settings(memory=memory, window=MediaWindow(0.0, clock=Tick()))
    finally:
        if memory is not None:
            memory.close()


def send(settings: Settings, conv: Conversation, raw: bytes, flow: str) -> Outcome:
    outcome = engine.process(Request(named(conv.dialect), conv.host.name, 443, raw, None, flow), settings)
    settings.window.finish(flow)
    return outcome


def check_turn(settings: Settings, conv: Conversation, turns: int, mode: str) -> list[Any]:
    """Every promise for the request of turn ``turns``; returns the repaired message list."""
    raw, sent = conv.raw(turns), conv.body(turns)
    outcome = send(settings, conv, raw, f"t{turns}")
    assert outcome.status != "failed", f"a valid body was reported as bad input: {outcome.reason}"
    assert (outcome.body is None) == (outcome.status == "untouched")
    event(f"{conv.dialect}/{conv.host.rules}: {'+'.join(outcome.repairs) or 'untouched'}")
    out, got = promises.body_of(raw, outcome)
    promises.nothing_lost(sent, got, outcome, host=conv.host.name, model=conv.model)
    promises.media_in_place(conv.dialect, sent[conv.key], got[conv.key])
    promises.same_top_level(sent, got, conv.key)
    promises.untouched_items_kept(sent[conv.key], got[conv.key], promises.dropped_of(outcome),
                                  fitted=promises.fitted_of(outcome))
    promises.accepted(conv.host.rules, PATHS[conv.dialect], got)

    idempotent_and_deterministic(settings, conv, raw, out, turns, mode)
    return got[conv.key]


def idempotent_and_deterministic(settings: Settings, conv: Conversation, raw: bytes, out: bytes, turns: int,
                                 mode: str) -> None:
    """``out``, what llmfix made of ``raw``, needs nothing more, and a fresh llmfix and this one again make it."""
    again = send(settings, conv, out, f"t{turns}-again")
    assert again.status == "untouched", f"not idempotent: {[c.line() for c in again.changes]} {again.reason}"
    with llmfix(mode, conv.calls) as fresh:
        assert promises.body_of(raw, send(fresh, conv, raw, f"t{turns}"))[0] == out, "not deterministic (fresh)"
    assert promises.body_of(raw, send(settings, conv, raw, f"t{turns}-repeat"))[0] == out, "not deterministic (warm)"


def turn_after_turn(data: st.DataObject, conv: Conversation,
                    check: Callable[[Settings, Conversation, int, str], list[Any]]) -> None:
    """Every turn of ``conv`` through one llmfix (a drawn memory mode), ``check``-ed, each turn's items a prefix of
    the next one's (prefix-stable)."""
    mode = data.draw(st.sampled_from(MEMORY_MODES), label="memory")
    event(f"memory: {mode}")
    with llmfix(mode, conv.calls) as settings:
        previous: list[Any] | None = None
        for turns in range(1, len(conv.chunks) + 1):
            items = check(settings, conv, turns, mode)
            if previous is not None:
                promises.is_prefix(previous, items)
            previous = items


@pytest.mark.parametrize("host", list(HOSTS))
@pytest.mark.parametrize("dialect", list(CONVERSATIONS))
@BUDGET
@given(data=st.data())
def test_promises_hold_turn_after_turn(dialect: str, host: str, data: st.DataObject) -> None:
    turn_after_turn(data, data.draw(CONVERSATIONS[dialect](host), label="conversation"), check_turn)
