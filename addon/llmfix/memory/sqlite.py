"""The embedded :class:`~llmfix.memory.store.CallStore`: every tool call llmfix has seen, keyed by call id, in SQLite.

What it stores: one row per tool call id with the call's name, its arguments exactly as issued (the
JSON string of Chat/Responses, the JSON text of an Anthropic ``input``), its dialect and kind, and the
unix time it was last seen. untangle-tool-run reads it to give an orphaned tool result its
declaration back; the calls come from streamed/JSON responses (``learn.py``) and from request histories.

Why SQLite: the call that a broken client later forgets was issued one turn earlier, possibly before
a proxy restart. A WAL-mode SQLite file under mitmproxy's confdir keeps it across restarts and
``kill -9`` (every write is one transaction; a crash loses at most the transaction in flight and never
leaves a torn store). ``":memory:"`` gives a private, throw-away store for tests.

Bounds: rows older than ``max_age_s`` are invisible to :meth:`SqliteStore.lookup` and deleted by
:meth:`SqliteStore.prune`; beyond ``max_entries`` the oldest rows are deleted. Pruning runs automatically
after ``PRUNE_EVERY_INSERTS`` rows written or ``PRUNE_INTERVAL_S`` seconds, so the table never holds
more than ``max_entries + PRUNE_EVERY_INSERTS`` rows. A single call whose arguments exceed
``MAX_ARGUMENTS_CHARS`` is not stored (restoring a megabyte-sized declaration is not worth the space).

Invariants: callers run on the mitmproxy event loop and in worker threads at the same time; one
connection guarded by one lock serves them all. Runtime database errors never reach callers
(``remember`` returns 0, ``lookup`` returns ``{}``, each with a warning naming the reason); only the
constructor raises, :class:`MemoryStoreError`, for a path that cannot hold a store.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from itertools import batched
from pathlib import Path

from llmfix.memory.store import MemoryStoreError, ToolCall

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
MAX_ARGUMENTS_CHARS = 1 << 20
PRUNE_EVERY_INSERTS = 1000
PRUNE_INTERVAL_S = 60.0
_LOOKUP_CHUNK = 500  # well below SQLite's host-parameter limit

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


class _NotADatabase(Exception):
    """The file at the path exists but is not a usable SQLite store of ours."""


class SqliteStore:
    """Tool calls by call id, with expiry and a size bound. Thread-safe; see the module docstring."""

    def __init__(
        self,
        path: str | os.PathLike[str],
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
        self._lock = threading.Lock()
        self.path = os.fspath(path)
        self._conn = self._open()
        self._written_since_prune = 0
        self._last_prune = clock()
        self.prune()

    # -- public API ---------------------------------------------------------------------------

    def remember(self, calls: Iterable[ToolCall]) -> int:
        """Upsert calls (a re-seen call refreshes ``seen_at``) in one transaction; returns rows written."""
        now = self._clock()
        rows = [
            (c.call_id, c.name, c.arguments, c.dialect, c.kind, now)
            for c in calls
            if c.call_id and len(c.arguments) <= MAX_ARGUMENTS_CHARS
        ]
        if not rows:
            return 0
        with self._lock:
            try:
                written = self._transaction(lambda cur: cur.executemany(_UPSERT, rows).rowcount)
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: cannot remember %d call(s): %s", self.path, len(rows), e)
                return 0
            self._written_since_prune += written
            if self._written_since_prune >= PRUNE_EVERY_INSERTS or now - self._last_prune >= PRUNE_INTERVAL_S:
                try:
                    self._prune_locked(now)
                except sqlite3.Error as e:
                    logger.warning("llmfix memory %s: prune failed: %s", self.path, e)
            return written

    def lookup(self, call_ids: Iterable[str]) -> dict[str, ToolCall]:
        """The known, unexpired calls among ``call_ids``; unknown ids are simply absent."""
        ids = list(dict.fromkeys(i for i in call_ids if isinstance(i, str) and i))
        if not ids:
            return {}
        cutoff = self._clock() - self.max_age_s
        found: dict[str, ToolCall] = {}
        with self._lock:
            try:
                for chunk in batched(ids, _LOOKUP_CHUNK):
                    sql = (
                        "SELECT call_id, name, arguments, dialect, kind FROM tool_calls "
                        f"WHERE call_id IN ({','.join('?' * len(chunk))}) AND seen_at >= ?"
                    )
                    for row in self._conn.execute(sql, (*chunk, cutoff)):
                        found[row[0]] = ToolCall(*row)
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: lookup failed: %s", self.path, e)
                return {}
        return found

    def prune(self) -> int:
        """Delete expired rows, then the oldest beyond ``max_entries``; returns rows deleted."""
        with self._lock:
            try:
                return self._prune_locked(self._clock())
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: prune failed: %s", self.path, e)
                return 0

    def count(self) -> int:
        """Rows currently stored, expired or not (for tests and diagnostics)."""
        with self._lock:
            try:
                return int(self._conn.execute("SELECT count(*) FROM tool_calls").fetchone()[0])
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: count failed: %s", self.path, e)
                return 0

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: close failed: %s", self.path, e)

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------

    def _transaction[T](self, body: Callable[[sqlite3.Cursor], T]) -> T:
        cur = self._conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            result = body(cur)
            cur.execute("COMMIT")
        except BaseException:
            with suppress(sqlite3.Error):
                self._conn.rollback()
            raise
        return result

    def _prune_locked(self, now: float) -> int:
        def body(cur: sqlite3.Cursor) -> int:
            deleted = cur.execute("DELETE FROM tool_calls WHERE seen_at < ?", (now - self.max_age_s,)).rowcount
            excess = cur.execute("SELECT count(*) FROM tool_calls").fetchone()[0] - self.max_entries
            if excess > 0:
                deleted += cur.execute(
                    "DELETE FROM tool_calls WHERE rowid IN "
                    "(SELECT rowid FROM tool_calls ORDER BY seen_at, rowid LIMIT ?)",
                    (excess,),
                ).rowcount
            return deleted

        deleted = self._transaction(body)
        self._written_since_prune = 0
        self._last_prune = now
        return deleted

    def _open(self) -> sqlite3.Connection:
        if self.path == ":memory:":
            conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            _init_schema(conn)
            return conn
        path = Path(self.path)
        if path.is_dir():
            raise MemoryStoreError(
                f"memory store path {path} is a directory; give a file path such as {path / 'llmfix.sqlite3'}"
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise MemoryStoreError(f"cannot create directory {path.parent} for the memory store: {e}") from e
        try:
            return _connect_file(path)
        except _NotADatabase as e:
            aside = _move_aside(path)
            logger.warning(
                "llmfix memory: %s is not a usable SQLite store (%s); moved it to %s and started a fresh one",
                path,
                e,
                aside,
            )
        try:
            return _connect_file(path)
        except _NotADatabase as e:
            raise MemoryStoreError(f"cannot create a fresh memory store at {path}: {e}") from e


def _connect_file(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the store at ``path``; _NotADatabase if the file is not a sound store."""
    try:
        conn = sqlite3.connect(path, timeout=5.0, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as e:
        raise MemoryStoreError(f"cannot open memory store {path}: {e}") from e
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise _NotADatabase(f"quick_check: {check}")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise _NotADatabase(f"unknown schema version {version}")
        _init_schema(conn)
        return conn
    except sqlite3.OperationalError as e:  # busy, read-only, I/O error: the file may be fine, the path is not
        conn.close()
        raise MemoryStoreError(f"cannot use memory store {path}: {e}") from e
    except (sqlite3.DatabaseError, _NotADatabase) as e:  # not a database, malformed image
        conn.close()
        raise _NotADatabase(str(e)) from e


def _init_schema(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}PRAGMA user_version={SCHEMA_VERSION};COMMIT;")


def _move_aside(path: Path) -> Path:
    """Rename ``path`` (and its -wal/-shm/-journal companions) to ``<path>.corrupt-<timestamp>``."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists():
        aside = path.with_name(f"{path.name}.corrupt-{stamp}.{n}")
        n += 1
    try:
        path.rename(aside)
        for suffix in ("-wal", "-shm", "-journal"):
            companion = Path(f"{path}{suffix}")
            if companion.exists():
                companion.rename(f"{aside}{suffix}")
    except OSError as e:
        raise MemoryStoreError(f"memory store {path} is unusable and cannot be moved aside: {e}") from e
    return aside
