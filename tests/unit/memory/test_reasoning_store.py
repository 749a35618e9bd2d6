"""The reasoning stores (SQLite and a real redis-server): round trip by (kind, key), replacement, a single-valued
key noted with two values turning ambiguous, each value stored once, expiry, bounds, a restart (SQLite) and a fleet
(two Redis links); runtime errors never reach the caller."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from llmfix.memory.backend import open_memory
from llmfix.memory.fingerprint import value_digest
from llmfix.memory.redis_link import RedisLink
from llmfix.memory.redis_store import RedisReasoningStore
from llmfix.memory.sqlite_reasoning import MAX_KEY_CHARS, MAX_VALUE_CHARS, PRUNE_EVERY, SqliteReasoningStore
from llmfix.memory.store import Reasoning
from tests.redis_server import RedisServer, needs_redis, until

# sqlite3 deprecates a numbered placeholder bound from a sequence (an error from Python 3.14 on)
pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")

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
    assert store.note([r("call_1", "a later marker", kind="other.kind")]) == 1  # one record per (kind, key)
    assert store.recall("other.kind", ["call_1"])["call_1"].value == "a later marker"
    store.close()


# -- both backends: what a single-valued kind keeps, values stored once ---------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as s:
        yield s


@pytest.fixture(params=["sqlite", "redis"])
def fleet(request: pytest.FixtureRequest) -> Iterator[Callable[[], Any]]:
    """A maker of stores sharing one memory (SQLite: one file's store; Redis: a link each, one server), whose
    ``note`` returns once the write is in."""
    if request.param == "sqlite":
        store = SqliteReasoningStore(":memory:")
        yield lambda: store
        store.close()
        return
    if needs_redis.args[0]:
        pytest.skip(needs_redis.kwargs["reason"])
    server = request.getfixturevalue("server")
    with server.client() as c:
        c.flushdb()
    links: list[RedisLink] = []

    class Flushed(RedisReasoningStore):
        def note(self, records: Any) -> int:
            n = super().note(records)
            assert self.link.flush()
            return n

    def make() -> Flushed:
        links.append(RedisLink(server.url, timeout_s=1.0))
        return Flushed(links[-1], max_age_s=int(DAY))

    yield make
    for link in links:
        link.close()


KIMI = "api.moonshot.ai:443/chat"


@pytest.mark.timeout(60)
def test_a_key_two_sessions_made_with_different_reasoning_is_restored_into_neither(fleet) -> None:
    """Kimi's ``functions.bash:0`` in two sessions that ran the same first command: the key is the same, the
    reasoning is not; whichever instance noted which, neither session's reasoning goes into the other's request."""
    a, b = fleet(), fleet()
    assert a.note([r("k", "A's private reasoning", up=KIMI)]) == 1
    assert b.recall("chat.reasoning_content", ["k"]) == {"k": r("k", "A's private reasoning", up=KIMI)}
    b.note([r("k", "B's reasoning", up=KIMI)])
    assert a.recall("chat.reasoning_content", ["k"]) == {} == b.recall("chat.reasoning_content", ["k"])
    a.note([r("k", "A's private reasoning", up=KIMI)])  # noted again with either value: it stays ambiguous
    assert b.recall("chat.reasoning_content", ["k"]) == {}
    b.note([r("u", "same", up=KIMI)])
    b.note([r("u", "same", up=UP)])  # the same text from another upstream is another record too
    assert a.recall("chat.reasoning_content", ["u"]) == {}


@pytest.mark.timeout(60)
def test_the_same_record_seen_again_stays_and_other_kinds_are_replaced(fleet) -> None:
    a, b = fleet(), fleet()
    a.note([r("k", "the turn's reasoning"), r("@up", "marker 1", kind="messages.foreign_thinking")])
    b.note([r("k", "the turn's reasoning"), r("@up", "marker 2", kind="messages.foreign_thinking")])
    assert a.recall("chat.reasoning_content", ["k"]) == {"k": r("k", "the turn's reasoning")}
    assert a.recall("messages.foreign_thinking", ["@up"])["@up"].value == "marker 2"  # meant to change


@pytest.mark.timeout(60)
def test_one_reasoning_under_many_keys_is_stored_once(fleet, request: pytest.FixtureRequest) -> None:
    """A turn of N parallel calls has N keys and one reasoning (up to a megabyte)."""
    big = "a long reasoning " * 30_000
    store = fleet()
    assert store.note([r(f"call {i}", big) for i in range(8)]) == 8
    found = store.recall("chat.reasoning_content", [f"call {i}" for i in range(8)])
    assert {k: v.value for k, v in found.items()} == {f"call {i}": big for i in range(8)}
    if isinstance(store, SqliteReasoningStore):
        assert store.values() == 1
    else:
        with request.getfixturevalue("server").client() as c:
            assert len(list(c.scan_iter(b"llmfix:reasoning-value:*"))) == 1
            assert len(list(c.scan_iter(b"llmfix:reasoning-key:*"))) == 8


def test_sqlite_values_no_key_maps_to_go_with_the_keys() -> None:
    now = [1000.0]
    store = SqliteReasoningStore(":memory:", max_age_s=DAY, max_entries=PRUNE_EVERY, clock=lambda: now[0])
    store.note([r("a", "first"), r("b", "first"), r("c", "second")])
    store.note([r("a", "third")])  # ambiguous: nothing maps to "third"
    now[0] += DAY + 1
    store.note([r(f"k{i}", "new") for i in range(PRUNE_EVERY)])  # a prune: the old keys expire
    assert store.values() == 1 and store.count() == PRUNE_EVERY
    store.close()


def test_sqlite_a_file_of_the_older_layout_loses_its_bare_id_keys(tmp_path: Path) -> None:
    """The older table keyed a Chat turn by its call id alone: another session could make that key."""
    path = tmp_path / "llmfix-memory.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE reasoning (kind TEXT, key TEXT, value TEXT, upstream TEXT, seen_at REAL)")
        conn.execute("INSERT INTO reasoning VALUES ('chat.reasoning_content', 'functions.bash:0', 'A', '', 1e12)")
    store = SqliteReasoningStore(path)
    assert store.recall("chat.reasoning_content", ["functions.bash:0"]) == {}
    store.note([r("k")])
    assert store.recall("chat.reasoning_content", ["k"]) == {"k": r("k")}
    assert store.db.read("tables", lambda c: [n for (n,) in c.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'reasoning%' ORDER BY name")], []) == [
        "reasoning_keys", "reasoning_values"]
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
            ttl = c.ttl(b"llmfix:reasoning-key:chat.reasoning_content:call_r1")
            value_ttl = c.ttl(b"llmfix:reasoning-value:" + value_digest("thought \u00e9").encode())
        assert 0 < ttl <= DAY and 0 < value_ttl <= DAY  # the age bound lives in Redis
        assert a.note([r("big", "x" * (MAX_VALUE_CHARS + 1))]) == 0
    finally:
        a_link.close()
        b_link.close()
