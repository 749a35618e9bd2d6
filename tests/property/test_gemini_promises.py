"""DESIGN §4 for Google Gemini's native API, under generated sessions (tests/property/gemini_sessions.py), each turn
sent through ``engine.process`` as a client resends its history (one llmfix for the whole session, its prefix cache
warm, its memory holding the signatures of the answers it heard, as the addon runs it):

- a valid history — what the strict mock's rules (tests/upstreams/gemini_rules.py) and its signature ledger
  (tests/upstreams/gemini_signatures.py) accept — leaves byte-identical, every turn;
- a broken one: nothing is lost — every non-blank text, every function call (name and arguments), every function
  response (name and response, still a ``functionResponse`` — as text naming it only where there are more responses
  of its name than calls, as pair-tool-calls keeps a response that answers none), every image
  (by the digest of its bytes) reaches the upstream, as many times as sent, but for the copies drop-repeated-responses
  records dropping (a response repeating an earlier one of its content exactly, with its images: a copy of one that
  stays); blank text parts may go (order-gemini-turns); the strict mock accepts the result; sending the result again
  changes nothing;
- prefix-stable: each turn's repaired ``contents`` is, content by content and byte by byte, the start of the next
  turn's, so a prompt cache keyed on the prefix keeps hitting — but for the signature restore-thought-signatures
  gave a step while it was in the current turn, which is gone once the turn is over (its documented design: older
  turns are never given one; :func:`is_prefix`); and an llmfix that parses every body whole sends the
  same contents as the one that recognises the appends (``body/prefix.py``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson
from hypothesis import event, given

from llmfix import engine
from llmfix.body.media import digest
from llmfix.dialects.registry import GEMINI
from llmfix.memory.learn import StreamLearner
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import upstream_id
from tests.property import promises
from tests.property.budget import BUDGET
from tests.property.gemini_sessions import HOST, Session, path_of, sessions
from tests.upstreams import gemini_rules
from tests.upstreams.gemini_rules import member, parts_of

DROPPED_COPIES = "drop-repeated-responses"
UPSTREAM = upstream_id(HOST, 443, "gemini")
SIGNATURE_KEYS = frozenset({"thoughtSignature", "thought_signature"})


def hear(s: Session) -> SqliteReasoningStore:
    """A reasoning memory that heard the session's answers llmfix saw streamed (dialects/gemini/learn.py)."""
    store = SqliteReasoningStore(":memory:")
    for parts in s.heard:
        learner = StreamLearner("gemini", lambda _: None, on_reasoning=store.note, upstream=UPSTREAM)
        event_ = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]}
        learner.feed(b"data: " + orjson.dumps(event_) + b"\r\n\r\n")
        learner.feed(b"")
    return store


def send(settings: engine.Settings, s: Session, raw: bytes, flow: str) -> engine.Outcome:
    out = engine.process(engine.request(GEMINI, HOST, 443, path_of(s.model), raw, None, flow), settings)
    assert out.status != "failed", f"a generated body was reported as bad input: {out.reason}"
    return out


def rejection(s: Session, body: dict[str, Any]) -> str | None:
    """What the strict mock answers ``body`` with, or None when it takes it."""
    found = gemini_rules.check(body) or s.ledger.check(gemini_rules.contents_of(body), backend="gemini",
                                                       model=s.model)
    return None if found is None else f"{found.reason}: {found.message}"


def canon(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def parts(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every part of the body's contents, and the parts inside its function responses."""
    for content in gemini_rules.contents_of(body):
        for part in parts_of(content):
            yield part
            yield from (p for p in member(member(part, "functionResponse"), "parts") or () if isinstance(p, dict))


def texts(body: dict[str, Any]) -> list[str]:
    return [t for p in parts(body) if isinstance(t := member(p, "text"), str)]


def call_list(body: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(member(c, "name"), member(c, "args")) for p in parts(body) if isinstance(c := member(p, "functionCall"),
                                                                                          dict)]


def calls(body: dict[str, Any]) -> Counter[bytes]:
    return Counter(canon(list(c)) for c in call_list(body))


def responses(body: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(member(r, "name"), member(r, "response")) for p in parts(body)
            if isinstance(r := member(p, "functionResponse"), dict)]


def images(body: dict[str, Any]) -> Counter[str]:
    return Counter(digest(member(d, "data")) for p in parts(body) if isinstance(d := member(p, "inlineData"), dict))


def dropped_copies(outcome: engine.Outcome) -> dict[str, Any]:
    """What drop-repeated-responses recorded dropping, as a body holding those parts."""
    dropped = [p for c in outcome.changes if c.repair == DROPPED_COPIES for p in c.before or ()]
    return {"contents": [{"role": "user", "parts": dropped}]}


def nothing_lost(sent: dict[str, Any], got: dict[str, Any], outcome: engine.Outcome) -> None:
    copies = dropped_copies(outcome)
    out_texts = texts(got)
    for text in texts(sent):
        if text.strip():
            assert any(text in t for t in out_texts), f"text {text!r} is missing from the output"
    lost_calls = calls(sent) - calls(got)
    assert not lost_calls, f"function calls lost: {list(lost_calls)}"
    kept = Counter(canon(r) for r in responses(got))
    dropped = Counter(canon(r) for r in responses(copies))
    as_text = Counter(canon(r) for r in responses(sent)
                      if any(json.dumps(r[1], ensure_ascii=False) in t for t in out_texts))
    lost = Counter(canon(r) for r in responses(sent)) - kept - dropped
    assert not lost - as_text, f"function responses lost: {list(lost - as_text)}"
    for name in {n for n, _ in responses(sent)}:  # as text only a surplus over the calls of that name
        surplus = sum(n == name for n, _ in responses(sent)) - sum(n == name for n, _ in responses(copies)) \
            - sum(n == name for n, _ in call_list(sent))
        as_text_only = sum(k for r, k in lost.items() if orjson.loads(r)[0] == name)
        assert as_text_only <= max(0, surplus), f"{name} responses kept only as text although their calls are there"
    for r in responses(copies):
        assert kept[canon(r)], f"a response dropped as a copy has no original left: {r}"
    lost_images = images(sent) - images(got) - images(copies)
    assert not lost_images, f"{sum(lost_images.values())} image(s) lost"
    extra = images(got) - images(sent)
    assert not extra, f"{sum(extra.values())} image(s) invented or duplicated"


def check_turn(settings: engine.Settings, s: Session, turns: int) -> list[Any]:
    """Every promise for the request of turn ``turns`` of a broken (or valid) session; the repaired contents."""
    raw, sent = s.raw(turns), s.body(turns)
    outcome = send(settings, s, raw, f"t{turns}")
    event(f"{'+'.join(outcome.repairs) or 'untouched'}")
    event(f"signatures from memory: {'some' if any('from memory' in c.summary for c in outcome.changes) else 'none'}")
    out, got = promises.body_of(raw, outcome)
    nothing_lost(sent, got, outcome)
    assert {k: v for k, v in got.items() if k != "contents"} == {k: v for k, v in sent.items() if k != "contents"}
    assert (why := rejection(s, got)) is None, f"the strict mock rejects the output: {why}"
    if outcome.status == "repaired":
        again = send(settings, s, out, f"t{turns}-again")
        assert again.status == "untouched", f"not idempotent: {[c.line() for c in again.changes]}"
    return got["contents"]


def unsigned_calls(content: Any) -> bytes:
    """A content with its function calls' signatures left out."""
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        return orjson.dumps(content)
    return orjson.dumps({**content, "parts": [{k: v for k, v in p.items() if k not in SIGNATURE_KEYS}
                                              if isinstance(p, dict) and member(p, "functionCall") else p
                                              for p in content["parts"]]})


def is_prefix(earlier: list[Any], later: list[Any]) -> None:
    """Turn N's repaired contents are the start of turn N+1's, byte for byte — but for the one difference the design
    documents: restore-thought-signatures gives a step its signature only while the step is in the current turn
    ("older turns are never given one", README), so once the user spoke again that step goes as the client sent it.
    Then the prompt cache misses from that step on; seen here as an event."""
    assert len(later) >= len(earlier), f"turn N+1 has fewer contents ({len(later)}) than turn N ({len(earlier)})"
    for i, (a, b) in enumerate(zip(earlier, later, strict=False)):
        if orjson.dumps(a) != orjson.dumps(b):
            assert unsigned_calls(a) == unsigned_calls(b), f"content {i} differs between turn N and N+1:\n{a}\n{b}"
            event("prefix: a stand-in given in the current turn gone once the turn is over")


@BUDGET
@given(s=sessions())
def test_a_valid_history_leaves_byte_identical(s: Session) -> None:
    settings = engine.Settings(reasoning=hear(s))
    for turns in range(1, len(s.chunks) + 1):
        body = s.body(turns)
        assert rejection(s, body) is None, "the generator made a history the strict mock refuses"
        outcome = send(settings, s, s.raw(turns), f"t{turns}")
        assert (outcome.status, outcome.body, outcome.changes) == ("untouched", None, ()), \
            [c.line() for c in outcome.changes]
    event(f"turns: {len(s.chunks)}")


@BUDGET
@given(s=sessions(broken=True))
def test_a_broken_history_loses_nothing_and_is_accepted_turn_after_turn(s: Session) -> None:
    event(f"broken: {'+'.join(sorted(s.broken))}")
    store = hear(s)
    fast, whole = engine.Settings(reasoning=store), engine.Settings(reasoning=store, prefix=None)
    previous: list[Any] | None = None
    for turns in range(1, len(s.chunks) + 1):
        contents = check_turn(fast, s, turns)
        raw = s.raw(turns)
        assert promises.body_of(raw, send(whole, s, raw, f"t{turns}"))[1]["contents"] == contents, \
            "the prefix fast path and the whole parse disagree"
        if previous is not None:
            is_prefix(previous, contents)
        previous = contents
