"""Tool-call memory: round trip, upsert, expiry, bounds, restarts, threads, corruption and kill -9."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmfix.memory.sqlite import MAX_ARGUMENTS_CHARS, PRUNE_EVERY_INSERTS, SqliteStore
from llmfix.memory.store import MemoryStoreError, ToolCall
from tests.unit.memory.killed_writer import kill_mid_write


def call(call_id: str, arguments: str = '{"file_path": "/home/dev/project/a.png"}', **kw: str) -> ToolCall:
    return ToolCall(call_id, kw.get("name", "Read"), arguments, kw.get("dialect", "chat"), kw.get("kind", "function"))


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def memory_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "llmfix.memory.sqlite" and r.levelno == logging.WARNING]


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqliteStore]:
    m = SqliteStore(":memory:" if request.param == "memory" else tmp_path / "mem.sqlite3")
    yield m
    m.close()


def test_round_trip(store: SqliteStore) -> None:
    calls = [
        call("call_a"),
        ToolCall("call_b", "apply_patch", "*** Begin Patch\n*** End Patch", "responses", "custom"),
        ToolCall("toolu_1", "Read", '{"file_path": "a.png"}', "messages"),
    ]
    assert store.remember(calls) == 3
    assert store.lookup(["call_a", "call_b", "toolu_1", "unknown"]) == {c.call_id: c for c in calls}
    assert store.lookup([]) == {}
    assert store.lookup(["unknown"]) == {}


def test_upsert_keeps_one_row_with_latest_values(store: SqliteStore) -> None:
    assert store.remember([call("call_a", '{"x": 1}')]) == 1
    assert store.remember([call("call_a", '{"x":1}')]) == 1
    assert store.count() == 1
    assert store.lookup(["call_a"])["call_a"].arguments == '{"x":1}'


def test_an_id_declared_twice_differently_is_ambiguous_and_never_looked_up(store: SqliteStore) -> None:
    """Kimi numbers its ids per conversation: two sessions' first bash calls are both ``functions.bash:0``."""
    a = call("functions.bash:0", '{"cmd": "cat ~/.env"}', name="bash")
    b = call("functions.bash:0", '{"cmd": "ls"}', name="bash")
    assert store.remember([a]) == 1 and store.lookup([a.call_id]) == {a.call_id: a}
    store.remember([b])
    assert store.lookup([a.call_id]) == {}
    store.remember([a])  # seen again, with either declaration: still ambiguous
    assert store.lookup([a.call_id]) == {}
    renamed = call("functions.bash:1", '{"cmd": "ls"}', name="shell")
    store.remember([call("functions.bash:1", '{"cmd": "ls"}', name="bash"), renamed])  # one batch: the same
    assert store.lookup(["functions.bash:1"]) == {}
    kept = call("functions.read:0", '{"path": "a", "n": 1}', name="read")
    store.remember([kept, call("functions.read:0", '{"n":1,"path":"a"}', name="read")])  # a client's own JSON
    assert store.lookup([kept.call_id])[kept.call_id].arguments == '{"n":1,"path":"a"}'
    assert store.count() == 3


def test_an_expired_declaration_makes_no_ambiguity() -> None:
    clock = Clock()
    m = SqliteStore(":memory:", max_age_s=100, clock=clock)
    m.remember([call("c", '{"a": 1}')])
    clock.now += 101
    m.remember([call("c", '{"a": 2}')])
    assert m.lookup(["c"])["c"].arguments == '{"a": 2}'


def test_calls_without_id_or_with_huge_arguments_are_not_stored(store: SqliteStore) -> None:
    assert store.remember([call(""), call("big", "x" * (MAX_ARGUMENTS_CHARS + 1))]) == 0
    assert store.remember([]) == 0
    assert store.count() == 0


def test_lookup_many_ids_in_chunks(store: SqliteStore) -> None:
    store.remember(call(f"call_{i}") for i in range(1200))
    ids = [f"call_{i}" for i in range(1500)] + ["call_3", "call_3"]
    found = store.lookup(ids)
    assert set(found) == {f"call_{i}" for i in range(1200)}


def test_expiry_by_age_and_refresh_on_reseen() -> None:
    clock = Clock()
    m = SqliteStore(":memory:", max_age_s=100, clock=clock)
    m.remember([call("old"), call("refreshed")])
    clock.now += 60
    m.remember([call("new"), call("refreshed")])
    clock.now += 50  # "old" is 110 s old, the others 50 s
    assert set(m.lookup(["old", "refreshed", "new"])) == {"refreshed", "new"}
    assert m.count() == 3  # expired rows are invisible before they are pruned
    assert m.prune() == 1
    assert m.count() == 2


def test_size_bound_keeps_the_newest() -> None:
    clock = Clock()
    m = SqliteStore(":memory:", max_entries=10, clock=clock)
    for i in range(25):
        clock.now += 1
        m.remember([call(f"call_{i:02d}")])
    assert m.count() == 25  # below the automatic thresholds
    assert m.prune() == 15
    assert set(m.lookup(f"call_{i:02d}" for i in range(25))) == {f"call_{i:02d}" for i in range(15, 25)}


def test_prunes_automatically_after_an_interval() -> None:
    clock = Clock()
    m = SqliteStore(":memory:", max_entries=5, clock=clock)
    m.remember(call(f"call_{i}") for i in range(10))
    assert m.count() == 10
    clock.now += 61
    m.remember([call("latest")])
    assert m.count() == 5
    assert "latest" in m.lookup(["latest"])


def test_prunes_automatically_after_many_inserts() -> None:
    clock = Clock()
    m = SqliteStore(":memory:", max_entries=5, clock=clock)
    m.remember(call(f"call_{i}") for i in range(PRUNE_EVERY_INSERTS))
    assert m.count() == 5


def test_rejects_bad_bounds() -> None:
    with pytest.raises(MemoryStoreError, match="max_entries"):
        SqliteStore(":memory:", max_entries=0)
    with pytest.raises(MemoryStoreError, match="max_age_s"):
        SqliteStore(":memory:", max_age_s=-1)


def test_file_store_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "mem.sqlite3"  # parents are created
    with SqliteStore(path) as m:
        m.remember([call("call_a"), call("call_b", name="Grep")])
    assert path.exists()
    with SqliteStore(path) as m:
        assert m.lookup(["call_a", "call_b"]) == {"call_a": call("call_a"), "call_b": call("call_b", name="Grep")}
        mode = m.db.read("check", lambda conn: conn.execute("PRAGMA journal_mode").fetchone()[0], None)
    assert mode == "wal"


def test_two_stores_on_one_file_see_each_other(tmp_path: Path) -> None:
    path = tmp_path / "mem.sqlite3"
    with SqliteStore(path) as a, SqliteStore(path) as b:
        a.remember([call("call_a")])
        assert "call_a" in b.lookup(["call_a"])


def test_directory_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="is a directory"):
        SqliteStore(tmp_path)


def test_runtime_errors_are_warnings_not_exceptions(caplog: pytest.LogCaptureFixture) -> None:
    m = SqliteStore(":memory:")
    m.remember([call("call_a")])
    m.close()
    with caplog.at_level(logging.WARNING):
        assert m.remember([call("call_b")]) == 0
        assert m.lookup(["call_a"]) == {}
        assert m.prune() == 0
    reasons = [r.getMessage() for r in memory_warnings(caplog)]
    assert len(reasons) == 3
    assert all("closed database" in r for r in reasons)


def test_concurrent_use_from_threads(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    m = SqliteStore(tmp_path / "mem.sqlite3")
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            start.wait(timeout=30)
            for i in range(500):
                if i % 2 == 0:
                    assert m.remember([call(f"t{t}_{i}")]) == 1
                else:
                    assert f"t{t}_{i - 1}" in m.lookup([f"t{t}_{i - 1}", f"t{(t + 1) % 8}_{i - 1}"])
        except BaseException as e:
            errors.append(e)

    with caplog.at_level(logging.WARNING):
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=60)
    assert not any(th.is_alive() for th in threads)
    assert errors == []
    assert memory_warnings(caplog) == []
    assert m.count() == 8 * 250
    m.close()


def test_non_sqlite_file_is_moved_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "mem.sqlite3"
    junk = b"this is not a database\n" * 100
    path.write_bytes(junk)
    with caplog.at_level(logging.WARNING):
        m = SqliteStore(path)
    asides = list(tmp_path.glob("mem.sqlite3.corrupt-*"))
    assert len(asides) == 1
    assert asides[0].read_bytes() == junk
    [warning] = memory_warnings(caplog)
    assert str(path) in warning.getMessage()
    assert str(asides[0]) in warning.getMessage()
    assert m.remember([call("call_a")]) == 1
    assert "call_a" in m.lookup(["call_a"])
    m.close()


def test_damaged_sqlite_file_is_moved_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "mem.sqlite3"
    with SqliteStore(path) as m:
        m.remember(call(f"call_{i}", "{}" * 20) for i in range(3000))
    size = path.stat().st_size
    with path.open("r+b") as f:  # overwrite pages in the middle of the b-trees
        f.seek(size // 2)
        f.write(b"\xa5" * 8192)
    with caplog.at_level(logging.WARNING):
        m = SqliteStore(path)
    assert len(memory_warnings(caplog)) == 1
    assert len(list(tmp_path.glob("mem.sqlite3.corrupt-*"))) == 1
    assert m.count() == 0
    assert m.remember([call("call_a")]) == 1
    m.close()


WRITER = """
import sys
from llmfix.memory.sqlite import SqliteStore
from llmfix.memory.store import ToolCall

m = SqliteStore(sys.argv[1])
batch = 0
while True:
    calls = [ToolCall(f"call_{batch:06d}_{j:02d}", "Read", '{"j": %d}' % j, "chat") for j in range(50)]
    assert m.remember(calls) == 50
    print(batch, flush=True)
    batch += 1
"""


def test_survives_kill_9_mid_write(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "mem.sqlite3"
    acknowledged = kill_mid_write(WRITER, path)

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    ids = [row[0] for row in conn.execute("SELECT call_id FROM tool_calls")]
    conn.close()
    per_batch = Counter(int(i.split("_")[1]) for i in ids)
    assert set(per_batch.values()) == {50}  # every transaction is all or nothing
    assert sorted(per_batch) == list(range(len(per_batch)))  # a prefix, no holes
    assert len(per_batch) > acknowledged  # nothing committed was lost

    with caplog.at_level(logging.WARNING), SqliteStore(path) as m:
        assert m.count() == len(ids)
        assert "call_000000_00" in m.lookup(["call_000000_00"])
    assert memory_warnings(caplog) == []
