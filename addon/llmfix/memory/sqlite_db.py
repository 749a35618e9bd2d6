"""llmfix's memory file: one SQLite database, one connection and one lock, shared by every store in it.

The tool calls (:mod:`llmfix.memory.sqlite`), the learned upstream quirks (:mod:`llmfix.memory.sqlite_quirks`)
and whatever else llmfix remembers across restarts live in one file, each in a table of its own. They share
this one connection: a second connection to the same file would take its own WAL locks, so a write of one
store could wait on the other's (``database is locked`` under load), and each store would repeat the same
open, lock and warn code.

Opening: WAL journal, ``synchronous=NORMAL`` (a commit survives a crash of llmfix, ``kill -9`` included; an
OS crash may lose the last transactions, never tear the file), ``quick_check``. A file that is not a usable
SQLite database of ours is moved aside as ``<name>.corrupt-<time>`` with one warning and a fresh one is made.
``":memory:"`` gives a private, throw-away database (tests, ``llmfix.capture``).

Contract: :meth:`SqliteDb.read` and :meth:`SqliteDb.write` run a function under the lock (``write`` inside
one ``BEGIN IMMEDIATE`` transaction: all of it or none of it); a database error there never reaches the
caller: one warning naming the file and what could not be done, and the caller's default comes back.
Only opening raises, :class:`~llmfix.memory.store.MemoryStoreError`. Each store registers its tables with
:meth:`SqliteDb.ensure` (``CREATE TABLE IF NOT EXISTS``: a file written by an older llmfix gains them and
keeps what it holds) and says :meth:`SqliteDb.release` when it closes; the last one closes the connection.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from itertools import batched
from pathlib import Path
from typing import Any

from llmfix.memory.store import MemoryStoreError

logger = logging.getLogger("llmfix.memory.sqlite")

IN_CHUNK = 500
"""Keys bound per ``IN (…)`` query (SQLite's host-parameter limit is 999 in old builds)."""
SCHEMA_VERSION = 1
"""The file's ``user_version``. New tables do not change it: an older llmfix opening the file ignores them."""


class _NotADatabase(Exception):
    """The file at the path exists but is not a usable SQLite store of ours."""


class SqliteDb:
    """One memory file and its one connection; thread-safe (every use holds the lock)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._users = 0
        self._closed = False
        self._conn = self._open()

    # -- what the stores call --------------------------------------------------------------------

    def ensure(self, schema: str) -> None:
        """Create a store's tables and indexes if they are missing (raises MemoryStoreError: opening time)."""
        with self._lock:
            try:
                self._conn.executescript(f"BEGIN IMMEDIATE;{schema}COMMIT;")
            except sqlite3.Error as e:
                with suppress(sqlite3.Error):
                    self._conn.rollback()
                raise MemoryStoreError(f"cannot set up the memory store {self.path}: {e}") from e

    def acquire(self) -> SqliteDb:
        """A store starts using the file (each :meth:`acquire` is matched by one :meth:`release`)."""
        with self._lock:
            self._users += 1
        return self

    def release(self) -> None:
        """A store stops using the file; the last one closes the connection."""
        with self._lock:
            self._users -= 1
            if self._users > 0 or self._closed:
                return
            self._closed = True
            try:
                self._conn.close()
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: close failed: %s", self.path, e)

    def read[T](self, what: str, body: Callable[[sqlite3.Connection], T], default: T) -> T:
        """``body(connection)`` under the lock; on a database error, a warning "cannot ``what``" and ``default``."""
        with self._lock:
            try:
                return body(self._conn)
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: cannot %s: %s", self.path, what, e)
                return default

    def write[T](self, what: str, body: Callable[[sqlite3.Cursor], T], default: T) -> T:
        """``body(cursor)`` in one ``BEGIN IMMEDIATE`` transaction under the lock (all or nothing); on a database
        error, a warning "cannot ``what``" and ``default``."""
        with self._lock:
            try:
                return self._transaction(body)
            except sqlite3.Error as e:
                logger.warning("llmfix memory %s: cannot %s: %s", self.path, what, e)
                return default

    def select_in(self, what: str, sql: str, params: tuple[Any, ...], keys: list[str]) -> list[tuple[Any, ...]]:
        """The rows of ``sql`` (ending in ``IN`` without its list) with ``params`` then each of ``keys`` bound,
        ``keys`` a few hundred at a time (well below SQLite's host-parameter limit); [] with a warning on error."""

        def body(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            rows: list[tuple[Any, ...]] = []
            for chunk in batched(keys, IN_CHUNK):
                rows += conn.execute(f"{sql} ({','.join('?' * len(chunk))})", (*params, *chunk)).fetchall()
            return rows

        return self.read(what, body, [])

    # -- internals -----------------------------------------------------------------------------

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

    def _open(self) -> sqlite3.Connection:
        if self.path == ":memory:":
            conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
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
    """Open (creating if needed) the file at ``path``; _NotADatabase if it is not a sound store."""
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
        if version == 0:
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        return conn
    except sqlite3.OperationalError as e:  # busy, read-only, I/O error: the file may be fine, the path is not
        conn.close()
        raise MemoryStoreError(f"cannot use memory store {path}: {e}") from e
    except (sqlite3.DatabaseError, _NotADatabase) as e:  # not a database, malformed image
        conn.close()
        raise _NotADatabase(str(e)) from e


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


class Use:
    """One store's use of a :class:`SqliteDb`, its tables made sure of (``schema``): ``db`` to work with,
    :meth:`release` (once; later calls do nothing) when the store closes."""

    def __init__(self, source: str | os.PathLike[str] | SqliteDb, schema: str) -> None:
        self.db = (source if isinstance(source, SqliteDb) else SqliteDb(source)).acquire()
        self._released = False
        try:
            self.db.ensure(schema)
        except MemoryStoreError:
            self.release()
            raise

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.db.release()
