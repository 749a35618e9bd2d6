"""The embedded :class:`~llmfix.memory.store.ReasoningStore`: what answers said about reasoning, in SQLite.

One row per (kind, key) of a :class:`~llmfix.memory.store.Reasoning` record, with its value, the upstream that
issued it and when it was last seen. It lives in the memory file beside the tool calls and the learned quirks, on
their connection (:class:`llmfix.memory.sqlite_db.SqliteDb`), in its own table: a file written before it existed
gains the table and keeps what it holds. Why a file: the turn that comes back without its reasoning may come
after an llmfix restart, like a forgotten tool call.

Bounds: like the tool calls, by age (``max_age_s``: older rows are invisible and pruned) and count
(``max_entries``, the oldest go first, checked every ``PRUNE_EVERY`` rows written); a record whose key or value
is larger than :data:`MAX_KEY_CHARS` / :data:`MAX_VALUE_CHARS` is not kept. Runtime errors never reach callers
(a warning, then 0 / ``{}``); only construction raises :class:`~llmfix.memory.store.MemoryStoreError`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from llmfix.memory.sqlite_db import SqliteDb, Use
from llmfix.memory.store import MemoryStoreError, Reasoning

MAX_KEY_CHARS = 512
MAX_VALUE_CHARS = 1 << 20
PRUNE_EVERY = 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reasoning (
    kind     TEXT NOT NULL,
    key      TEXT NOT NULL,
    value    TEXT NOT NULL,
    upstream TEXT NOT NULL,
    seen_at  REAL NOT NULL,
    PRIMARY KEY (kind, key)
);
CREATE INDEX IF NOT EXISTS reasoning_seen_at ON reasoning (seen_at);
"""
_UPSERT = """
INSERT INTO reasoning (kind, key, value, upstream, seen_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (kind, key) DO UPDATE SET
    value = excluded.value, upstream = excluded.upstream, seen_at = excluded.seen_at
"""


def storable(r: Reasoning) -> bool:
    """Whether a record is within the bounds every backend keeps."""
    return bool(r.kind and r.key) and len(r.key) <= MAX_KEY_CHARS and len(r.value) <= MAX_VALUE_CHARS


class SqliteReasoningStore:
    """Reasoning records by (kind, key) in SQLite; thread-safe. ``path``: the memory file, or the
    :class:`SqliteDb` another store of the same file already opened."""

    def __init__(self, path: str | os.PathLike[str] | SqliteDb, *, max_age_s: float = 7 * 24 * 3600,
                 max_entries: int = 100_000, clock: Callable[[], float] = time.time) -> None:
        if max_age_s <= 0 or max_entries <= 0:
            raise MemoryStoreError(f"max_age_s and max_entries must be positive, got {max_age_s}, {max_entries}")
        self.max_age_s = max_age_s
        self.max_entries = max_entries
        self._clock = clock
        self._written = 0
        self._use = Use(path, _SCHEMA)
        self.db = self._use.db

    def note(self, records: Iterable[Reasoning]) -> int:
        now = self._clock()
        rows = [(r.kind, r.key, r.value, r.upstream, now) for r in records if storable(r)]
        if not rows:
            return 0

        def body(cur: Any) -> int:
            written = cur.executemany(_UPSERT, rows).rowcount
            self._written += written
            if self._written >= PRUNE_EVERY:
                self._prune(cur, now)
            return written

        return self.db.write(f"note {len(rows)} reasoning record(s)", body, 0)

    def recall(self, kind: str, keys: Iterable[str]) -> dict[str, Reasoning]:
        wanted = list(dict.fromkeys(k for k in keys if isinstance(k, str) and k and len(k) <= MAX_KEY_CHARS))
        if not wanted:
            return {}
        cutoff = self._clock() - self.max_age_s

        rows = self.db.select_in("recall reasoning", "SELECT key, value, upstream FROM reasoning "
                                 "WHERE kind = ? AND seen_at >= ? AND key IN", (kind, cutoff), wanted)
        return {key: Reasoning(kind, key, value, upstream) for key, value, upstream in rows}

    def count(self) -> int:
        """Rows stored, expired or not (tests, diagnostics)."""
        return self.db.read("count reasoning", lambda c: int(c.execute("SELECT count(*) FROM reasoning")
                                                             .fetchone()[0]), 0)

    def close(self) -> None:
        self._use.release()

    def _prune(self, cur: Any, now: float) -> None:
        cur.execute("DELETE FROM reasoning WHERE seen_at < ?", (now - self.max_age_s,))
        excess = cur.execute("SELECT count(*) FROM reasoning").fetchone()[0] - self.max_entries
        if excess > 0:
            cur.execute("DELETE FROM reasoning WHERE rowid IN "
                        "(SELECT rowid FROM reasoning ORDER BY seen_at, rowid LIMIT ?)", (excess,))
        self._written = 0
