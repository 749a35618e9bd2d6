"""Which memory backend ``llmfix_memory`` names, opened: an SQLite file (the default) or a shared Redis.

``llmfix_memory`` is a URL (``redis://HOST:PORT/DB``, ``rediss://…``, a password in the URL allowed and
never printed) or a file path (``:memory:`` for a throw-away store). A URL is never taken for a path:
``redis:`` once became an SQLite file of that name in the working directory. A URL of another scheme, or
a path whose directory does not exist, is refused (the proxy turns that into an ``OptionsError``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmfix.memory.redis_link import RedisLink, check_url, is_url
from llmfix.memory.redis_media import RedisMediaStore
from llmfix.memory.redis_store import RedisCallStore, RedisQuirkStore
from llmfix.memory.sqlite import SqliteStore
from llmfix.memory.sqlite_db import SqliteDb
from llmfix.memory.sqlite_quirks import SqliteQuirkStore
from llmfix.memory.store import CallStore, MediaStore, MemoryStoreError, QuirkStore


@dataclass(frozen=True, slots=True)
class Backend:
    calls: CallStore
    media: MediaStore | None  # None: the proxy's in-process MediaWindow
    quirks: QuirkStore
    shared: bool  # memory calls may wait on the network: never make them on the event loop


def check_location(location: str, given: bool = True) -> None:
    """Raise :class:`MemoryStoreError` for a location that cannot be opened, without opening it.

    ``given``: the user named it (the default location's directory is created when missing)."""
    if is_url(location):
        check_url(location)
        return
    if given and location != ":memory:":
        parent = Path(location).expanduser().parent
        if not parent.is_dir():
            raise MemoryStoreError(f"the directory {parent} of {location} does not exist")


def open_memory(location: str, *, max_age_s: int, max_entries: int, timeout_s: float) -> Backend:
    """The backend for ``location`` (checked with :func:`check_location` first)."""
    if is_url(location):
        link = RedisLink(location, timeout_s=timeout_s)
        return Backend(RedisCallStore(link, max_age_s=max_age_s), RedisMediaStore(link),
                       RedisQuirkStore(link, max_age_s=max_age_s), shared=True)
    db = SqliteDb(location).acquire()  # one connection to the file, for every store in it
    try:
        calls = SqliteStore(db, max_age_s=max_age_s, max_entries=max_entries)
        try:  # the learned quirks live in the same file, a table of their own
            quirks = SqliteQuirkStore(db, max_age_s=max_age_s)
        except MemoryStoreError:
            calls.close()
            raise
    finally:
        db.release()  # the stores hold it now; the last one to close closes it
    return Backend(calls, None, quirks, shared=False)
