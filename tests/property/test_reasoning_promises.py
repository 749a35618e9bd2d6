"""The reasoning repairs under generated sessions (DESIGN §4), turn by turn as the client resends its history.

Chat (restore-reasoning-content), DeepSeek and Kimi in thinking mode: each assistant turn answered with a reasoning
(or none), made of tool calls or text; memory heard every answer; the client keeps, drops, nulls or empties each
turn's reasoning. Every turn: a history that kept its reasoning is byte-identical; in a repaired one only
``reasoning_content`` fields changed, each to the very text the answer carried, only where a tool span needs it and
the client had none; the strict vendor rules accept it when memory knew every turn; idempotent; turn N's repaired
messages are a prefix of turn N+1's.

Messages (drop-foreign-thinking), Anthropic: assistant turns signed by this upstream (heard by memory), by another
provider (heard or not), unsigned, UUID-signed, or without thinking; the upstream may have rejected one foreign
block before (a fact). Every turn: the latest assistant message is byte-identical; every text, tool_use and
tool_result stays, in order; a block this upstream signed is never dropped; an unsigned or UUID-signed older block
and a rejected one always are; a history of this upstream's own blocks is byte-identical; the strict mock accepts
the result when memory could know every foreign block; idempotent; prefix-stable while the session goes on with
this upstream.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from llmfix import engine
from llmfix.body.prefix import Hit, PrefixCache
from llmfix.dialects.base import Dialect
from llmfix.dialects.chat.learn_reasoning import call_key, context, records, text_key
from llmfix.dialects.messages.learn_thinking import FOREIGN, SIGNED, block_key, fact_key, marker_key
from llmfix.dialects.registry import CHAT, MESSAGES
from llmfix.memory.learn_base import Asked
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import Reasoning, ToolCall
from tests.property.budget import BUDGET
from tests.upstreams.reasoning_rules import missing_in_tool_spans
from tests.upstreams.reasoning_sessions import run as run_engine
from tests.upstreams.reasoning_sessions import sent
from tests.upstreams.rules import check
from tests.upstreams.thinking import Ledger

words = st.text(alphabet="abcdefgh é\n", min_size=1, max_size=30)


def run(dialect: Dialect, host: str, body: dict[str, Any], store: Any) -> tuple[engine.Outcome, dict[str, Any]]:
    out = run_engine(dialect, host, body, store)
    return out, sent(out, body)


# -- Chat ---------------------------------------------------------------------------------------------------------

CHAT_HOSTS = {"api.deepseek.com": ("deepseek", "deepseek-v4-flash"), "api.moonshot.ai": ("moonshot", "kimi-k2.5")}


Heard = list[tuple[str, list[ToolCall], str, dict[str, Any]]]
"""The answers memory heard: (reasoning, calls, text, the request message the answer followed)."""


def noted(heard: Heard, upstream: str) -> list[Reasoning]:
    """What memory noted of the answers heard from ``upstream``."""
    return [r for reasoning, calls, text, before in heard
            for r in records(reasoning, calls, text, Asked(upstream, lambda b=before: {"messages": [b]}))]


@st.composite
def chat_sessions(draw: st.DrawFn) -> tuple[list[list[dict[str, Any]]], Heard]:
    """(the messages each turn adds, the answers memory heard)."""
    n = iter(range(10_000))
    turns: list[list[dict[str, Any]]] = [[{"role": "user", "content": "start"}]]
    heard: Heard = []
    for _ in range(draw(st.integers(1, 5))):
        reasoning = draw(st.one_of(st.just(""), words))
        k = draw(st.integers(0, 3))
        ids = [f"call_{next(n)}" for _ in range(k)]
        text = f"An answer long enough to be recognised, number {next(n)}." if not ids or draw(st.booleans()) else ""
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if ids:
            message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": "read", "arguments": "{}"}}
                                     for i in ids]
        if draw(st.booleans()):  # else this answer streamed past another llmfix
            heard.append((reasoning, [ToolCall(i, "read", "{}", "chat") for i in ids], text or "", turns[-1][-1]))
        replay = copy.deepcopy(message)
        how = draw(st.sampled_from(["kept", "dropped", "null", "empty"]))
        if how == "kept" and reasoning:
            replay["reasoning_content"] = reasoning
        elif how in ("null", "empty"):
            replay["reasoning_content"] = None if how == "null" else ""
        turn = [replay] + [{"role": "tool", "tool_call_id": i, "content": f"result {i}"} for i in ids]
        if not ids or draw(st.booleans()):
            turn.append({"role": "user", "content": f"next {next(n)}"})
        turns.append(turn)
    return turns, heard


def only_reasoning_changed(sent: list[dict[str, Any]], got: list[dict[str, Any]]) -> None:
    assert len(sent) == len(got)
    for s, g in zip(sent, got, strict=True):
        assert {k: v for k, v in s.items() if k != "reasoning_content"} == \
               {k: v for k, v in g.items() if k != "reasoning_content"}


class Cache(PrefixCache):
    """A prefix cache that counts the appends it recognised (the fast path was taken)."""

    found = 0

    def find(self, dialect: str, data: bytes) -> Hit | None:
        hit = super().find(dialect, data)
        self.found += hit is not None
        return hit


def fast_path_agrees(dialect: Dialect, host: str, turns: list[list[dict[str, Any]]], store: SqliteReasoningStore,
                     late: list[Reasoning], when: int) -> None:
    """An llmfix that keeps each body for its next turn (the certain checks continued, repairs/settled.py) answers
    every turn exactly as one that parses and repairs every body whole, also when memory learns something between
    two turns (``late``, noted before turn ``when``: a fleet instance's write, a rejection's facts)."""
    cache = Cache(min_size=0)  # every body kept, however small
    fast = engine.Settings(reasoning=store, prefix=cache)
    whole = engine.Settings(reasoning=store, prefix=None)
    sent: list[dict[str, Any]] = []
    for n, turn in enumerate(turns):
        if n == when:
            store.note(late)
        sent = sent + turn
        raw = json.dumps({"model": "m-x", "messages": sent}).encode()
        a, b = (engine.process(engine.Request(dialect, host, 443, raw), s) for s in (fast, whole))
        assert (a.status, a.body, a.lines) == (b.status, b.body, b.lines)
    event(f"appends found: {min(cache.found, 3)}")


@BUDGET
@given(session=chat_sessions(), when=st.integers(0, 6))
def test_chat_fast_path_agrees_when_memory_learns_late(session: Any, when: int) -> None:
    turns, heard = session
    fast_path_agrees(CHAT, "api.deepseek.com", turns, SqliteReasoningStore(":memory:"),
                     noted(heard, "api.deepseek.com:443/chat"), when)


@BUDGET
@given(session=chat_sessions(), host=st.sampled_from(sorted(CHAT_HOSTS)))
def test_chat_reasoning_is_given_back_exactly_where_needed(session: Any, host: str) -> None:
    turns, heard = session
    rules, model = CHAT_HOSTS[host]
    upstream = f"{host}:443/chat"
    store = SqliteReasoningStore(":memory:")
    store.note(noted(heard, upstream))
    known = {r.key: r.value for r in noted(heard, upstream)}
    previous: list[dict[str, Any]] | None = None
    sent: list[dict[str, Any]] = []
    for turn in turns:
        sent = sent + turn
        body = {"model": model, "messages": sent}
        out, got = run(CHAT, host, body, store)
        needy = set(missing_in_tool_spans(sent))
        only_reasoning_changed(sent, got["messages"])
        restored = {}
        for i, (s, g) in enumerate(zip(sent, got["messages"], strict=True)):
            if s.get("role") != "assistant":
                continue
            before = context(sent[i - 1]["role"], sent[i - 1].get("content") or "", sent[i - 1].get("tool_call_id"))
            keys = [call_key(upstream, tc["id"], "read", "function", "{}") for tc in s.get("tool_calls", [])] or \
                [text_key(upstream, s.get("content") or "", before)]
            recorded = next((known[k] for k in keys if known.get(k)), None)
            if s.get("reasoning_content"):
                assert g["reasoning_content"] == s["reasoning_content"]  # the client's own is never overwritten
            elif i in needy and recorded:
                assert g["reasoning_content"] == recorded  # byte for byte
                restored[i] = recorded
            else:
                assert g.get("reasoning_content", "absent") == s.get("reasoning_content", "absent")
        event(f"chat turn: {'restored' if restored else 'untouched'}")
        if not restored:
            assert out.status == "untouched"  # nothing to give back: byte-identical
        if all(sent[i].get("reasoning_content") or i in restored for i in needy):
            assert check(rules, "/v1/chat/completions", got) is None
        again, _ = run(CHAT, host, got, store)
        assert again.status == "untouched"  # idempotent
        if previous is not None:
            assert got["messages"][: len(previous)] == previous  # prefix-stable
        previous = got["messages"]


# -- Messages -----------------------------------------------------------------------------------------------------

HOST = "api.anthropic.com"
UP = f"{HOST}:443/messages"
OTHER = "api.kimi.com:443/messages"
MODEL = "claude-opus-5-5"
UUID = "4a1b2c3d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
KINDS = ("own", "other-heard", "other-unheard", "unsigned", "uuid", "none")


@st.composite
def anthropic_sessions(draw: st.DrawFn) -> tuple[Ledger, list[list[dict[str, Any]]], list[str], list[Reasoning]]:
    """(the mock's ledger, the messages each turn adds, who signed each assistant turn, what memory heard)."""
    ledger = Ledger()
    n = iter(range(10_000))
    turns: list[list[dict[str, Any]]] = [[{"role": "user", "content": "start"}]]
    kinds: list[str] = []
    heard: list[Reasoning] = []
    for t in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(KINDS))
        kinds.append(kind)
        thought = f"thought {next(n)}"
        blocks: list[dict[str, Any]] = []
        if kind != "none":
            signature = {"own": ledger.sign(thought), "other-heard": ledger.sign(thought, "kimi"),
                         "other-unheard": ledger.sign(thought, "minimax"), "unsigned": "", "uuid": UUID}[kind]
            blocks.append({"type": "thinking", "thinking": thought, "signature": signature})
            if kind in ("own", "other-heard"):
                heard.append(Reasoning(SIGNED, block_key(blocks[0]) or "", MODEL, UP if kind == "own" else OTHER))
            if kind in ("own", "other-heard", "other-unheard") and draw(st.booleans()):
                signer = {"own": "anthropic", "other-heard": "kimi", "other-unheard": "minimax"}[kind]
                blocks.append({"type": "redacted_thinking", "data": ledger.redacted(signer)})
                if kind in ("own", "other-heard"):
                    heard.append(Reasoning(SIGNED, block_key(blocks[-1]) or "", MODEL, UP if kind == "own" else OTHER))
        ids = [f"toolu_{t}_{k}" for k in range(draw(st.integers(0, 2)))]
        if not ids or draw(st.booleans()):
            blocks.append({"type": "text", "text": f"visible {next(n)}"})
        blocks += [{"type": "tool_use", "id": i, "name": "Read", "input": {"k": i}} for i in ids]
        answer = {"role": "assistant", "content": blocks}
        user: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": i, "content": f"r {i}"} for i in ids]
        user += [{"type": "text", "text": f"then {next(n)}"}] if not ids or draw(st.booleans()) else []
        turns.append([answer, {"role": "user", "content": user}])
    return ledger, turns, kinds, heard


def visible(messages: list[dict[str, Any]]) -> list[Any]:
    return [b for m in messages for b in (m["content"] if isinstance(m["content"], list) else [m["content"]])
            if not (isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking"))]


def thinking_blocks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for m in messages if m["role"] == "assistant" for b in m["content"]
            if b.get("type") in ("thinking", "redacted_thinking")]


@BUDGET
@given(session=anthropic_sessions(), rejected=st.booleans(), data=st.data())
def test_only_foreign_thinking_leaves_and_the_latest_turn_never(session: Any, rejected: bool,
                                                               data: st.DataObject) -> None:
    ledger, turns, kinds, heard = session
    store = SqliteReasoningStore(":memory:")
    store.note(heard)
    foreign = [b for t, k in zip(turns[1:], kinds, strict=True) if k.startswith("other")
               for b in t[0]["content"] if b["type"] in ("thinking", "redacted_thinking")]
    named: list[str] = []
    if rejected and foreign:
        block = data.draw(st.sampled_from(foreign), label="the block the upstream rejected")
        named.append(block_key(block) or "")
        store.note([Reasoning(FOREIGN, fact_key(named[0], UP), "test", UP),
                    Reasoning(FOREIGN, marker_key(UP), "test", UP)])
    own = {block_key(b) for t, k in zip(turns[1:], kinds, strict=True) if k == "own" for b in t[0]["content"]}
    bad = {block_key(b) for t, k in zip(turns[1:], kinds, strict=True) if k in ("unsigned", "uuid")
           for b in t[0]["content"] if b["type"] == "thinking"}
    previous: list[dict[str, Any]] | None = None
    sent: list[dict[str, Any]] = []
    for n, turn in enumerate(turns):
        sent = sent + turn
        body = {"model": MODEL, "max_tokens": 100, "messages": sent}
        out, got = run(MESSAGES, HOST, body, store)
        messages = got["messages"]
        latest = max((i for i, m in enumerate(sent) if m["role"] == "assistant"), default=None)
        if latest is not None:
            kept_latest = [m for m in messages if m["role"] == "assistant"][-1]
            assert kept_latest == sent[latest]  # never touched
        assert visible(messages) == visible(sent)  # every text, tool_use and tool_result, in order
        older = sent[:latest] if latest is not None else []
        left = {block_key(b) for b in thinking_blocks(messages)}
        for b in thinking_blocks(older):
            key = block_key(b)
            if key in own:
                assert key in left  # this upstream's own block stays
            if key in bad or key in named:
                assert key not in left
        event(f"messages turn: {out.status}")
        older_kinds = kinds[: max(n - 1, 0)]
        if all(k in ("own", "none") for k in older_kinds):
            assert out.status == "untouched"  # older turns of its own: byte-identical
        latest_ok = latest is None or kinds[n - 1] in ("own", "none")
        if latest_ok and not any(k.startswith("other") for k in older_kinds):
            assert ledger.check("anthropic", "messages", got) is None  # memory could know every foreign block
        again, _ = run(MESSAGES, HOST, got, store)
        assert again.status == "untouched"  # idempotent
        if previous is not None and n >= 2 and kinds[n - 2] in ("own", "none"):
            assert messages[: len(previous)] == previous  # prefix-stable while the session goes on here
        previous = messages


@BUDGET
@given(session=anthropic_sessions(), when=st.integers(0, 6), data=st.data())
def test_messages_fast_path_agrees_when_a_rejection_teaches_late(session: Any, when: int, data: st.DataObject) -> None:
    _ledger, turns, kinds, heard = session
    store = SqliteReasoningStore(":memory:")
    store.note(heard)
    foreign = [b for t, k in zip(turns[1:], kinds, strict=True) if k.startswith("other")
               for b in t[0]["content"] if b["type"] in ("thinking", "redacted_thinking")]
    late = []
    if foreign:
        key = block_key(data.draw(st.sampled_from(foreign), label="rejected later")) or ""
        late = [Reasoning(FOREIGN, fact_key(key, UP), "test", UP), Reasoning(FOREIGN, marker_key(UP), "test", UP)]
    fast_path_agrees(MESSAGES, HOST, turns, store, late, when)
