"""restore-reasoning-content on Droid's and opencode's captures and on hand-made spans, through `engine.process`,
judged by the strict DeepSeek / Kimi rules."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.body.prefix import PrefixCache
from llmfix.dialects.chat.learn_reasoning import KIND, call_key, context, text_key
from llmfix.dialects.registry import CHAT
from llmfix.memory.learn import StreamLearner
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import Reasoning
from llmfix.profiles import ProfileTable
from llmfix.repairs import restore_reasoning_content, settled
from llmfix.repairs.base import Context
from tests.upstreams.captures import capture_bytes
from tests.upstreams.reasoning_canned import chat_sse, with_reasoning
from tests.upstreams.reasoning_sessions import DROID_SSE, THOUGHT, Session, droid, hear, opencode, sent
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
    return run_engine(CHAT, host, body, store)


@pytest.mark.parametrize("version", ["0.215.0", "0.225.2"])
@pytest.mark.parametrize(("host", "rules", "model"), [(*DEEPSEEK, "deepseek-v4-flash"), (*KIMI, "kimi-k2.5")])
def test_droid_gets_its_reasoning_back_byte_for_byte_and_nothing_else_changes(version: str, host: str, rules: str,
                                                                               model: str) -> None:
    session = droid(version, model)
    path = "/v1/chat/completions"
    assert check(rules, path, session.turn2) is not None  # the 400 this repair exists for
    upstream = f"{host}:443/chat"
    out = run(session.turn2, learned(session, upstream), host)
    got = sent(out, session.turn2)
    assert out.repairs == ["restore-reasoning-content"]
    assert got["messages"][session.at]["reasoning_content"] == THOUGHT
    expected = copy.deepcopy(session.turn2)
    expected["messages"][session.at]["reasoning_content"] = THOUGHT
    assert got == expected
    assert check(rules, path, got) is None
    assert out.body is not None
    assert run(out.body, learned(session, upstream), host).status == "untouched"  # idempotent
    assert run(session.turn2, learned(session, "api.other.example:443/chat"), host).status == "untouched"


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


def by_call(call_id: str, upstream: str = UP) -> str:
    """The key of a turn that made ``msg``'s call ``call_id``."""
    return call_key(upstream, call_id, "read", "function", "{}")


def by_text(text: str, after: dict[str, Any]) -> str:
    """The key of a turn that said ``text`` in answer to the message ``after``."""
    return text_key(UP, text, context(after["role"], after["content"], after.get("tool_call_id")))


def test_only_the_spans_with_a_tool_call_get_it_and_a_carried_reasoning_is_never_overwritten() -> None:
    store = store_of((by_call("call_1"), "r1"), (by_text(FINAL, msg("tool", "x") | {"tool_call_id": "call_1"}),
                                                  "r-final"),
                     (by_text(CHATTY, msg("user", "hi")), "r-chat"), (by_call("call_2"), "r2"))
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
    conv = parse(CHAT, loads(json.dumps(body).encode()))
    store = SqliteReasoningStore(":memory:")
    resolved = ProfileTable().resolve("api.deepseek.com", 443, "deepseek-v4-flash", CHAT)
    ctx = Context(CHAT, resolved.profile, "deepseek-v4-flash", None, None, reasoning=store, upstream=UP)
    repair = restore_reasoning_content.REPAIR
    state, n = settled.settle([repair], None, conv.items, 0, ctx)
    assert state is not None and n == 1  # nothing known: certain
    store.note([Reasoning(KIND, by_call("call_9"), "late", UP)])
    assert settled.settle([repair], state, conv.items, len(conv.items), ctx) == (None, 0)


class Counting(SqliteReasoningStore):
    """A memory that counts the keys it is asked about."""

    asked = 0

    def recall(self, kind: str, keys: Any) -> dict[str, Reasoning]:
        keys = list(keys)
        self.asked += len(keys)
        return super().recall(kind, keys)


def test_the_fast_path_gives_back_a_record_that_landed_late_whenever_it_lands(monkeypatch) -> None:
    """A DeepSeek session whose turn-2 record reached memory after turn 2 was settled (a fleet instance's write to
    Redis, a Redis back from an outage): turn 3, a minute later or a day, gets it back on the fast path as on the
    whole path. The check has no clock; were there one, advancing it changes nothing."""
    now = [1000.0]
    monkeypatch.setattr(restore_reasoning_content, "CLOCK", lambda: now[0], raising=False)
    store = Counting(":memory:")
    fast = engine.Settings(prefix=PrefixCache(min_size=0), reasoning=store)
    whole = engine.Settings(prefix=None, reasoning=store)
    messages = [msg("user", "do it " + "x" * 100), msg("assistant", None, ("call_00_abc",)),
                msg("tool", "files") | {"tool_call_id": "call_00_abc"}]

    def both() -> tuple[engine.Outcome, engine.Outcome]:
        raw = json.dumps({"model": "deepseek-v4-flash", "messages": messages}).encode()
        return tuple(engine.process(engine.Request(CHAT, "api.deepseek.com", 443, raw), s)
                     for s in (fast, whole))  # type: ignore[return-value]

    assert [o.status for o in both()] == ["untouched", "untouched"]  # no record yet: settled
    learner = StreamLearner("chat", lambda _: None, on_reasoning=store.note, upstream=UP)  # the late write
    learner.feed(chat_sse("deepseek-v4-flash", "the reasoning", calls=[("call_00_abc", "read", "{}")]).encode())
    learner.feed(b"")
    for step in (61, 86_400):
        now[0] += step
        messages += [msg("assistant", None, (f"call_{step}",)), msg("tool", "more") | {"tool_call_id": f"call_{step}"}]
        a, b = both()
        assert (a.status, a.body, a.lines) == (b.status, b.body, b.lines)
        assert a.status == "repaired" and json.loads(a.body or b"")["messages"][1]["reasoning_content"] == \
            "the reasoning"


def test_every_message_that_needs_its_reasoning_is_asked_about_on_every_turn_in_one_query() -> None:
    """The certain check keeps the keys of the messages lacking their reasoning, and asks for all of them each turn
    (one IN query): its answer is the repair's, however long ago a message was first seen."""
    from llmfix.body.conversation import loads, parse

    def items(n: int) -> list[Any]:
        messages = [msg("user", "go")]
        for k in range(n):
            messages += [msg("assistant", None, (f"call_{k}",)), msg("tool", "x") | {"tool_call_id": f"call_{k}"}]
        conv = parse(CHAT, loads(json.dumps({"model": "deepseek-v4-flash", "messages": messages}).encode()))
        return conv.items

    store = Counting(":memory:")
    queries: list[int] = []
    resolved = ProfileTable().resolve("api.deepseek.com", 443, "deepseek-v4-flash", CHAT)
    ctx = Context(CHAT, resolved.profile, "deepseek-v4-flash", None, None, reasoning=store, upstream=UP)
    repair = restore_reasoning_content.REPAIR
    original = store.recall
    store.recall = lambda kind, keys: (queries.append(1), original(kind, keys))[1]  # type: ignore[method-assign]
    state, _ = settled.settle([repair], None, items(50), 0, ctx)
    assert state is not None and store.asked == 50 and len(queries) == 1
    state, _ = settled.settle([repair], state, items(51), 101, ctx)
    assert state is not None and store.asked == 50 + 51 and len(queries) == 2
    store.note([Reasoning(KIND, by_call("call_3"), "landed late", UP)])
    assert settled.settle([repair], state, items(52), 103, ctx)[0] is None  # turn 3's record: not certain


# -- two sessions that make the same key -------------------------------------------------------------------------


def kimi(raw: Any) -> Any:
    """Droid's capture as it is on Kimi: its ids number the calls of one conversation, every session has them."""
    text = json.dumps(raw).replace("call_mock_a", "functions.Read:0").replace("call_mock_b", "functions.Read:1")
    return json.loads(text)


def heard(store: Any, sse: str, upstream: str) -> None:
    learner = StreamLearner("chat", lambda _: None, on_reasoning=store.note, upstream=upstream)
    learner.feed(sse.encode())
    learner.feed(b"")


def test_a_kimi_session_never_gets_another_session_s_reasoning_under_the_same_call_id() -> None:
    """Every Kimi session's first calls are ``functions.Read:0``, ``functions.Read:1``: session A (other files)
    was heard first; Droid's session B replays its turn without reasoning and gets only its own back, never A's."""
    session = droid(model="kimi-k2.5")
    turn2 = kimi(session.turn2)
    up = "api.moonshot.ai:443/chat"
    store = SqliteReasoningStore(":memory:")
    droid_sse = capture_bytes(DROID_SSE).decode()
    other = with_reasoning(droid_sse.replace("/home/dev/project/", "/home/alice/private/"),
                           "A's private reasoning: the key in ~/.env is sk-live-…")
    heard(store, kimi(other), up)
    assert run(turn2, store, "api.moonshot.ai").status == "untouched"  # its own 400, not A's reasoning
    heard(store, kimi(session.sse), up)  # B's own answer
    got = sent(run(turn2, store, "api.moonshot.ai"), turn2)
    assert got["messages"][session.at]["reasoning_content"] == THOUGHT
    assert check("moonshot", "/v1/chat/completions", got) is None
    # session C read the very same files: the key is ambiguous, nobody's reasoning goes
    heard(store, kimi(with_reasoning(droid_sse, "C's reasoning about the same files")), up)
    assert run(turn2, store, "api.moonshot.ai").status == "untouched"


def test_a_deepseek_opener_is_known_by_the_message_it_answered_and_an_ambiguous_one_by_nothing() -> None:
    """DeepSeek opens many sessions with the same words; a text-only turn is known by its text and by the message
    it answered (the learner reads it from the request the answer came for)."""
    opener = "Let me look at the file structure first."
    store = SqliteReasoningStore(":memory:")

    def answer(listing: str, reasoning: str) -> list[dict[str, Any]]:
        """A session: ``ls`` answered ``listing``, then the opener; its history as the client replays it."""
        request = {"model": "deepseek-v4-flash", "messages": [
            msg("user", "tidy up this repository"), msg("assistant", None, ("call_00_ls",), reasoning="call it"),
            msg("tool", listing) | {"tool_call_id": "call_00_ls"}]}
        learner = StreamLearner("chat", lambda _: None, on_reasoning=store.note, upstream=UP, request=lambda: request)
        learner.feed(chat_sse("deepseek-v4-flash", reasoning, text=opener).encode())
        learner.feed(b"")
        return [*request["messages"], msg("assistant", opener), msg("user", "go on")]

    mine, theirs = answer("src/ tests/ README.md", "mine"), answer("main.go go.mod", "theirs")
    for messages, reasoning in ((mine, "mine"), (theirs, "theirs")):
        body = {"model": "deepseek-v4-flash", "messages": messages}
        assert sent(run(body, store), body)["messages"][3]["reasoning_content"] == reasoning
    answer("src/ tests/ README.md", "a third session's")  # the same listing, the same opener: ambiguous
    assert run({"model": "deepseek-v4-flash", "messages": mine}, store).status == "untouched"
