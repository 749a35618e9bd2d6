"""strip-refused-fields on the captures of Claude Code, Codex and opencode, through `engine.process`, and the decision
of repair-and-retry that teaches it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.body import codec
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.memory.sqlite_quirks import SqliteQuirkStore
from llmfix.memory.store import Quirk
from llmfix.profiles import parse_table
from llmfix.repairs import pipeline
from llmfix.retry import decide, rejections
from llmfix.retry.learned import LearnedQuirks
from tests.conftest import fixture_bytes, fixture_json
from tests.upstreams import field_rules

CC = "claude-code/single_png__turn2.json"
CODEX = "codex/turn2_request.json"
OPENCODE = "opencode/chat__mock-vision__two_png__turn2.json"
RELAY = "relay.claude-like.test"
DAY = 86400.0
TAUGHT = "400 refused-field: context_management: Extra inputs are not permitted"


def quirks(host: str, dialect: str, *names: str) -> LearnedQuirks:
    learned = LearnedQuirks(SqliteQuirkStore(":memory:", max_age_s=DAY), DAY)
    for name in names:
        learned.learn(Quirk(host, 443, dialect, f"strip:{name}", True, TAUGHT, 2e9))
    return learned


def run(raw: bytes, host: str, dialect: Dialect, learned: Any, encoding: str | None = None,
        **settings: Any) -> engine.Outcome:
    return engine.process(engine.Request(dialect, host, 443, raw, encoding),
                          engine.Settings(quirks=learned, **settings))


def without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


def test_claude_code_loses_only_the_refused_knob_and_says_who_taught_it() -> None:
    out = run(fixture_bytes(CC), RELAY, MESSAGES, quirks(RELAY, "messages", "context_management"))
    assert out.status == "repaired" and out.repairs == ["strip-refused-fields"]
    assert json.loads(out.body) == without(fixture_json(CC), "context_management")
    assert list(json.loads(out.body)) == [k for k in fixture_json(CC) if k != "context_management"]
    [line] = out.lines
    assert line.startswith("strip-refused-fields: context_management: context_management removed: this upstream")
    assert f"(learned from {TAUGHT})" in line
    assert out.records[0]["before"] == {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}


def test_a_cache_marker_key_goes_wherever_it_is() -> None:
    body = fixture_json(CC)  # its system block carries cache_control.scope (Copilot refuses it)
    out = run(fixture_bytes(CC), RELAY, MESSAGES, quirks(RELAY, "messages", "cache_control.scope"))
    sent = json.loads(out.body)
    assert [b.get("cache_control") for b in sent["system"]] == [None, None, {"type": "ephemeral"},
                                                                 {"type": "ephemeral"}]
    assert without(sent, "system") == without(body, "system")
    assert out.lines == ("strip-refused-fields: system[2].cache_control.scope: cache_control.scope removed: this "
                         f"upstream refuses it (learned from {TAUGHT})",)


@pytest.mark.parametrize("encoding", [None, "gzip", "zstd"])
def test_codex_loses_prompt_cache_key_on_an_azure_deployment(encoding: str | None) -> None:
    host = "llmfix-test.openai.azure.com"
    raw = codec.encode(fixture_bytes(CODEX), encoding)
    out = run(raw, host, RESPONSES, quirks(host, "responses", "prompt_cache_key"), encoding)
    assert out.status == "repaired" and out.profile == "openai"
    assert json.loads(codec.decode(out.wire, encoding)) == without(fixture_json(CODEX), "prompt_cache_key")


def test_opencode_chat_with_its_cache_key() -> None:
    host = "vllm.local.test"
    body = {**fixture_json(OPENCODE), "prompt_cache_key": "ses_4f2a"}  # opencode with setCacheKey (opencode #22569)
    out = run(json.dumps(body).encode(), host, CHAT, quirks(host, "chat", "prompt_cache_key"))
    assert json.loads(out.body) == fixture_json(OPENCODE)


def test_byte_identical_where_nothing_was_refused_or_nothing_refused_is_sent() -> None:
    raw = fixture_bytes(CC)
    assert run(raw, RELAY, MESSAGES, quirks(RELAY, "messages")).body is None  # nothing learned
    learned = quirks(RELAY, "messages", "prompt_cache_key", "cache_control.ttl")  # learned, not in this body
    assert run(raw, RELAY, MESSAGES, learned).status == "untouched"
    learned = quirks(RELAY, "messages", "context_management")
    assert run(raw, "other.gateway.test", MESSAGES, learned).status == "untouched"  # another upstream
    assert run(raw, RELAY, CHAT, learned).status != "repaired"  # another dialect of the same host
    assert run(raw, RELAY, MESSAGES, learned, enabled=frozenset(pipeline.NAMES) - {
        "strip-refused-fields"}).status == "untouched"  # switched off


def test_anthropics_own_api_never_strips_what_it_was_said_to_refuse() -> None:
    learned = quirks("api.anthropic.com", "messages", "context_management", "output_config")
    out = run(fixture_bytes(CC), "api.anthropic.com", MESSAGES, learned)
    assert out.status == "untouched"


def test_a_profiles_file_pins_a_host_to_keep_its_fields() -> None:
    table = parse_table({"hosts": {RELAY: {"learn_refused_fields": False}}})
    learned = quirks(RELAY, "messages", "context_management")
    assert run(fixture_bytes(CC), RELAY, MESSAGES, learned, table=table).status == "untouched"


def test_with_another_repair_both_apply() -> None:
    """DeepSeek's /anthropic folds Claude Code's system messages; a learned field goes as well."""
    host = "api.deepseek.com"
    out = run(fixture_bytes(CC), host, MESSAGES, quirks(host, "messages", "context_management"))
    assert out.repairs == ["fold-system-messages", "strip-refused-fields"]
    sent = json.loads(out.body)
    assert "context_management" not in sent and all(m["role"] != "system" for m in sent["messages"])


def test_a_body_llmfix_cannot_write_again_goes_as_it_came_with_the_reason() -> None:
    raw = b'{"model":"m","max_tokens":1,"context_management":{},"metadata":{"n":' + str(2**70).encode() + (
        b'},"messages":[{"role":"user","content":"hi"}]}')
    out = run(raw, RELAY, MESSAGES, quirks(RELAY, "messages", "context_management"))
    assert out.status == "failed" and out.wire is None  # the proxy warns once and forwards it unchanged
    assert out.reason is not None and out.reason.startswith("strip-refused-fields: cannot write the body again")


async def test_the_decision_learns_the_field_and_resends_without_it() -> None:
    raw = fixture_bytes(CC)
    rejection = field_rules.rejection("copilot", ["output_config"], {"effort": "medium"})
    found = rejections.match("messages", 400, json.dumps(rejection.body).encode())
    assert found is not None
    learned = LearnedQuirks(SqliteQuirkStore(":memory:", max_age_s=DAY), DAY)
    settings = engine.Settings(quirks=learned)
    d = await decide.decide(found, 400, engine.Request(MESSAGES, RELAY, 443, raw), raw, settings)
    assert d.useful == [("strip:output_config", True)] and d.outcome is not None
    assert json.loads(d.outcome.body) == without(fixture_json(CC), "output_config")
    decide.learn(d, settings)
    assert learned.flags(RELAY, 443, "messages") == (("strip:output_config", True),)
    assert [q.reason for q in learned.quirks()] == [
        "400 refused-field: output_config: Extra inputs are not permitted invalid_request_body"]
    # the resend refused for another field: progress, kept; for the same one again: it did not help, dropped
    other = field_rules.rejection("copilot", ["context_management"], {})
    decide.settle(d, settings, rejections.match("messages", 400, json.dumps(other.body).encode()))
    assert learned.flags(RELAY, 443, "messages") == (("strip:output_config", True),)
    decide.settle(d, settings, found)
    assert learned.flags(RELAY, 443, "messages") == ()


async def test_anthropics_refusal_teaches_nothing_and_is_not_resent() -> None:
    raw = fixture_bytes(CC)
    rejection = field_rules.rejection("anthropic", ["context_management"], {})
    found = rejections.match("messages", 400, json.dumps(rejection.body).encode())
    assert found is not None
    settings = engine.Settings(quirks=LearnedQuirks(None, DAY))
    d = await decide.decide(found, 400, engine.Request(MESSAGES, "api.anthropic.com", 443, raw), raw, settings)
    assert d.outcome is None and d.useful == [] and "no flag llmfix could learn" in d.why


def test_a_learned_field_is_kept_by_the_memory_as_a_quirk() -> None:
    store = SqliteQuirkStore(":memory:", max_age_s=DAY)
    store.learn(Quirk(RELAY, 443, "messages", "strip:cache_control.ttl", True, TAUGHT, 2e9))
    assert LearnedQuirks(store, DAY).flags(RELAY.upper(), 443, "messages") == (("strip:cache_control.ttl", True),)


def test_a_codex_websocket_message_loses_the_field_and_keeps_its_type() -> None:
    """Codex 0.171 over the Responses WebSocket: each ``response.create`` goes through the same engine."""
    host = "llmfix-test.openai.azure.com"
    body = fixture_json("codex-ws/2_turn1.json")
    out = run(fixture_bytes("codex-ws/2_turn1.json"), host, RESPONSES,
              quirks(host, "responses", "prompt_cache_key"))
    assert json.loads(out.body) == without(body, "prompt_cache_key")
    assert json.loads(out.body)["type"] == "response.create"
