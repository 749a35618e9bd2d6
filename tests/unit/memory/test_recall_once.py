"""memory.store.RecallOnce: a request reads each reasoning key once, whatever the number of marks its certain checks
run at, and gets the same answers and the same outcome as when every check asks the store."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson

from llmfix import engine
from llmfix.dialects.messages.learn_thinking import FOREIGN, marker_key
from llmfix.dialects.registry import MESSAGES
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import Reasoning, RecallOnce
from tests.unit.repairs.test_drop_foreign_thinking import ANTHROPIC, MODEL, teach
from tests.upstreams.reasoning_canned import issued_turn
from tests.upstreams.thinking import Ledger


class Asked(SqliteReasoningStore):
    """A memory that counts how often each (kind, key) is asked about."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.asked: Counter[tuple[str, str]] = Counter()

    def recall(self, kind: str, keys: Any) -> dict[str, Reasoning]:
        keys = list(keys)
        self.asked.update((kind, k) for k in keys)
        return super().recall(kind, keys)


def test_each_key_reaches_the_store_once_and_answers_are_the_store_s() -> None:
    store = Asked(":memory:")
    store.note([Reasoning(FOREIGN, "a", "1", "u"), Reasoning(FOREIGN, "b", "2", "u")])
    once = RecallOnce(store)
    assert once.recall(FOREIGN, ["a", "x"]) == store.recall(FOREIGN, ["a", "x"])
    store.asked.clear()
    got = once.recall(FOREIGN, ["x", "b", "a", "a"])
    assert set(got) == {"a", "b"} and got["b"].value == "2"
    assert store.asked == Counter({(FOREIGN, "b"): 1})  # a and x (absent) were answered before
    assert once.recall("other-kind", ["a"]) == {}  # another kind is another key
    once.note([Reasoning(FOREIGN, "x", "3", "u")])
    assert once.recall(FOREIGN, ["x"])["x"].value == "3"  # what the request noted itself is read again


def session(turns: int, ledger: Ledger) -> dict[str, Any]:
    """A Claude Code-like session of ``turns`` thinking turns (each its tool result), the breakpoint on the last
    message as Claude Code puts it: over 16 KB, so the prefix cache keeps it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for k in range(turns):
        messages += [issued_turn(ledger, f"step {k} " + "x" * 400, tool_uses=[(f"toolu_{k}", "Read",
                                                                                {"file_path": f"/p/{k}.txt"})]),
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{k}",
                                                   "content": f"file {k} " + "y" * 200}]}]
    last = messages[-1]["content"][-1]
    messages[-1] = {**messages[-1], "content": [*messages[-1]["content"][:-1],
                                                {**last, "cache_control": {"type": "ephemeral"}}]}
    return {"model": MODEL, "max_tokens": 100, "messages": messages}


def test_a_continued_session_asks_the_marker_once_and_goes_out_as_the_whole_path_sends_it() -> None:
    """Once a rejection is known (another session's block), drop-foreign-thinking's check asks this upstream's
    marker at every mark the next turn is settled at; the request asks the store once, and its outcome is the one
    of a proxy that never saw the session (the whole path)."""
    ledger = Ledger()
    store = Asked(":memory:")
    teach(store, {"type": "thinking", "thinking": "elsewhere", "signature": "x"})
    settings = engine.Settings(reasoning=store)
    for turns in (30, 31, 32):
        raw = orjson.dumps(session(turns, ledger))  # compact, as Claude Code writes it
        store.asked.clear()
        out = engine.process(engine.Request(MESSAGES, "api.anthropic.com", 443, raw), settings)
        assert out.status == "untouched", out.reason
        assert store.asked[FOREIGN, marker_key(ANTHROPIC)] == 1
        assert max(store.asked.values()) == 1
        whole = engine.process(engine.Request(MESSAGES, "api.anthropic.com", 443, raw), engine.Settings(
            reasoning=store, prefix=None))
        assert (whole.status, whole.body) == (out.status, out.body)
    assert settings.prefix is not None and settings.prefix.hits == 2  # the later turns took the fast path
