"""The thought-signature rejections of Gemini's OpenAI-compatible door, list-wrapped: the missing-signature text
teaches ``chat_thought_signatures`` (a gateway in front of Gemini then gets the signatures back, one resend), a
refused signature teaches that it is refused (resent without it, with Google's dummy; the next request repaired up
front), a tool schema the door's Schema refuses teaches ``tool_schema_openapi``; and what retry/decide.py resends for
each, judged by the strict door mock."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.chat import rejections as chat_rejections
from llmfix.dialects.chat import signature_facts
from llmfix.dialects.chat.learn_signatures import REFUSED, marker, refused_key
from llmfix.dialects.registry import CHAT
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.retry import decide, rejections
from llmfix.retry.learned import LearnedQuirks
from tests.unit.repairs.test_restore_tool_call_signatures import DUMMY, USER, Door, body_of, sig, step, stripped
from tests.upstreams.gemini_errors import CORRUPTED, VERTEX_INVALID_SIGNATURE, GeminiError, missing_signature

FLAG = (("chat_thought_signatures", True),)
A, B = {"path": "a.md"}, {"path": "b.md"}


def door_body(message: str) -> bytes:
    return json.dumps(GeminiError(message, "x").body("door")).encode()


@pytest.mark.parametrize("body", [
    door_body(missing_signature("door", "read_file", 2)),
    door_body(missing_signature("vertex", "read_file", 3)),  # a relay to Vertex
    json.dumps({"error": {"message": "Provider error 400: Vertex AI invalid request: Function call is missing a "
                          "thought_signature in functionCall parts. … position 4."}}).encode(),
])
def test_the_missing_signature_texts_teach_the_flag(body: bytes) -> None:
    found = rejections.match("chat", 400, body)
    assert found is not None and found.rule.name == "chat-gemini-signature-missing" and found.flags == FLAG


@pytest.mark.parametrize("message", [CORRUPTED, VERTEX_INVALID_SIGNATURE, "Invalid thought signature."])
def test_a_refused_signature_teaches_facts(message: str) -> None:
    found = rejections.match("chat", 400, door_body(message))
    assert found is not None and found.rule.name == "chat-gemini-signature-refused" and found.flags == ()
    assert found.rule.facts is signature_facts.refused


def test_the_facts_name_every_signature_of_the_request_but_the_dummies() -> None:
    def calls(*signatures: str | None) -> list[dict[str, Any]]:
        return [{"id": f"c{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"},
                 **({"extra_content": {"google": {"thought_signature": s}}} if s else {})}
                for n, s in enumerate(signatures)]

    body = body_of([*USER, *step(calls("s1", None, DUMMY)), {"role": "user", "content": "again"},
                    *step(calls("s2", "s1"))])
    found = rejections.match("chat", 400, door_body(CORRUPTED))
    assert found is not None
    up = "generativelanguage.googleapis.com:443/chat"
    facts = signature_facts.refused(found, body, up)
    assert [(r.kind, r.key) for r in facts] == [(REFUSED, refused_key(up, "s1")), (REFUSED, refused_key(up, "s2")),
                                                (REFUSED, marker(up))]
    assert signature_facts.refused(found, body_of(USER), up) == []


def settings(store: SqliteReasoningStore) -> engine.Settings:
    return engine.Settings(quirks=LearnedQuirks(None, 3600), reasoning=store)


async def test_a_gateway_in_front_of_the_door_learns_the_flag_and_resends_with_the_signature() -> None:
    door = Door()
    gateway = "gemini.gateway.test"
    issued = door.answer(USER, A, B, upstream=f"{gateway}:443/chat")  # its stream, heard through llmfix
    body = body_of([*USER, *step(stripped(issued))])
    raw = json.dumps(body).encode()
    req = engine.Request(CHAT, gateway, 443, raw)
    store = door.store
    assert engine.process(req, settings(store)).status == "untouched"  # no profile: nothing up front
    rejection = door.refused(body)
    assert rejection is not None
    found = rejections.match("chat", 400, json.dumps(rejection.body("door")).encode())
    assert found is not None
    d = await decide.decide(found, 400, req, raw, settings(store))
    assert d.useful == list(FLAG) and d.outcome is not None
    resent = json.loads(d.outcome.body)
    assert sig(resent["messages"][2]["tool_calls"][0]) == sig(issued[0])
    assert door.refused(resent) is None


async def test_a_refused_signature_is_resent_without_it_and_the_next_request_is_repaired_up_front() -> None:
    door = Door()
    issued = door.answer(USER, A, B, heard=False)
    foreign = door.ledger.sign_call("read_file", A, signer="another-account")  # from another account
    replayed = [{**issued[0], "extra_content": {"google": {"thought_signature": foreign}}}, issued[1]]
    body = body_of([*USER, *step(replayed)])
    raw = json.dumps(body).encode()
    store = door.store
    req = engine.Request(CHAT, "generativelanguage.googleapis.com", 443, raw)
    assert engine.process(req, settings(store)).status == "untouched"  # signed: nothing to do, nothing known
    rejection = door.refused(body)
    assert rejection is not None and rejection.message == CORRUPTED
    found = rejections.match("chat", 400, json.dumps(rejection.body("door")).encode())
    assert found is not None
    d = await decide.decide(found, 400, req, raw, settings(store))
    assert d.outcome is not None, d.why
    resent = json.loads(d.outcome.body)
    assert sig(resent["messages"][2]["tool_calls"][0]) == DUMMY and door.refused(resent) is None
    assert foreign not in d.outcome.body.decode() + json.dumps(d.event)
    assert engine.process(req, settings(store)).status == "untouched"  # not learned before the resend goes out
    decide.learn(d, settings(store))
    assert json.loads(engine.process(req, settings(store)).body or b"") == resent


def test_the_rules_are_the_chat_dialect_s() -> None:
    names = [r.name for r in chat_rejections.RULES]
    assert {"chat-gemini-signature-missing", "chat-gemini-signature-refused"} <= set(names)


async def test_a_gateway_in_front_of_the_door_learns_that_its_tool_schemas_are_held_to_the_schema() -> None:
    from tests.upstreams.gemini_door import check

    tool = {"type": "function", "function": {"name": "search", "description": "an MCP tool", "parameters": {
        "$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": False,
        "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
    body = {"model": "gemini-3-flash-preview", "messages": USER[1:], "tools": [tool]}
    rejection = check(body, Door().ledger)
    assert rejection is not None
    found = rejections.match("chat", 400, json.dumps(rejection.body("door")).encode())
    assert found is not None and found.flags == (("tool_schema_openapi", True),)
    raw = json.dumps(body).encode()
    req = engine.Request(CHAT, "gemini.gateway.test", 443, raw)
    d = await decide.decide(found, 400, req, raw, settings(SqliteReasoningStore(":memory:")))
    assert d.useful == [("tool_schema_openapi", True)] and d.outcome is not None
    resent = json.loads(d.outcome.body)
    assert check(resent, Door().ledger) is None and resent["messages"] == body["messages"]
