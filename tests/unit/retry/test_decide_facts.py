"""retry/decide.py for rules that teach facts (Reasoning records) instead of flags."""

from __future__ import annotations

import json
import re

from llmfix import engine
from llmfix.dialects.registry import CHAT
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import Reasoning
from llmfix.retry import decide, rejections
from llmfix.retry.learned import LearnedQuirks


def test_the_overlay_knows_the_taught_records_ahead_of_the_memory() -> None:
    base = SqliteReasoningStore(":memory:")
    base.note([Reasoning("k", "a", "from memory", "u"), Reasoning("k", "b", "kept", "u")])
    view = decide.Overlay(base, [Reasoning("k", "a", "taught", "u"), Reasoning("other", "a", "x", "u")])
    assert view.recall("k", ["a", "b", "c"]) == {"a": Reasoning("k", "a", "taught", "u"),
                                                 "b": Reasoning("k", "b", "kept", "u")}
    assert decide.Overlay(None, []).recall("k", ["a"]) == {}


async def test_a_fact_that_changes_nothing_is_neither_resent_nor_noted() -> None:
    seen: list[tuple[str, str]] = []

    def facts(found: rejections.Match, body: dict, upstream: str) -> list[Reasoning]:
        seen.append((body["model"], upstream))
        return [Reasoning("test.fact", "k1", "foreign", upstream)]

    rule = rejections.Rule("test-rule", frozenset({400}), re.compile("bad"), (), facts)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    store = SqliteReasoningStore(":memory:")
    settings = engine.Settings(quirks=LearnedQuirks(None, 3600), reasoning=store)
    req = engine.Request(CHAT, "api.test", 443, body)
    d = await decide.decide(rejections.Match(rule, "bad"), 400, req, body, settings)
    assert seen == [("m", "api.test:443/chat")]
    assert d.outcome is None and "would not change the body" in d.why
    assert d.event["learned"] == [{"fact": "test.fact", "key": "k1"}]
    assert store.recall("test.fact", ["k1"]) == {}
