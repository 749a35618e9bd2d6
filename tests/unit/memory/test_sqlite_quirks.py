"""SqliteQuirkStore: learned quirks in llmfix's memory file, next to the tool calls (issue 14)."""

from __future__ import annotations

import sqlite3

import pytest

from llmfix.memory.sqlite import SCHEMA_VERSION, SqliteStore
from llmfix.memory.sqlite_quirks import SqliteQuirkStore
from llmfix.memory.store import MemoryStoreError, Quirk, ToolCall

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
