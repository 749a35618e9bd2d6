"""The embedded :class:`~llmfix.memory.store.CallStore`: every tool call llmfix has seen, keyed by call id, in SQLite.

What it stores: one row per tool call id with the call's name, its arguments exactly as issued (the
JSON string of Chat/Responses, the JSON text of an Anthropic ``input``), its dialect and kind, and the
unix time it was last seen. untangle-tool-run reads it to give an orphaned tool result its
declaration back; the calls come from streamed/JSON responses (``learn.py``) and from request histories.

One id, one declaration: an id seen again with another name, kind or arguments (compared by what they say,
:func:`llmfix.memory.fingerprint.declaration`: a client re-writing the model's JSON is the same call) is
ambiguous — its row keeps an empty name, :meth:`SqliteStore.lookup` never gives it back, and it stays so while it
is seen again, until it expires. Kimi numbers its ids within a conversation (``functions.bash:0`` is every
session's first ``bash`` call), so the last writer's declaration would go into another session's history.

Why SQLite: the call that a broken client later forgets was issued one turn earlier, possibly before
a proxy restart. A WAL-mode SQLite file under mitmproxy's confdir keeps it across restarts and
``kill -9`` (every write is one transaction; a crash loses at most the transaction in flight and never
leaves a torn store). ``":memory:"`` gives a private, throw-away store for tests.

Bounds: rows older than ``max_age_s`` are invisible to :meth:`SqliteStore.lookup` and deleted by
:meth:`SqliteStore.prune`; beyond ``max_entries`` the oldest rows are deleted. Pruning runs automatically
after ``PRUNE_EVERY_INSERTS`` rows written or ``PRUNE_INTERVAL_S`` seconds, so the table never holds
more than ``max_entries + PRUNE_EVERY_INSERTS`` rows. A single call whose arguments exceed
``MAX_ARGUMENTS_CHARS`` is not stored (restoring a megabyte-sized declaration is not worth the space).

Invariants: callers run on the mitmproxy event loop and in worker threads at the same time; the memory
file's one connection and lock (:class:`llmfix.memory.sqlite_db.SqliteDb`, shared with the other stores in
the file) serve them all. Runtime database errors never reach callers (``remember`` returns 0, ``lookup``
returns ``{}``, each with a warning naming the reason); only the constructor raises,
:class:`MemoryStoreError`, for a path that cannot hold a store.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from itertools import batched
from typing import Any

from llmfix.memory.fingerprint import declaration
from llmfix.memory.sqlite_db import IN_CHUNK, SCHEMA_VERSION, SqliteDb, Use
from llmfix.memory.store import MemoryStoreError, ToolCall

__all__ = ["MAX_ARGUMENTS_CHARS", "SCHEMA_VERSION", "SqliteStore"]

MAX_ARGUMENTS_CHARS = 1 << 20
PRUNE_EVERY_INSERTS = 1000
PRUNE_INTERVAL_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_calls (
    call_id   TEXT PRIMARY KEY NOT NULL,
    name      TEXT NOT NULL,
    arguments TEXT NOT NULL,
    dialect   TEXT NOT NULL,
    kind      TEXT NOT NULL DEFAULT 'function',
    seen_at   REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS tool_calls_seen_at ON tool_calls (seen_at);
"""

_UPSERT = """
INSERT INTO tool_calls (call_id, name, arguments, dialect, kind, seen_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (call_id) DO UPDATE SET
    name = excluded.name, arguments = excluded.arguments, dialect = excluded.dialect,
    kind = excluded.kind, seen_at = excluded.seen_at
"""


class SqliteStore:
    """Tool calls by call id, with expiry and a size bound. Thread-safe; see the module docstring.

    ``path``: the memory file (``":memory:"`` for a private one), or the :class:`SqliteDb` another store of
    the same file already opened."""

    def __init__(
        self,
        path: str | os.PathLike[str] | SqliteDb,
        *,
        max_age_s: int = 7 * 24 * 3600,
        max_entries: int = 100_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_age_s <= 0:
            raise MemoryStoreError(f"max_age_s must be positive, got {max_age_s}")
        if max_entries <= 0:
            raise MemoryStoreError(f"max_entries must be positive, got {max_entries}")
        self.max_age_s = max_age_s
        self.max_entries = max_entries
        self._clock = clock
        self._use = Use(path, _SCHEMA)
        self.db = self._use.db
        self.path = self.db.path
        self._written_since_prune = 0
        self._last_prune = clock()
        self.prune()

    # -- public API ---------------------------------------------------------------------------

    def remember(self, calls: Iterable[ToolCall]) -> int:
        """Upsert calls (a re-seen call refreshes ``seen_at``; one with another declaration under a known id makes
        it ambiguous) in one transaction; returns rows written."""
        now = self._clock()
        fresh = [c for c in calls if c.call_id and len(c.arguments) <= MAX_ARGUMENTS_CHARS]
        if not fresh:
            return 0

        def body(cur: Any) -> int:
            rows = _settled(cur, fresh, now, now - self.max_age_s)
            written = cur.executemany(_UPSERT, rows).rowcount
            self._written_since_prune += written
            if self._written_since_prune >= PRUNE_EVERY_INSERTS or now - self._last_prune >= PRUNE_INTERVAL_S:
                self._prune(cur, now)  # in the same transaction: a write and its bound commit together
            return written

        return self.db.write(f"remember {len(fresh)} call(s)", body, 0)

    def lookup(self, call_ids: Iterable[str]) -> dict[str, ToolCall]:
        """The known, unexpired calls among ``call_ids``; unknown ids are simply absent."""
        ids = list(dict.fromkeys(i for i in call_ids if isinstance(i, str) and i))
        if not ids:
            return {}
        cutoff = self._clock() - self.max_age_s

        rows = self.db.select_in("look up calls", "SELECT call_id, name, arguments, dialect, kind FROM tool_calls "
                                 "WHERE seen_at >= ? AND name != '' AND call_id IN", (cutoff,), ids)
        return {row[0]: ToolCall(*row) for row in rows}

    def prune(self) -> int:
        """Delete expired rows, then the oldest beyond ``max_entries``; returns rows deleted."""
        now = self._clock()
        return self.db.write("prune", lambda cur: self._prune(cur, now), 0)

    def count(self) -> int:
        """Rows currently stored, expired or not (for tests and diagnostics)."""
        return self.db.read("count calls", lambda conn: int(conn.execute("SELECT count(*) FROM tool_calls")
                                                           .fetchone()[0]), 0)

    def close(self) -> None:
        self._use.release()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------

    def _prune(self, cur: Any, now: float) -> int:
        deleted = cur.execute("DELETE FROM tool_calls WHERE seen_at < ?", (now - self.max_age_s,)).rowcount
        excess = cur.execute("SELECT count(*) FROM tool_calls").fetchone()[0] - self.max_entries
        if excess > 0:
            deleted += cur.execute(
                "DELETE FROM tool_calls WHERE rowid IN "
                "(SELECT rowid FROM tool_calls ORDER BY seen_at, rowid LIMIT ?)",
                (excess,),
            ).rowcount
        self._written_since_prune = 0
        self._last_prune = now
        return deleted


def _settled(cur: Any, calls: list[ToolCall], now: float, cutoff: float) -> list[tuple[Any, ...]]:
    """The rows to upsert for ``calls``: each as it is, or ambiguous (an empty name and arguments) when its id is
    held — unexpired in the table, or earlier in ``calls`` — with another declaration, or is ambiguous already."""
    ids = list(dict.fromkeys(c.call_id for c in calls))
    held: dict[str, tuple[str, str, str]] = {}
    for chunk in batched(ids, IN_CHUNK):
        held |= {row[0]: row[1:] for row in cur.execute(
            "SELECT call_id, name, kind, arguments FROM tool_calls WHERE seen_at >= ? AND call_id IN "
            f"({','.join('?' * len(chunk))})", (cutoff, *chunk))}
    rows: list[tuple[Any, ...]] = []
    for c in calls:
        old = held.get(c.call_id)
        mine = (c.name, c.kind, c.arguments)
        if old is not None and old != mine and (not old[0] or declaration(*old) != declaration(*mine)):
            mine = ("", c.kind, "")
        held[c.call_id] = mine
        rows.append((c.call_id, mine[0], mine[2], c.dialect, c.kind, now))
    return rows
