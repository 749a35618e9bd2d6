"""restore-tool-call-signatures through `engine.process`, judged by the strict mock of Gemini's OpenAI-compatible
door (tests/upstreams/gemini_door.py): a lost signature comes back byte for byte on its call, a session llmfix never
heard gets Google's dummy on the first call of each message of the current turn, valid sessions and older turns are
left as they are, a refused signature is removed, and nothing of a signature reaches the log."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from llmfix import engine
from llmfix.body.conversation import loads, parse
from llmfix.dialects.chat.learn_signatures import KIND, signature_key
from llmfix.dialects.registry import CHAT
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import Reasoning
from llmfix.profiles import ProfileTable
from llmfix.repairs import restore_tool_call_signatures, settled
from llmfix.repairs.base import Context
from tests.upstreams.gemini_canned import function_calls
from tests.upstreams.gemini_door import DoorStyle, check, chunks, sse_text
from tests.upstreams.gemini_signatures import SignatureLedger
from tests.upstreams.reasoning_sessions import hear, sent

HOST = "generativelanguage.googleapis.com"
UP = f"{HOST}:443/chat"
MODEL = "gemini-3-flash-preview"
DUMMY = "skip_thought_signature_validator"
NAME = restore_tool_call_signatures.NAME
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
A, B, C = {"path": "a.md"}, {"path": "b.md"}, {"path": "c.md"}


class Door:
    """The strict door's ledger, and llmfix's memory of what it streamed."""

    def __init__(self) -> None:
        self.ledger = SignatureLedger()
        self.store = SqliteReasoningStore(":memory:")

    def answer(self, messages: list[dict[str, Any]], *calls: dict[str, Any], sequential: bool = False,
               heard: bool = True, upstream: str = UP) -> list[dict[str, Any]]:
        """The door answers ``messages`` with these parallel ``read_file`` calls (streamed, heard by llmfix as the
        answer of ``upstream``); the calls it issued."""
        answer = function_calls(*(("read_file", c) for c in calls), sequential=sequential)
        body = {"model": MODEL, "stream": True, "messages": messages, "tools": TOOLS}
        sse = sse_text(chunks(answer, self.ledger, body, DoorStyle()))
        if heard:
            hear(self.store, "chat", sse, upstream)
        return answer.issued

    def refused(self, body: dict[str, Any]) -> Any:
        return check(body, self.ledger)


def stripped(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in c.items() if k != "extra_content"} for c in calls]


def step(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An assistant message making ``calls``, and their results."""
    return [{"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": c["id"], "content": f"text of {c['id'][-4:]}"} for c in calls)]


def body_of(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": MODEL, "messages": messages, "tools": TOOLS}


def run(body: dict[str, Any] | bytes, store: Any, host: str = HOST) -> engine.Outcome:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return engine.process(engine.Request(CHAT, host, 443, raw), engine.Settings(reasoning=store))


def sig(call: dict[str, Any]) -> str:
    return call["extra_content"]["google"]["thought_signature"]


USER = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Read a.md and b.md."}]


def test_a_lost_signature_comes_back_byte_for_byte_on_its_call_and_nothing_else_changes() -> None:
    door = Door()
    issued = door.answer(USER, A, B)
    turn2 = body_of([*USER, *step(stripped(issued))])
    assert door.refused(turn2) is not None  # the 400 this repair exists for
    out = run(turn2, door.store)
    got = sent(out, turn2)
    assert out.repairs == [NAME]
    expected = copy.deepcopy(turn2)
    expected["messages"][2]["tool_calls"][0]["extra_content"] = issued[0]["extra_content"]
    assert got == expected  # the first call's own signature; the second was issued none and gets none
    assert sig(got["messages"][2]["tool_calls"][0]) == sig(issued[0])
    assert door.refused(got) is None
    assert out.body is not None and run(out.body, door.store).status == "untouched"  # idempotent
    [change] = out.changes
    signature = sig(issued[0])
    assert change.location == "messages[2].tool_calls[0].extra_content.google.thought_signature"
    assert "given the one generativelanguage.googleapis.com:443/chat issued with it, from memory" in change.line()
    assert signature not in json.dumps([c.record() for c in out.changes]) + "\n".join(out.lines)
    assert f"<thoughtSignature {len(signature)} chars sha256:" in json.dumps(change.record())


def test_a_valid_session_leaves_byte_identical() -> None:
    door = Door()
    issued = door.answer(USER, A, B)
    turn2 = body_of([*USER, *step(issued)])
    assert door.refused(turn2) is None
    out = run(turn2, door.store)
    assert (out.status, out.body, out.changes) == ("untouched", None, ())


def test_a_session_llmfix_never_heard_gets_the_dummy_on_the_first_call_of_each_message_of_the_current_turn() -> None:
    door = Door()
    first = door.answer(USER, A, B, heard=False)
    second = door.answer([*USER, *step(first)], C, heard=False)  # a second step of the same turn
    older = [{"role": "user", "content": "earlier"}, *step(stripped(door.answer(USER, C, heard=False)))]
    body = body_of([USER[0], *older, USER[1], *step(stripped(first)), *step(stripped(second))])
    assert door.refused(body) is not None
    out = run(body, SqliteReasoningStore(":memory:"))
    got = sent(out, body)["messages"]
    assert "extra_content" not in json.dumps(got[:5])  # the older turn needs none and gets none
    assert [[c.get("extra_content") for c in m["tool_calls"]] for m in got if m.get("tool_calls")][1:] == [
        [{"google": {"thought_signature": DUMMY}}, None], [{"google": {"thought_signature": DUMMY}}]]
    assert door.refused(body_of(got)) is None
    assert out.changes[0].line().endswith(
        f"signature missing, given Google's stand-in {DUMMY!r} (no signature of this call in memory)")
    assert run(body, None).repairs == [NAME]  # no memory at all: the same


def test_sequential_steps_each_get_their_own_and_other_extra_content_stays() -> None:
    door = Door()
    first = door.answer(USER, A)
    second = door.answer([*USER, *step(first)], B, C, sequential=True)  # both calls of this answer signed
    kept = [{**c, "extra_content": {"google": {"cached_content": "x"}, "other": 1}} for c in stripped(first)]
    body = body_of([*USER, *step(kept), *step(stripped(second))])
    got = sent(run(body, door.store), body)["messages"]
    assert got[2]["tool_calls"][0]["extra_content"] == {
        "google": {"cached_content": "x", "thought_signature": sig(first[0])}, "other": 1}
    assert [sig(c) for c in got[4]["tool_calls"]] == [sig(c) for c in second]
    assert door.refused(body_of(got)) is None


def test_another_upstream_or_another_session_gets_nothing_from_memory() -> None:
    door = Door()
    issued = door.answer(USER, A, B)
    turn2 = body_of([*USER, *step(stripped(issued))])
    assert run(turn2, door.store, "api.openai.com").status == "untouched"  # not a door: nothing at all
    relay = run(turn2, door.store, "gemini.relay.example")
    assert relay.status == "untouched"  # no flag there (until its 400 teaches it)
    # another session with the same call, another id: the dummy, never this session's signature
    other = copy.deepcopy(turn2)
    other["messages"][2]["tool_calls"][0]["id"] = "function-call-another"
    other["messages"][3]["tool_call_id"] = "function-call-another"
    assert sig(sent(run(other, door.store), other)["messages"][2]["tool_calls"][0]) == DUMMY


def test_a_key_two_sessions_made_alike_gives_nothing() -> None:
    store = SqliteReasoningStore(":memory:")
    key = signature_key(UP, "c1", "read_file", "function", json.dumps(A))
    store.note([Reasoning(KIND, key, "first", UP)])
    store.note([Reasoning(KIND, key, "second", UP)])
    body = body_of([*USER, *step([{"id": "c1", "type": "function", "function": {
        "name": "read_file", "arguments": json.dumps(A)}}])])
    assert sig(sent(run(body, store), body)["messages"][2]["tool_calls"][0]) == DUMMY


@pytest.mark.parametrize("extra", ["not an object", {"google": "not an object"}])
def test_an_extra_content_that_is_no_object_is_left_as_it_came(extra: Any) -> None:
    body = body_of([*USER, *step([{"id": "c1", "type": "function", "extra_content": extra, "function": {
        "name": "read_file", "arguments": "{}"}}])])
    out = run(body, SqliteReasoningStore(":memory:"))
    assert (out.status, out.body) == ("untouched", None)


# -- the certain check -------------------------------------------------------------------------------------------


def context(store: Any) -> Context:
    resolved = ProfileTable().resolve(HOST, 443, MODEL, CHAT)
    return Context(CHAT, resolved.profile, MODEL, None, None, reasoning=store, upstream=UP)


def items(body: dict[str, Any]) -> list[Any]:
    conv = parse(CHAT, loads(json.dumps(body).encode()))
    assert conv is not None
    return conv.items


def test_the_certain_check_is_sure_of_a_signed_turn_and_asks_again_for_a_call_memory_learns_later() -> None:
    door = Door()
    issued = door.answer(USER, A, B)
    store = SqliteReasoningStore(":memory:")
    repair = restore_tool_call_signatures.REPAIR
    signed = items(body_of([*USER, *step(issued)]))
    state, n = settled.settle([repair], None, signed[:3], 0, context(store))
    assert state is not None and n == 1
    state, n = settled.settle([repair], state, signed, 3, context(store))
    assert state is not None and n == 1  # the second call has no signature, and memory none for it
    late = signature_key(UP, issued[1]["id"], "read_file", "function", issued[1]["function"]["arguments"])
    store.note([Reasoning(KIND, late, "landed late", UP)])
    assert settled.settle([repair], state, signed, len(signed), context(store)) == (None, 0)
    assert settled.settle([repair], None, items(body_of([*USER, *step(stripped(issued))])), 0,
                          context(store)) == (None, 0)  # the first call unsigned: not certain


def test_an_older_generation_gets_what_memory_has_and_never_the_dummy() -> None:
    door = Door()
    issued = door.answer(USER, A, B)
    for model in ("gemini-2.5-flash", "models/gemini-2.0-flash", "gemini-1.5-pro"):
        never = body_of([*USER, *step([{"id": "c1", "type": "function", "function": {
            "name": "read_file", "arguments": "{}"}}])]) | {"model": model}
        assert run(never, door.store).status == "untouched"  # not checked: a valid session as it came
        lost = body_of([*USER, *step(stripped(issued))]) | {"model": model}
        got = sent(run(lost, door.store), lost)
        assert sig(got["messages"][2]["tool_calls"][0]) == sig(issued[0])  # what it lost comes back


def test_qwen_code_s_captured_turn2_gets_its_signature_and_its_tools_fitted() -> None:
    """Qwen Code 0.24.4's own requests (tests/fixtures/qwen-code): it drops ``extra_content``, and its built-in tool
    schemas hold what the door's Schema refuses; with memory of the answer, both are repaired and the door takes it."""
    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "qwen-code"
    issued = json.loads((fixtures / "turn1_answer_calls.json").read_text())
    turn2 = json.loads((fixtures / "turn2_request.json").read_text())
    ledger = SignatureLedger()
    ledger.trust(sig(issued[0]))  # the recording mock's signature
    store = SqliteReasoningStore(":memory:")
    head = {"id": "x", "object": "chat.completion.chunk", "model": MODEL}
    events = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
        {"index": 0, **{k: v for k, v in c.items() if k != "extra_content"}}]}}]} for c in issued]
    events.insert(1, {**head, "choices": [{"index": 0, "delta": {"tool_calls": [
        {"extra_content": issued[0]["extra_content"]}]}}]})  # the trailing delta, as the door streams it
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    hear(store, "chat", sse_text(events), UP)
    assert check(turn2, ledger) is not None
    out = run(turn2, store)
    got = sent(out, turn2)
    assert sorted(set(out.repairs)) == ["fit-tool-schemas", NAME]
    assert got["messages"][2]["tool_calls"] == [issued[0], turn2["messages"][2]["tool_calls"][1]]
    assert got["messages"][:2] == turn2["messages"][:2] and got["messages"][3:] == turn2["messages"][3:]
    assert [t["function"]["name"] for t in got["tools"]] == [t["function"]["name"] for t in turn2["tools"]]
    assert check(got, ledger) is None


def test_it_is_chosen_for_an_upstream_without_the_flag_only_when_a_call_carries_a_signature() -> None:
    """On an upstream that never asked for signatures (OpenAI, an unknown host) the repair can only take out a
    signature that upstream refused, so a body without any is not even looked at (a 1 MB first sight walked every
    item for one); with one, or at the door, it is."""
    repair = restore_tool_call_signatures.REPAIR
    door = ProfileTable().resolve(HOST, 443, MODEL, CHAT).profile
    openai = ProfileTable().resolve("api.openai.com", 443, "gpt-5", CHAT).profile
    assert door.chat_thought_signatures and not openai.chat_thought_signatures
    plain = json.dumps({"model": "m", "messages": [{"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}]}).encode()
    signed = plain.replace(b'"type": "function",', b'"type": "function", "extra_content": {"google": '
                           b'{"thought_signature": "c2ln"}},', 1)
    assert signed != plain
    assert not repair.might_apply(CHAT, openai, plain)
    assert repair.might_apply(CHAT, openai, signed)
    assert repair.might_apply(CHAT, door, plain)
    assert repair.might_apply(CHAT, openai, None)  # whatever the bytes hold: the queue after a repair that added media
