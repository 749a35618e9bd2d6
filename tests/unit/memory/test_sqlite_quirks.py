"""SqliteQuirkStore: learned quirks in llmfix's memory file, next to the tool calls, on the same connection."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from llmfix.memory import backend
from llmfix.memory.sqlite import SCHEMA_VERSION, SqliteStore
from llmfix.memory.sqlite_quirks import SqliteQuirkStore
from llmfix.memory.store import MemoryStoreError, Quirk, ToolCall
from tests.unit.memory.killed_writer import kill_mid_write

DAY = 86400.0


def quirk(host: str = "gw.test", flag: str = "responses_tool_output_array", value: bool = False,
          at: float = 1000.0, port: int = 443, dialect: str = "responses") -> Quirk:
    return Quirk(host, port, dialect, flag, value, "422 xai-model-input: …ModelInput", at)


def test_learn_list_replace_and_forget() -> None:
    now = [1000.0]
    store = SqliteQuirkStore(":memory:", max_age_s=DAY, clock=lambda: now[0])
    store.learn(quirk())
    store.learn(quirk(flag="chat_tool_text_array", dialect="chat", at=1001.0))
    store.learn(quirk(host="other.test", at=1002.0))
    store.learn(quirk(value=True, at=1003.0))  # same host, port, dialect and flag: replaces
    got = store.quirks()
    assert [(q.host, q.flag, q.value) for q in got] == [
        ("gw.test", "chat_tool_text_array", False), ("other.test", "responses_tool_output_array", False),
        ("gw.test", "responses_tool_output_array", True)]
    assert got[0] == quirk(flag="chat_tool_text_array", dialect="chat", at=1001.0)
    assert store.forget("GW.test") == 2
    assert [q.host for q in store.quirks()] == ["other.test"]
    assert store.forget() == 1 and store.quirks() == []


def test_quirks_expire_with_the_memory_max_age() -> None:
    now = [1000.0]
    store = SqliteQuirkStore(":memory:", max_age_s=DAY, clock=lambda: now[0])
    store.learn(quirk(at=1000.0))
    now[0] = 1000.0 + DAY - 1
    assert len(store.quirks()) == 1
    now[0] = 1000.0 + DAY + 1
    assert store.quirks() == []


def test_todays_memory_file_gains_the_table_and_keeps_its_calls(tmp_path) -> None:
    path = tmp_path / "llmfix-memory.sqlite3"
    with SqliteStore(path) as calls:  # a file as llmfix wrote it before quirks existed
        calls.remember([ToolCall("call_1", "Read", '{"p":1}', "chat")])
    with sqlite3.connect(path) as conn:
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} == {"tool_calls"}
    quirks = SqliteQuirkStore(path, max_age_s=DAY)
    quirks.learn(quirk(at=__import__("time").time()))
    quirks.close()
    with SqliteStore(path) as calls:  # the call store still opens it (same user_version) and knows its calls
        assert calls.lookup(["call_1"])["call_1"].name == "Read"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    again = SqliteQuirkStore(path, max_age_s=DAY)  # and a restart finds the quirk
    assert [q.flag for q in again.quirks()] == ["responses_tool_output_array"]
    again.close()


def test_a_directory_is_refused(tmp_path) -> None:
    with pytest.raises(MemoryStoreError, match="directory"):
        SqliteQuirkStore(tmp_path)


def test_runtime_errors_never_reach_the_caller(caplog) -> None:
    store = SqliteQuirkStore(":memory:", max_age_s=DAY)
    store.close()
    store.learn(quirk())
    assert store.quirks() == [] and store.forget() == 0
    assert "cannot" in caplog.text


def test_the_call_store_and_the_quirk_store_share_one_connection(tmp_path: Path) -> None:
    memory = backend.open_memory(str(tmp_path / "m.sqlite3"), max_age_s=int(DAY), max_entries=100, timeout_s=1.0)
    calls, quirks = memory.calls, memory.quirks
    assert isinstance(calls, SqliteStore) and isinstance(quirks, SqliteQuirkStore)
    assert calls.db is quirks.db is memory.reasoning.db  # one SqliteDb: one connection and one lock for the file
    calls.remember([ToolCall("call_1", "Read", "{}", "chat")])
    quirks.learn(quirk(at=time.time()))
    calls.close()  # the quirk store still uses the file
    assert [q.flag for q in quirks.quirks()] == ["responses_tool_output_array"]
    memory.close()  # the last user closes the connection
    with pytest.raises(sqlite3.ProgrammingError):
        calls.db._conn.execute("SELECT 1")


WRITER = """
import sys, time
from llmfix.memory import backend
from llmfix.memory.store import Quirk, ToolCall

m = backend.open_memory(sys.argv[1], max_age_s=86400, max_entries=10**6, timeout_s=1.0)
batch = 0
while True:
    calls = [ToolCall(f"call_{batch:06d}_{j:02d}", "Read", '{"j": %d}' % j, "chat") for j in range(50)]
    assert m.calls.remember(calls) == 50
    m.quirks.learn(Quirk(f"h{batch:06d}.test", 443, "chat", "chat_tool_media", False, "400 rule: text", time.time()))
    print(batch, flush=True)
    batch += 1
"""


def test_both_stores_survive_a_killed_writer(tmp_path: Path) -> None:
    """A writer killed with SIGKILL while both stores write through their one connection leaves a sound file
    holding every acknowledged write of each store, whole."""
    path = tmp_path / "m.sqlite3"
    acknowledged = kill_mid_write(WRITER, path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    batches = {int(r[0].split("_")[1]) for r in conn.execute("SELECT call_id FROM tool_calls")}
    hosts = {int(r[0][1:7]) for r in conn.execute("SELECT host FROM quirks")}
    conn.close()
    assert set(range(acknowledged + 1)) <= batches and set(range(acknowledged + 1)) <= hosts
    memory = backend.open_memory(str(path), max_age_s=int(DAY), max_entries=10**6, timeout_s=1.0)
    assert "call_000000_00" in memory.calls.lookup(["call_000000_00"])
    assert len(memory.quirks.quirks()) >= acknowledged + 1
    memory.calls.close()
    memory.quirks.close()
