"""restore-tool-call-signatures under generated sessions at Gemini's OpenAI-compatible door (DESIGN §4), turn by
turn as the client resends its history.

A session: user turns, each of one to three steps (an assistant message of one to three parallel calls, or
sequential ones, each signed; then their results); the door streams each answer in one of its documented styles;
memory heard some of them; the client keeps each call's ``extra_content``, or drops it (all of them, or some).
Every turn: a history that kept its signatures is byte-identical; in a repaired one only ``extra_content`` of the
current turn's calls changed (older turns as sent), each to the very signature the door issued with that call, or —
memory having none — Google's dummy on the first call of a message; the strict door accepts it; idempotent; and an
llmfix that continues its certain checks from the last turn answers as one that repairs every body whole, also when
memory hears an answer late (a fleet instance's write).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from llmfix import engine
from llmfix.dialects.registry import CHAT
from llmfix.memory.learn import StreamLearner
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import Reasoning
from tests.property.budget import BUDGET
from tests.property.test_reasoning_promises import Cache
from tests.upstreams.gemini_canned import function_calls
from tests.upstreams.gemini_door import DoorStyle, check, chunks, sse_text
from tests.upstreams.gemini_signatures import SignatureLedger

HOST = "generativelanguage.googleapis.com"
UP = f"{HOST}:443/chat"
MODEL = "gemini-3-flash-preview"
DUMMY = "skip_thought_signature_validator"
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
styles = st.builds(DoorStyle, st.sampled_from(["same", "omit", "increment"]), st.sampled_from(["trailing", "inline"]))


class Session:
    """What a generated session holds: the messages each turn adds, the streams memory heard (and those it hears
    late), and the signature the door issued with each call id."""

    def __init__(self) -> None:
        self.ledger = SignatureLedger()
        self.model = MODEL
        self.turns: list[list[dict[str, Any]]] = []
        self.heard: list[str] = []
        self.late: list[str] = []
        self.issued: dict[str, str] = {}
        self.first: set[str] = set()  # the ids of the first call of each message


def signature(call: dict[str, Any]) -> str | None:
    return ((call.get("extra_content") or {}).get("google") or {}).get("thought_signature")


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    s = Session()
    s.model = draw(st.sampled_from([MODEL, MODEL, "gemini-2.5-flash"]), label="model")  # 2.5 signs and checks none
    history: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    client = draw(st.sampled_from(["keeps", "drops", "some"]), label="client")
    n = 0
    for t in range(draw(st.integers(1, 3))):
        turn = [{"role": "user", "content": f"turn {t}"}]
        for _ in range(draw(st.integers(1, 3))):
            k = draw(st.integers(1, 3))
            answer = function_calls(*(("read_file", {"path": f"f{(n := n + 1)}.md"}) for _ in range(k)),
                                    sequential=draw(st.booleans()))
            body = {"model": s.model, "stream": True, "messages": history + turn, "tools": TOOLS}
            sse = sse_text(chunks(answer, s.ledger, body, draw(styles)))
            when = draw(st.sampled_from(["heard", "heard", "late", "never"]), label="memory")
            (s.heard if when == "heard" else s.late if when == "late" else []).append(sse)
            calls = copy.deepcopy(answer.issued)
            s.issued.update({c["id"]: sig for c in calls if (sig := signature(c))})
            s.first.add(calls[0]["id"])
            for c in calls:
                if client == "drops" or (client == "some" and draw(st.booleans())):
                    c.pop("extra_content", None)
            turn += [{"role": "assistant", "content": None, "tool_calls": calls},
                     *({"role": "tool", "tool_call_id": c["id"], "content": f"text {c['id'][-6:]}"} for c in calls)]
        s.turns.append(turn)
        history += turn
    event(f"client {client}")
    return s


def hear(store: SqliteReasoningStore, streams: list[str]) -> None:
    for sse in streams:
        learner = StreamLearner("chat", lambda _: None, on_reasoning=store.note, upstream=UP)
        learner.feed(sse.encode())
        learner.feed(b"")


def process(body: dict[str, Any], settings: engine.Settings) -> tuple[engine.Outcome, dict[str, Any]]:
    out = engine.process(engine.Request(CHAT, HOST, 443, json.dumps(body).encode()), settings)
    assert out.status != "failed", out.reason
    return out, json.loads(out.body) if out.body is not None else body


def bare(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without any call's ``extra_content``."""
    return [{**m, "tool_calls": [{k: v for k, v in c.items() if k != "extra_content"} for c in m["tool_calls"]]}
            if m.get("tool_calls") else m for m in messages]


@BUDGET
@given(session=sessions())
def test_every_turn_is_repaired_to_what_the_door_issued_and_nothing_else(session: Session) -> None:
    store = SqliteReasoningStore(":memory:")
    hear(store, session.heard)
    sent: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for turn in session.turns:
        sent = sent + turn
        body = {"model": session.model, "messages": sent, "tools": TOOLS}
        out, got = process(body, engine.Settings(reasoning=store))
        messages = got["messages"]
        current = max(i for i, m in enumerate(sent) if m["role"] == "user")
        assert messages[:current] == sent[:current]  # older turns as sent
        assert bare(messages) == bare(sent)  # only extra_content changed
        for m, original in zip(messages[current:], sent[current:], strict=True):
            for k, (c, o) in enumerate(zip(m.get("tool_calls") or [], original.get("tool_calls") or [], strict=True)):
                if signature(o) is not None:
                    assert c == o  # a carried signature is never replaced
                elif (got_sig := signature(c)) is not None:
                    assert got_sig in (session.issued.get(c["id"]), DUMMY)
                    assert got_sig != DUMMY or k == 0  # the dummy only on the first call of a message
                else:  # every first call of the current turn leaves signed, where the model checks them
                    assert k > 0 or session.model != MODEL
        assert check(got, session.ledger) is None  # the strict door accepts it
        event(f"{out.status}")
        if all(signature(c) is not None or c["id"] not in session.issued
               for m in sent for c in m.get("tool_calls") or []):
            assert (out.status, out.body) == ("untouched", None)  # the client kept every signature
        if out.body is not None:
            again, _ = process(got, engine.Settings(reasoning=store))
            assert again.status == "untouched"  # idempotent


def late_records(session: Session) -> list[Reasoning]:
    """What memory learns of the answers it hears late."""
    records: list[Reasoning] = []
    for sse in session.late:
        learner = StreamLearner("chat", lambda _: None, on_reasoning=records.extend, upstream=UP)
        learner.feed(sse.encode())
        learner.feed(b"")
    return records


def requests(turn: list[dict[str, Any]]) -> list[int]:
    """Where the client sends within a turn: after its user message, then after each step's results."""
    return [1, *(i + 1 for i, m in enumerate(turn) if m["role"] == "tool"
                 and (i + 1 == len(turn) or turn[i + 1]["role"] == "assistant"))]


@BUDGET
@given(session=sessions(), when=st.integers(0, 3))
def test_the_fast_path_agrees_when_memory_hears_late(session: Session, when: int) -> None:
    store = SqliteReasoningStore(":memory:")
    hear(store, session.heard)
    late = late_records(session)
    cache = Cache(min_size=0)
    fast = engine.Settings(reasoning=store, prefix=cache)
    whole = engine.Settings(reasoning=store, prefix=None)
    sent: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for n, turn in enumerate(session.turns):
        if n == when:
            store.note(late)
        for cut in requests(turn):
            body = {"model": session.model, "messages": sent + turn[:cut], "tools": TOOLS}
            a, b = (engine.process(engine.Request(CHAT, HOST, 443, json.dumps(body).encode()), s)
                    for s in (fast, whole))
            assert (a.status, a.body, a.lines) == (b.status, b.body, b.lines)
            event(f"{a.status}")
        sent = sent + turn
    event(f"appends found: {min(cache.found, 3)}")
