"""restore-reasoning-content on Droid's and opencode's captures and on hand-made spans, through `engine.process`,
judged by the strict DeepSeek / Kimi rules."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.memory.learn_chat_reasoning import KIND, content_key
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import Reasoning
from llmfix.profiles import ProfileTable
from llmfix.repairs import restore_reasoning_content, settled
from llmfix.repairs.base import Context
from llmfix.route import Dialect
from tests.upstreams.reasoning_sessions import THOUGHT, Session, droid, hear, opencode, sent
from tests.upstreams.reasoning_sessions import run as run_engine
from tests.upstreams.rules import check

DEEPSEEK = ("api.deepseek.com", "deepseek")
KIMI = ("api.moonshot.ai", "moonshot")
UP = "api.deepseek.com:443/chat"


def learned(session: Session, upstream: str = UP) -> SqliteReasoningStore:
    """A memory that saw turn 1's answer stream by."""
    store = SqliteReasoningStore(":memory:")
    hear(store, "chat", session.sse, upstream)
    return store


def run(body: dict[str, Any] | bytes, store: Any, host: str = "api.deepseek.com") -> engine.Outcome:
    return run_engine(Dialect.CHAT, host, body, store)


@pytest.mark.parametrize("version", ["0.215.0", "0.225.2"])
@pytest.mark.parametrize(("host", "rules", "model"), [(*DEEPSEEK, "deepseek-v4-flash"), (*KIMI, "kimi-k2.5")])
def test_droid_gets_its_reasoning_back_byte_for_byte_and_nothing_else_changes(version: str, host: str, rules: str,
                                                                               model: str) -> None:
    session = droid(version, model)
    path = "/v1/chat/completions"
    assert check(rules, path, session.turn2) is not None  # the 400 this repair exists for
    out = run(session.turn2, learned(session), host)
    got = sent(out, session.turn2)
    assert out.repairs == ["restore-reasoning-content"]
    assert got["messages"][session.at]["reasoning_content"] == THOUGHT
    expected = copy.deepcopy(session.turn2)
    expected["messages"][session.at]["reasoning_content"] = THOUGHT
    assert got == expected
    assert check(rules, path, got) is None
    assert out.body is not None
    assert run(out.body, learned(session), host).status == "untouched"  # idempotent


def test_opencode_s_empty_reasoning_is_replaced_and_its_image_omitted() -> None:
    session = opencode()
    out = run(session.turn2, learned(session))
    got = sent(out, session.turn2)
    assert set(out.repairs) == {"restore-reasoning-content", "omit-unsupported-media"}
    assert got["messages"][2]["reasoning_content"] == THOUGHT
    assert check("deepseek", "/v1/chat/completions", got) is None
    assert [c.line() for c in out.changes if c.repair == "restore-reasoning-content"] == [
        f"restore-reasoning-content: messages[2].reasoning_content: {len(THOUGHT)} chars of reasoning given back "
        f"(empty in the request), as {UP} answered it (recognised by tool call call_mock_002_0)"]


def test_nothing_recorded_nothing_invented() -> None:
    session = droid()
    raw = json.dumps(session.turn2).encode()
    for store in (SqliteReasoningStore(":memory:"), None):
        out = run(raw, store)
        assert out.status == "untouched" and out.body is None  # the request goes as it is: its own 400
    assert check("deepseek", "/v1/chat/completions", session.turn2) is not None


def test_upstreams_that_want_no_reasoning_back_are_left_alone() -> None:
    session = droid(model="gpt-4.1")
    out = run(session.turn2, learned(session), "api.openai.com")
    assert out.status == "untouched"


def msg(role: str, content: Any = None, calls: tuple[str, ...] = (), reasoning: Any = "absent") -> dict[str, Any]:
    m: dict[str, Any] = {"role": role, "content": content}
    if calls:
        m["tool_calls"] = [{"id": c, "type": "function", "function": {"name": "read", "arguments": "{}"}}
                           for c in calls]
    if reasoning != "absent":
        m["reasoning_content"] = reasoning
    return m


FINAL = "Both files hold the same red square, 8 by 8 pixels."
CHATTY = "Hello! What would you like me to look at today?"


def store_of(*records: tuple[str, str]) -> SqliteReasoningStore:
    store = SqliteReasoningStore(":memory:")
    store.note(Reasoning(KIND, k, v, UP) for k, v in records)
    return store


def test_only_the_spans_with_a_tool_call_get_it_and_a_carried_reasoning_is_never_overwritten() -> None:
    store = store_of(("call_1", "r1"), (content_key(FINAL) or "", "r-final"), (content_key(CHATTY) or "", "r-chat"),
                     ("call_2", "r2"))
    body = {"model": "deepseek-v4-pro", "messages": [
        msg("user", "hi"), msg("assistant", CHATTY),  # a span without a call: its reasoning is not needed
        msg("user", "read it"), msg("assistant", None, ("call_1",), None),
        msg("tool", "x") | {"tool_call_id": "call_1"},
        msg("assistant", FINAL),  # the span's final answer: needed too
        msg("user", "again"), msg("assistant", None, ("call_2",), "the client's own"),
        msg("tool", "y") | {"tool_call_id": "call_2"}]}
    got = sent(run(body, store), body)["messages"]
    assert "reasoning_content" not in got[1]
    assert got[3]["reasoning_content"] == "r1" and got[5]["reasoning_content"] == "r-final"
    assert got[7]["reasoning_content"] == "the client's own"
    assert check("deepseek", "/v1/chat/completions", {"model": "deepseek-v4-pro", "messages": got}) is None


def test_the_certain_check_asks_again_when_memory_learns_later() -> None:
    """A fleet instance may see the record a moment after the turn was first seen: the fast path must not have
    settled the turn for good."""
    body = {"model": "deepseek-v4-flash", "messages": [msg("user", "read it"), msg("assistant", None, ("call_9",)),
                                                       msg("tool", "x") | {"tool_call_id": "call_9"}]}
    from llmfix.body.conversation import loads, parse
    conv = parse(Dialect.CHAT, loads(json.dumps(body).encode()))
    store = SqliteReasoningStore(":memory:")
    resolved = ProfileTable().resolve("api.deepseek.com", 443, "deepseek-v4-flash", Dialect.CHAT)
    ctx = Context(Dialect.CHAT, resolved.profile, "deepseek-v4-flash", None, None, {"reasoning": store})
    repair = restore_reasoning_content.REPAIR
    state, n = settled.settle([repair], None, conv.items, 0, ctx)
    assert state is not None and n == 1  # nothing known: certain
    store.note([Reasoning(KIND, "call_9", "late", UP)])
    assert settled.settle([repair], state, conv.items, len(conv.items), ctx) == (None, 0)


class Counting(SqliteReasoningStore):
    """A memory that counts the keys it is asked about."""

    asked = 0

    def recall(self, kind: str, keys: Any) -> dict[str, Reasoning]:
        keys = list(keys)
        self.asked += len(keys)
        return super().recall(kind, keys)


def test_a_long_session_that_never_had_its_reasoning_asks_only_about_its_new_turns(monkeypatch) -> None:
    """Asked again for RECHECK_S after a message first needs it (a fleet's write may land late), then no more:
    the certain check costs what a turn adds, not what the session holds."""
    from llmfix.body.conversation import loads, parse

    def items(n: int) -> list[Any]:
        messages = [msg("user", "go")]
        for k in range(n):
            messages += [msg("assistant", None, (f"call_{k}",)), msg("tool", "x") | {"tool_call_id": f"call_{k}"}]
        conv = parse(Dialect.CHAT, loads(json.dumps({"model": "deepseek-v4-flash", "messages": messages}).encode()))
        return conv.items

    now = [1000.0]
    monkeypatch.setattr(restore_reasoning_content, "CLOCK", lambda: now[0])
    store = Counting(":memory:")
    resolved = ProfileTable().resolve("api.deepseek.com", 443, "deepseek-v4-flash", Dialect.CHAT)
    ctx = Context(Dialect.CHAT, resolved.profile, "deepseek-v4-flash", None, None, {"reasoning": store})
    repair = restore_reasoning_content.REPAIR
    first = items(50)
    state, _ = settled.settle([repair], None, first, 0, ctx)
    assert state is not None and store.asked == 50
    now[0] += 10
    state, _ = settled.settle([repair], state, items(51), len(first), ctx)
    assert state is not None and store.asked == 50 + 51  # within the window: all asked again
    now[0] += restore_reasoning_content.RECHECK_S
    store.asked = 0
    assert settled.settle([repair], state, items(52), len(first) + 2, ctx)[0] is not None
    assert store.asked == 1  # only the new turn
