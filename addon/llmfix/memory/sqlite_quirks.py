"""The embedded :class:`~llmfix.memory.store.QuirkStore`: learned upstream quirks in llmfix's SQLite file.

One row per (host, port, dialect, flag) with the value learned, the rejection that taught it (status and
a redacted excerpt, never a header or a key) and when. It lives in the same file as the tool calls
(:mod:`llmfix.memory.sqlite`), on the same connection (:class:`llmfix.memory.sqlite_db.SqliteDb`), in its own
table created with ``CREATE TABLE IF NOT EXISTS``: a file
written by an llmfix without quirks gains the table on first open and keeps its tool calls, and the
file's ``user_version`` stays the tool-call store's (an older llmfix reading the file ignores the table).

Expiry: rows older than ``max_age_s`` (``llmfix_memory_max_age``) are invisible to :meth:`quirks` and
deleted on open and on each :meth:`learn`. Like every backend, runtime errors never reach callers (a
warning, then 0 / ``[]``); only construction raises :class:`MemoryStoreError`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from llmfix.memory.sqlite_db import SqliteDb, Use
from llmfix.memory.store import MemoryStoreError, Quirk

_SCHEMA = """
CREATE TABLE IF NOT EXISTS quirks (
    host       TEXT NOT NULL,
    port       INTEGER NOT NULL,
    dialect    TEXT NOT NULL,
    flag       TEXT NOT NULL,
    value      INTEGER NOT NULL,
    reason     TEXT NOT NULL,
    learned_at REAL NOT NULL,
    PRIMARY KEY (host, port, dialect, flag)
);
"""
_UPSERT = """
INSERT INTO quirks (host, port, dialect, flag, value, reason, learned_at) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (host, port, dialect, flag) DO UPDATE SET
    value = excluded.value, reason = excluded.reason, learned_at = excluded.learned_at
"""


class SqliteQuirkStore:
    """Learned quirks in SQLite; thread-safe. ``path``: the memory file, or the :class:`SqliteDb` of the call
    store that already opened it (one connection per file)."""

    def __init__(self, path: str | os.PathLike[str] | SqliteDb, *, max_age_s: float = 7 * 24 * 3600,
                 clock: Callable[[], float] = time.time) -> None:
        if max_age_s <= 0:
            raise MemoryStoreError(f"max_age_s must be positive, got {max_age_s}")
        self.max_age_s = max_age_s
        self._clock = clock
        self._use = Use(path, _SCHEMA)
        self.db = self._use.db
        self.path = self.db.path
        self._expire()

    def learn(self, quirk: Quirk) -> None:
        row = (quirk.host.lower(), quirk.port, quirk.dialect, quirk.flag, int(quirk.value), quirk.reason,
               quirk.learned_at)
        cutoff = self._clock() - self.max_age_s

        def body(cur: Any) -> None:
            cur.execute(_UPSERT, row)
            cur.execute("DELETE FROM quirks WHERE learned_at < ?", (cutoff,))

        self.db.write("store a learned quirk", body, None)

    def quirks(self) -> list[Quirk]:
        cutoff = self._clock() - self.max_age_s
        rows = self.db.read("read learned quirks", lambda conn: conn.execute(
            "SELECT host, port, dialect, flag, value, reason, learned_at FROM quirks "
            "WHERE learned_at >= ? ORDER BY learned_at, rowid", (cutoff,)).fetchall(), [])
        return [Quirk(h, int(p), d, f, bool(v), r, float(t)) for h, p, d, f, v, r, t in rows]

    def forget(self, host: str | None = None) -> int:
        def body(cur: Any) -> int:
            if host is None:
                return cur.execute("DELETE FROM quirks").rowcount
            return cur.execute("DELETE FROM quirks WHERE host = ?", (host.lower(),)).rowcount

        return self.db.write("forget learned quirks", body, 0)

    def close(self) -> None:
        self._use.release()

    def _expire(self) -> None:
        cutoff = self._clock() - self.max_age_s
        self.db.write("expire learned quirks",
                      lambda cur: cur.execute("DELETE FROM quirks WHERE learned_at < ?", (cutoff,)), None)
