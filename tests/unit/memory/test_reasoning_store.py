"""The reasoning stores (SQLite and a real redis-server): round trip by (kind, key), replacement, expiry, bounds,
a restart (SQLite) and a fleet (two Redis links); runtime errors never reach the caller."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmfix.memory.backend import open_memory
from llmfix.memory.redis_link import RedisLink
from llmfix.memory.redis_store import RedisReasoningStore
from llmfix.memory.sqlite_reasoning import MAX_KEY_CHARS, MAX_VALUE_CHARS, PRUNE_EVERY, SqliteReasoningStore
from llmfix.memory.store import Reasoning
from tests.redis_server import RedisServer, needs_redis, until

DAY = 86400.0
UP = "api.deepseek.com:443/chat"


def r(key: str, value: str = "the model thought", kind: str = "chat.reasoning_content", up: str = UP) -> Reasoning:
    return Reasoning(kind, key, value, up)


def test_sqlite_round_trip_by_kind_and_key() -> None:
    store = SqliteReasoningStore(":memory:")
    assert store.note([r("call_1"), r("call_2", "other"), r("call_1", kind="other.kind", value="x")]) == 3
    assert store.recall("chat.reasoning_content", ["call_1", "call_2", "call_9"]) == {
        "call_1": r("call_1"), "call_2": r("call_2", "other")}
    assert store.recall("other.kind", ["call_1"]) == {"call_1": r("call_1", kind="other.kind", value="x")}
    assert store.note([r("call_1", "a later answer")]) == 1  # one record per (kind, key): replaced
    assert store.recall("chat.reasoning_content", ["call_1"])["call_1"].value == "a later answer"
    store.close()


def test_sqlite_bounds_age_size_and_count() -> None:
    now = [1000.0]
    store = SqliteReasoningStore(":memory:", max_age_s=DAY, max_entries=10, clock=lambda: now[0])
    assert store.note([r("k" * (MAX_KEY_CHARS + 1)), r("big", "x" * (MAX_VALUE_CHARS + 1)), r("")]) == 0
    store.note([r("old")])
    now[0] += DAY + 1
    assert store.recall("chat.reasoning_content", ["old"]) == {}  # expired: invisible at once
    for i in range(PRUNE_EVERY):
        store.note([r(f"call_{i}")])
    assert store.count() <= 10 + PRUNE_EVERY  # pruned to max_entries every PRUNE_EVERY rows
    newest = f"call_{PRUNE_EVERY - 1}"
    assert newest in store.recall("chat.reasoning_content", [newest])  # the newest are the ones kept
    store.close()


def test_sqlite_records_survive_a_restart_in_the_memory_file(tmp_path: Path) -> None:
    path = str(tmp_path / "llmfix-memory.sqlite3")
    memory = open_memory(path, max_age_s=int(DAY), max_entries=1000, timeout_s=1.0)
    assert memory.reasoning is not None
    memory.reasoning.note([r("call_1", "步骤一：读取文件 \u2028 exact bytes")])
    memory.close()
    again = open_memory(path, max_age_s=int(DAY), max_entries=1000, timeout_s=1.0)
    assert again.reasoning is not None
    assert again.reasoning.recall("chat.reasoning_content", ["call_1"])["call_1"].value == \
        "步骤一：读取文件 \u2028 exact bytes"
    again.close()


def test_sqlite_runtime_errors_never_reach_the_caller(caplog: pytest.LogCaptureFixture) -> None:
    store = SqliteReasoningStore(":memory:")
    store.close()
    with caplog.at_level(logging.WARNING):
        assert store.note([r("call_1")]) == 0
        assert store.recall("chat.reasoning_content", ["call_1"]) == {}
    assert "cannot note 1 reasoning record(s)" in caplog.text and "cannot recall reasoning" in caplog.text


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as s:
        yield s


@needs_redis
@pytest.mark.timeout(60)
def test_redis_records_one_instance_noted_are_known_to_another(server: RedisServer) -> None:
    a_link, b_link = RedisLink(server.url, timeout_s=1.0), RedisLink(server.url, timeout_s=1.0)
    try:
        a, b = RedisReasoningStore(a_link, max_age_s=int(DAY)), RedisReasoningStore(b_link, max_age_s=int(DAY))
        assert a.note([r("call_r1", "thought \u00e9"), r("call_r1", "v", kind="other.kind")]) == 2
        assert until(lambda: "call_r1" in b.recall("chat.reasoning_content", ["call_r1"]), 10)
        assert b.recall("chat.reasoning_content", ["call_r1", "nope"]) == {"call_r1": r("call_r1", "thought \u00e9")}
        assert b.recall("other.kind", ["call_r1"])["call_r1"].value == "v"
        with server.client() as c:
            ttl = c.ttl(b"llmfix:reasoning:chat.reasoning_content:call_r1")
        assert 0 < ttl <= DAY  # the age bound lives in Redis
        assert a.note([r("big", "x" * (MAX_VALUE_CHARS + 1))]) == 0
    finally:
        a_link.close()
        b_link.close()
