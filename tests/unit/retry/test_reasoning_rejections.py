"""The reasoning rejections: DeepSeek's and Kimi's thinking-mode texts teach a flag, Anthropic's signature texts
teach facts about the block they name; and what retry/decide.py resends for each."""

from __future__ import annotations

import json

import pytest

from llmfix import engine
from llmfix.dialects.messages import rejections as messages_rejections
from llmfix.dialects.messages.learn_thinking import FOREIGN, block_key, fact_key, marker_key
from llmfix.dialects.registry import CHAT, MESSAGES
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.retry import decide, rejections
from llmfix.retry.learned import LearnedQuirks
from tests.unit.repairs.test_drop_foreign_thinking import Switched, foreign
from tests.unit.repairs.test_restore_reasoning_content import learned
from tests.unit.retry.test_rejections import anthropic_shape, deepseek_shape
from tests.upstreams.reasoning_rules import DEEPSEEK_TEXT, check_kimi
from tests.upstreams.reasoning_sessions import THOUGHT, droid
from tests.upstreams.thinking import Ledger

FLAG = (("chat_reasoning_content", True),)
KIMI_BODY = check_kimi(droid(model="kimi-k2.5").turn2).body  # the strict mock's exact body


@pytest.mark.parametrize("body", [
    deepseek_shape(DEEPSEEK_TEXT),
    deepseek_shape("The reasoning_content in the thinking mode must be passed back to the API."),
    deepseek_shape(f"Error from provider (DeepSeek): {DEEPSEEK_TEXT}"),
    json.dumps({"error": {"message": f"Upstream request failed: [invalid_request_error] {DEEPSEEK_TEXT}"}}).encode(),
    deepseek_shape("Missing `reasoning_content` field in the assistant message at message index 8. For more "
                   "information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"),
    json.dumps(KIMI_BODY).encode(),
    json.dumps({"code": 20015, "message": "thinking is enabled but reasoning_content is missing in assistant tool "
                "call message at index 32", "data": None}).encode(),
])
def test_thinking_mode_texts_teach_the_reasoning_flag(body: bytes) -> None:
    found = rejections.match("chat", 400, body)
    assert found is not None and found.flags == FLAG


@pytest.mark.parametrize("message", ["messages.7.content.0: Invalid `signature` in `thinking` block",
                                     "messages.647.content.0.thinking.signature: Field required"])
def test_signature_texts_teach_facts(message: str) -> None:
    found = rejections.match("messages", 400, anthropic_shape(message))
    assert found is not None and found.rule.name == "messages-thinking-signature" and found.flags == ()
    assert found.rule.facts is messages_rejections.foreign_thinking
    assert rejections.match("messages", 400, anthropic_shape("messages.7.content.0: Invalid `signature`")) is None


def test_the_facts_name_the_block_of_an_older_turn_and_nothing_else() -> None:
    s = Switched(foreign(Ledger(), signer="kimi"))
    rule = rejections.match("messages", 400, anthropic_shape("messages.1.content.0: Invalid `signature` in "
                                                              "`thinking` block"))
    assert rule is not None
    up = "api.anthropic.com:443/messages"
    key = block_key(s.body["messages"][1]["content"][0]) or ""
    facts = messages_rejections.foreign_thinking(rule, s.body, up)
    assert [(r.kind, r.key, r.upstream) for r in facts] == [(FOREIGN, fact_key(key, up), up),
                                                           (FOREIGN, marker_key(up), up)]
    for text in ("messages.3.content.0: Invalid `signature` in `thinking` block",  # the latest: never changed
                 "messages.1.content.1: Invalid `signature` in `thinking` block",  # a tool_use
                 "messages.9.content.0: Invalid `signature` in `thinking` block"):  # not there
        found = rejections.Match(rule.rule, text)
        assert messages_rejections.foreign_thinking(found, s.body, up) == []


def settings(store: SqliteReasoningStore) -> engine.Settings:
    return engine.Settings(quirks=LearnedQuirks(None, 3600), reasoning=store)


async def test_a_gateway_in_front_of_deepseek_learns_the_flag_and_resends_with_the_reasoning() -> None:
    session = droid()
    store = learned(session, "deepseek.gateway.test:443/chat")
    raw = json.dumps(session.turn2).encode()
    req = engine.Request(CHAT, "deepseek.gateway.test", 443, raw)
    assert engine.process(req, settings(store)).status == "untouched"  # no profile: nothing up front
    found = rejections.match("chat", 400, deepseek_shape(DEEPSEEK_TEXT))
    assert found is not None
    d = await decide.decide(found, 400, req, raw, settings(store))
    assert d.useful == list(FLAG) and d.outcome is not None
    assert json.loads(d.outcome.body)["messages"][3]["reasoning_content"] == THOUGHT


async def test_a_signature_rejection_is_resent_without_the_block_and_the_next_request_is_repaired_up_front() -> None:
    s = Switched(foreign(Ledger(), signer="kimi"))
    raw = json.dumps(s.body).encode()
    req = engine.Request(MESSAGES, "api.anthropic.com", 443, raw)
    assert engine.process(req, settings(s.store)).status == "untouched"  # its form is fine, nothing known
    rejection = s.check(s.body)
    assert rejection is not None
    found = rejections.match("messages", rejection.status, json.dumps(rejection.body).encode())
    assert found is not None
    d = await decide.decide(found, 400, req, raw, settings(s.store))
    assert d.outcome is not None, d.why
    resent = json.loads(d.outcome.body)
    assert s.check(resent) is None
    assert engine.process(req, settings(s.store)).status == "untouched"  # not learned before the resend goes out
    decide.learn(d, settings(s.store))
    assert json.loads(engine.process(req, settings(s.store)).body) == resent
