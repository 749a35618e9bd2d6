"""The embedded :class:`~llmfix.memory.store.QuirkStore`: learned upstream quirks in llmfix's SQLite file.

One row per (host, port, dialect, flag) with the value learned, the rejection that taught it (status and
a redacted excerpt, never a header or a key) and when. It lives in the same file as the tool calls
(:mod:`llmfix.memory.sqlite`), in its own table created with ``CREATE TABLE IF NOT EXISTS``: a file
written by an llmfix without quirks gains the table on first open and keeps its tool calls, and the
file's ``user_version`` stays the tool-call store's (an older llmfix reading the file ignores the table).

Expiry: rows older than ``max_age_s`` (``llmfix_memory_max_age``) are invisible to :meth:`quirks` and
deleted on open and on each :meth:`learn`. Like every backend, runtime errors never reach callers (a
warning, then 0 / ``[]``); only construction raises :class:`MemoryStoreError`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from llmfix.memory.store import MemoryStoreError, Quirk

logger = logging.getLogger(__name__)

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
    """Learned quirks in SQLite; thread-safe (one connection, one lock)."""

    def __init__(self, path: str | os.PathLike[str], *, max_age_s: float = 7 * 24 * 3600,
                 clock: Callable[[], float] = time.time) -> None:
        if max_age_s <= 0:
            raise MemoryStoreError(f"max_age_s must be positive, got {max_age_s}")
        self.path = os.fspath(path)
        self.max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        try:
            if self.path != ":memory:" and Path(self.path).is_dir():
                raise MemoryStoreError(f"memory store path {self.path} is a directory")
            self._conn = sqlite3.connect(self.path, timeout=5.0, check_same_thread=False, isolation_level=None)
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
        except sqlite3.Error as e:
            raise MemoryStoreError(f"cannot keep learned quirks in {self.path}: {e}") from e
        self._expire()

    def learn(self, quirk: Quirk) -> None:
        row = (quirk.host.lower(), quirk.port, quirk.dialect, quirk.flag, int(quirk.value), quirk.reason,
               quirk.learned_at)
        with self._lock:
            try:
                self._conn.execute(_UPSERT, row)
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: cannot store a learned quirk: %s", self.path, e)
        self._expire()

    def quirks(self) -> list[Quirk]:
        cutoff = self._clock() - self.max_age_s
        with self._lock:
            try:
                rows = self._conn.execute(
                    "SELECT host, port, dialect, flag, value, reason, learned_at FROM quirks "
                    "WHERE learned_at >= ? ORDER BY learned_at, rowid", (cutoff,)).fetchall()
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: cannot read learned quirks: %s", self.path, e)
                return []
        return [Quirk(h, int(p), d, f, bool(v), r, float(t)) for h, p, d, f, v, r, t in rows]

    def forget(self, host: str | None = None) -> int:
        with self._lock:
            try:
                if host is None:
                    return self._conn.execute("DELETE FROM quirks").rowcount
                return self._conn.execute("DELETE FROM quirks WHERE host = ?", (host.lower(),)).rowcount
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: cannot forget learned quirks: %s", self.path, e)
                return 0

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: close failed: %s", self.path, e)

    def _expire(self) -> None:
        with self._lock:
            try:
                self._conn.execute("DELETE FROM quirks WHERE learned_at < ?", (self._clock() - self.max_age_s,))
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: cannot expire learned quirks: %s", self.path, e)
