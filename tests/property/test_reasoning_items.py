"""The reasoning-item repairs under generated Responses sessions (pair-reasoning-items, drop-unverifiable-reasoning).

A session: each turn the model answers with reasoning items, calls and messages (what the strict mock's ledger
issues and llmfix's memory learns, as the streamed answer teaches it), and the client replays the answer either as
issued (Codex; also without ids, or reasoning items without theirs) or broken the ways clients break it: the
reasoning item dropped with the ids kept, moved after the outputs, the call put between it and its message, the
item it produced dropped. For every turn of every session:

- a history replayed as issued leaves byte-identical;
- nothing is lost: every call (call_id, name, arguments), every output and every message text arrives as often as
  it was sent; only reasoning items may go, and ids;
- with every broken answer learned, the strict upstream accepts the result (its reasoning checks and its pairing);
- idempotent, deterministic, prefix-stable over turns, and the fast path (prefix cache) answers as the whole parse;
- with ``previous_response_id`` (the server holds the chain) nothing changes on memory alone.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections import Counter
from typing import Any

import orjson
from hypothesis import event, given
from hypothesis import strategies as st

from llmfix import engine
from llmfix.body.prefix import PrefixCache
from llmfix.dialects.registry import RESPONSES
from llmfix.dialects.responses.learn import reasoning_in_output
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import Reasoning
from llmfix.retry import decide, rejections
from llmfix.retry.learned import LearnedQuirks
from tests.property.budget import BUDGET
from tests.upstreams import rules
from tests.upstreams.reasoning_items_rules import Ledger, Organization

ORG = Organization("org-property")
HOST = "api.openai.com"
UP = "api.openai.com:443/responses"
REPLAYS = ("as issued", "no ids", "unnamed reasoning", "lost", "moved", "call first", "follower dropped")
BROKEN = frozenset({"lost", "moved", "call first", "follower dropped"})
texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@st.composite
def answer(draw: Any, turn: int) -> list[dict[str, Any]]:
    """One response's output: steps of [reasoning?] + (calls | a message), as a reasoning model issues them."""
    output: list[dict[str, Any]] = []
    for step in range(draw(st.integers(1, 2))):
        tag = f"{turn}_{step}"
        if draw(st.booleans()) or step == 0:
            summary = [{"type": "summary_text", "text": draw(texts)}] if draw(st.booleans()) else []
            output.append({"id": f"rs_{tag}", "type": "reasoning", "summary": summary,
                           "encrypted_content": ORG.seal(f"rs_{tag}")})
        if draw(st.booleans()):
            output.append({"id": f"msg_{tag}", "type": "message", "status": "completed", "role": "assistant",
                           "content": [{"type": "output_text", "text": draw(texts), "annotations": []}]})
        for k in range(draw(st.integers(0 if output[-1]["type"] == "message" else 1, 3))):
            output.append({"id": f"fc_{tag}_{k}", "type": "function_call", "status": "completed",
                           "call_id": f"call_{tag}_{k}", "name": "Read", "arguments": json.dumps({"p": draw(texts)})})
    return output


def outputs(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function_call_output", "call_id": i["call_id"], "output": f"result {i['call_id']}"}
            for i in output if i["type"] == "function_call"]


def replay(output: list[dict[str, Any]], how: str) -> list[dict[str, Any]]:
    """What the client sends back of ``output`` (and the outputs of its calls)."""
    items, outs = copy.deepcopy(output), outputs(output)
    reasoning = [i for i, item in enumerate(items) if item["type"] == "reasoning"]
    if how == "no ids":  # pi-ai without the reasoning: no ids, nothing asks for a reasoning item
        items = [{k: v for k, v in item.items() if k != "id"} for item in items if item["type"] != "reasoning"]
    elif how == "unnamed reasoning":  # the reasoning item without its id: its content names it
        items = [{k: v for k, v in item.items() if k != "id" or item["type"] != "reasoning"} for item in items]
    elif how == "lost":
        items = [item for item in items if item["type"] != "reasoning"]
    elif how == "moved":
        items = [item for item in items if item["type"] != "reasoning"] + [items[i] for i in reasoning]
        return [*items[: -len(reasoning)], *outs, *items[-len(reasoning):]]
    elif how == "call first":  # Continue: the calls between a reasoning item and its message
        r = reasoning[0]
        nxt = r + 1
        if nxt < len(items) and items[nxt]["type"] == "message":
            calls = [k for k in range(nxt + 1, len(items)) if items[k]["type"] == "function_call"]
            if calls:
                items.insert(nxt, items.pop(calls[0]))
    elif how == "follower dropped":
        r = reasoning[0]
        if r + 1 < len(items):
            gone = items.pop(r + 1)
            outs = [o for o in outs if o["call_id"] != gone.get("call_id")]
    return [*items, *outs]


@st.composite
def sessions(draw: Any) -> tuple[list[list[dict[str, Any]]], list[list[dict[str, Any]]], list[str], list[bool]]:
    """(the answers, the chunks the client sends per turn, how each answer is replayed, which were learned)."""
    answers, chunks, hows, learned = [], [[{"role": "user", "content": draw(texts)}]], [], []
    for turn in range(1, draw(st.integers(1, 4)) + 1):
        output = draw(answer(turn))
        how = draw(st.sampled_from(REPLAYS))
        chunk = replay(output, how)
        if draw(st.booleans()):
            chunk.append({"role": "user", "content": draw(texts)})
        answers.append(output)
        chunks.append(chunk)
        hows.append(how)
        learned.append(draw(st.integers(0, 4)) > 0)
    return answers, chunks, hows, learned


def body(chunks: list[list[dict[str, Any]]], turns: int, **top: Any) -> dict[str, Any]:
    return {"model": "gpt-5.5", "input": [i for c in chunks[: turns + 1] for i in c], "store": False, **top}


def memory(answers: list[list[dict[str, Any]]], learned: list[bool]) -> SqliteReasoningStore:
    store = SqliteReasoningStore(":memory:")
    for output, known in zip(answers, learned, strict=True):
        if known:
            store.note(Reasoning(r.kind, r.key, r.value, UP) for r in reasoning_in_output(output))
    return store


def process(store: Any, raw: bytes, cache: PrefixCache | None = None) -> engine.Outcome:
    settings = engine.Settings(reasoning=store, prefix=cache)
    return engine.process(engine.Request(RESPONSES, HOST, 443, raw), settings)


def kept(items: list[dict[str, Any]]) -> Counter[str]:
    """What must never be lost: calls, outputs, message texts (reasoning items and ids may go)."""
    out: Counter[str] = Counter()
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            out[json.dumps([item["call_id"], item["name"], item["arguments"]])] += 1
        elif kind == "function_call_output":
            out[json.dumps([item["call_id"], item["output"]])] += 1
        elif kind == "message":
            content = item["content"]
            out[json.dumps([item["role"], content if isinstance(content, str) else [p["text"] for p in content]])] += 1
    return out


def ids_once(items: list[dict[str, Any]]) -> None:
    ids = [i["id"] for i in items if "id" in i]
    assert len(ids) == len(set(ids)), ids


@BUDGET
@given(session=sessions())
def test_reasoning_repairs_hold_their_promises_turn_after_turn(session: Any) -> None:
    answers, chunks, hows, learned = session
    ledger = Ledger()
    for output in answers:
        ledger.issue(ORG, {"output": output})
    store = memory(answers, learned)
    cache = PrefixCache(min_size=0)
    previous: list[Any] | None = None
    for turns in range(1, len(chunks)):
        sent = body(chunks, turns)
        raw = orjson.dumps(sent)
        outcome = process(store, raw)
        event(f"{'+'.join(sorted(set(hows[:turns])))}: {'+'.join(outcome.repairs) or 'untouched'}")
        got = orjson.loads(outcome.body) if outcome.body is not None else sent
        broken = [h in BROKEN for h in hows[:turns]]
        if not any(broken):
            assert outcome.status == "untouched", outcome.lines  # a history replayed as issued: byte-identical
        assert kept(got["input"]) == kept(sent["input"])
        ids_once(got["input"])
        if all(known for known, b in zip(learned, broken, strict=False) if b):
            assert ledger.check(ORG, got) is None, (hows[:turns], outcome.lines)
            assert rules.check("openai", "/v1/responses", got) is None
        out = outcome.body or raw
        assert process(store, out).status == "untouched", "not idempotent"
        assert (process(memory(answers, learned), raw).body or raw) == out, "not deterministic"
        assert (process(store, raw, cache).body or raw) == out, "the fast path answered otherwise"
        if previous is not None:
            assert got["input"][: len(previous)] == previous, "not prefix-stable"
        previous = got["input"]
    event(f"appends recognised: {'some' if cache.hits else 'none'}")


@BUDGET
@given(session=sessions())
def test_with_server_state_memory_alone_changes_nothing(session: Any) -> None:
    """With ``previous_response_id`` the input carries only the new items; a reasoning item missing from it may be
    in the server's chain, and an id the server holds would be a duplicate anyway: memory alone changes nothing."""
    answers, chunks, _hows, learned = session
    store = memory(answers, [True] * len(learned))
    for turns in range(1, len(chunks)):
        chained = {"model": "gpt-5.5", "previous_response_id": f"resp_{turns - 1}", "input": chunks[turns]}
        assert process(store, orjson.dumps(chained)).status == "untouched"


OTHER = Organization("org-property-other")


def retried(store: Any, ledger: Ledger, org: Organization, sent: dict[str, Any], cache: PrefixCache
            ) -> tuple[dict[str, Any], int]:
    """``sent`` through llmfix to ``org`` as repair-and-retry does it, with the session's prefix cache (the
    fast path must see what a rejection taught about older items): (what the upstream accepted, requests)."""
    raw = orjson.dumps(sent)
    first = process(store, raw, cache)
    assert first.body == process(store, raw).body, "the fast path answered otherwise"
    out = orjson.loads(first.body) if first.body is not None else sent
    rejection = ledger.check(org, out)
    if rejection is None:
        return out, 1
    found = rejections.match("responses", rejection.status, orjson.dumps(rejection.body))
    assert found is not None, rejection.message
    settings = engine.Settings(reasoning=store, quirks=LearnedQuirks(None, 3600), prefix=cache)
    d = asyncio.run(decide.decide(found, rejection.status, engine.Request(RESPONSES, HOST, 443, raw),
                                  first.body or raw, settings))
    assert d.outcome is not None, d.why
    decide.learn(d, settings)
    again = orjson.loads(d.outcome.body)
    assert ledger.check(org, again) is None, (rejection.message, ledger.check(org, again))
    return again, 2


def sealed_by(org: Organization, output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**i, "encrypted_content": org.seal(i["id"])} if i["type"] == "reasoning" else i for i in output]


@BUDGET
@given(session=sessions(), switch=st.integers(1, 4))
def test_after_an_account_switch_two_requests_then_one_and_nothing_lost(session: Any, switch: int) -> None:
    """Answers of one organization replayed to another (Codex after an account switch, whose later answers come
    from the new account): the first request after the switch is rejected and resent once repaired, every later
    turn is repaired up front; calls, outputs and texts stay, the repaired prefix stays put."""
    answers, chunks, hows, learned = session
    switch = min(switch, len(answers))
    # answer t is the answer to request t - 1: those up to the switch are the first account's
    answers = [sealed_by(ORG if turn <= switch else OTHER, o) for turn, o in enumerate(answers, 1)]
    chunks = [chunks[0], *(replay(o, h if h not in BROKEN else "as issued") for o, h in zip(answers, hows,
                                                                                          strict=True))]
    ledger = Ledger()
    for turn, output in enumerate(answers, 1):
        ledger.issue(ORG if turn <= switch else OTHER, {"output": output})
    store = memory(answers, learned)
    cache = PrefixCache(min_size=0)
    previous: list[Any] | None = None
    for turns in range(1, len(chunks)):
        sent = body(chunks, turns)
        got, requests = retried(store, ledger, ORG if turns < switch else OTHER, sent, cache)
        event(f"requests: {requests}" + (" (switch turn)" if turns == switch else ""))
        assert requests == 1 or turns == switch
        assert kept(got["input"]) == kept(sent["input"])
        if previous is not None and turns != switch:
            assert got["input"][: len(previous)] == previous, "not prefix-stable"
        previous = got["input"]
    event(f"appends recognised: {'some' if cache.hits else 'none'}")
