"""The embedded :class:`~llmfix.memory.store.ReasoningStore`: what answers said about reasoning, in SQLite.

Two tables in the memory file, beside the tool calls and the learned quirks, on their connection
(:class:`llmfix.memory.sqlite_db.SqliteDb`): ``reasoning_keys``, one row per (kind, key) of a
:class:`~llmfix.memory.store.Reasoning` record with the digest of its value, the upstream that issued it and when it
was last seen; ``reasoning_values``, each value once under its SHA-256, whatever the number of keys that map to it
(a turn of N parallel tool calls has N keys and one reasoning: it is stored once). A file written before them gains
them; the older one-table layout is dropped (its Chat keys were bare call ids, which another session can make).
Why a file: the turn that comes back without its reasoning may come after an llmfix restart, like a forgotten call.

Single-valued kinds (:data:`~llmfix.memory.store.SINGLE_VALUED`): a key noted again with another value or upstream
keeps an empty digest — ambiguous, recalled by nobody — while it is noted again, until it expires. Other kinds: a
later record replaces the earlier one.

Bounds: by age (``max_age_s``: older rows are invisible and pruned) and by count of keys (``max_entries``, the
oldest go first, checked every ``PRUNE_EVERY`` rows written); a value goes as soon as no key names it (the note
that replaced it or made its key ambiguous, the pruning that took its keys). A record whose key or value is larger
than :data:`MAX_KEY_CHARS` / :data:`MAX_VALUE_CHARS` is not kept. So the file holds at most ``max_entries +
PRUNE_EVERY`` keys and as many distinct values: in bytes, that many times :data:`MAX_VALUE_CHARS` at the very worst
(each key a different megabyte of reasoning), the values' own size in practice (a DeepSeek reasoning is a few KB).
Runtime errors never reach callers (a warning, then 0 / ``{}``); only construction raises
:class:`~llmfix.memory.store.MemoryStoreError`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from itertools import batched
from typing import Any

from llmfix.memory.fingerprint import value_digest
from llmfix.memory.sqlite_db import IN_CHUNK, SqliteDb, Use
from llmfix.memory.store import SINGLE_VALUED, MemoryStoreError, Reasoning

MAX_KEY_CHARS = 512
MAX_VALUE_CHARS = 1 << 20
PRUNE_EVERY = 1000

_SCHEMA = """
DROP TABLE IF EXISTS reasoning;
CREATE TABLE IF NOT EXISTS reasoning_keys (
    kind     TEXT NOT NULL,
    key      TEXT NOT NULL,
    digest   TEXT NOT NULL,
    upstream TEXT NOT NULL,
    seen_at  REAL NOT NULL,
    PRIMARY KEY (kind, key)
);
CREATE INDEX IF NOT EXISTS reasoning_keys_seen_at ON reasoning_keys (seen_at);
CREATE INDEX IF NOT EXISTS reasoning_keys_digest ON reasoning_keys (digest);
CREATE TABLE IF NOT EXISTS reasoning_values (
    digest TEXT PRIMARY KEY NOT NULL,
    value  TEXT NOT NULL
);
"""
_UPSERT = """INSERT INTO reasoning_keys (kind, key, digest, upstream, seen_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (kind, key) DO UPDATE SET
    digest = excluded.digest, upstream = excluded.upstream, seen_at = excluded.seen_at"""
_VALUE = "INSERT OR IGNORE INTO reasoning_values (digest, value) VALUES (?, ?)"
_ORPHAN = """DELETE FROM reasoning_values WHERE digest = ?
AND NOT EXISTS (SELECT 1 FROM reasoning_keys WHERE digest = ?)"""


def storable(r: Reasoning) -> bool:
    """Whether a record is within the bounds every backend keeps."""
    return bool(r.kind and r.key) and len(r.key) <= MAX_KEY_CHARS and len(r.value) <= MAX_VALUE_CHARS


def _held(cur: Any, keys: set[tuple[str, str]], cutoff: float
          ) -> tuple[dict[tuple[str, str], tuple[str, str]], set[str]]:
    """(digest, upstream) of each of ``keys`` held unexpired, and every digest the rows of ``keys`` name."""
    held: dict[tuple[str, str], tuple[str, str]] = {}
    named: set[str] = set()
    by_kind: dict[str, list[str]] = {}
    for kind, key in keys:
        by_kind.setdefault(kind, []).append(key)
    for kind, names in by_kind.items():
        for chunk in batched(names, IN_CHUNK):
            for key, digest, upstream, seen_at in cur.execute(
                    "SELECT key, digest, upstream, seen_at FROM reasoning_keys WHERE kind = ? AND key IN "
                    f"({','.join('?' * len(chunk))})", (kind, *chunk)):
                named.add(digest)
                if seen_at >= cutoff:
                    held[(kind, key)] = (digest, upstream)
    return held, named


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
        fresh = [(r, value_digest(r.value)) for r in records if storable(r)]
        if not fresh:
            return 0
        cutoff = now - self.max_age_s

        def body(cur: Any) -> int:
            held, before = _held(cur, {(r.kind, r.key) for r, _ in fresh}, cutoff)
            rows: list[tuple[Any, ...]] = []
            values: dict[str, tuple[str, str]] = {}
            for r, digest in fresh:
                old = held.get((r.kind, r.key))
                if r.kind in SINGLE_VALUED and old is not None and old != (digest, r.upstream):
                    digest = ""  # ambiguous: two values under one key
                else:
                    values.setdefault(digest, (digest, r.value))
                held[(r.kind, r.key)] = (digest, r.upstream)
                rows.append((r.kind, r.key, digest, r.upstream, now))
            cur.executemany(_VALUE, list(values.values()))
            written = cur.executemany(_UPSERT, rows).rowcount
            cur.executemany(_ORPHAN, [(d, d) for d in before])  # a value a key named before, if none names it now
            self._written += written
            if self._written >= PRUNE_EVERY:
                self._prune(cur, now)
            return written

        return self.db.write(f"note {len(fresh)} reasoning record(s)", body, 0)


    def recall(self, kind: str, keys: Iterable[str]) -> dict[str, Reasoning]:
        wanted = list(dict.fromkeys(k for k in keys if isinstance(k, str) and k and len(k) <= MAX_KEY_CHARS))
        if not wanted:
            return {}
        cutoff = self._clock() - self.max_age_s

        rows = self.db.select_in("recall reasoning", "SELECT k.key, v.value, k.upstream FROM reasoning_keys k "
                                 "JOIN reasoning_values v ON v.digest = k.digest "
                                 "WHERE k.kind = ? AND k.seen_at >= ? AND k.key IN", (kind, cutoff), wanted)
        return {key: Reasoning(kind, key, value, upstream) for key, value, upstream in rows}

    def count(self) -> int:
        """Keys stored, expired or not (tests, diagnostics)."""
        return self.db.read("count reasoning", lambda c: int(c.execute("SELECT count(*) FROM reasoning_keys")
                                                             .fetchone()[0]), 0)

    def values(self) -> int:
        """Distinct values stored (tests, diagnostics)."""
        return self.db.read("count reasoning values", lambda c: int(c.execute("SELECT count(*) FROM "
                                                                             "reasoning_values").fetchone()[0]), 0)

    def close(self) -> None:
        self._use.release()

    def _prune(self, cur: Any, now: float) -> None:
        """Expired keys, then the oldest beyond ``max_entries``, and the values only they named."""
        gone = {d for (d,) in cur.execute("SELECT digest FROM reasoning_keys WHERE seen_at < ?",
                                          (now - self.max_age_s,))}
        cur.execute("DELETE FROM reasoning_keys WHERE seen_at < ?", (now - self.max_age_s,))
        excess = cur.execute("SELECT count(*) FROM reasoning_keys").fetchone()[0] - self.max_entries
        if excess > 0:
            oldest = "SELECT rowid FROM reasoning_keys ORDER BY seen_at, rowid LIMIT ?"
            gone |= {d for (d,) in cur.execute(f"SELECT digest FROM reasoning_keys WHERE rowid IN ({oldest})",
                                               (excess,))}
            cur.execute(f"DELETE FROM reasoning_keys WHERE rowid IN ({oldest})", (excess,))
        cur.executemany(_ORPHAN, [(d, d) for d in gone])
        self._written = 0
