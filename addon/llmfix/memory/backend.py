"""Which memory backend ``llmfix_memory`` names, opened: an SQLite file (the default) or a shared Redis.

``llmfix_memory`` is a URL (``redis://HOST:PORT/DB``, ``rediss://…``, a password in the URL allowed and
never printed) or a file path (``:memory:`` for a throw-away store). A URL is never taken for a path:
``redis:`` once became an SQLite file of that name in the working directory. A URL of another scheme, or
a path whose directory does not exist, is refused (the proxy turns that into an ``OptionsError``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmfix import events
from llmfix.memory.redis_link import RedisLink, check_url, is_url
from llmfix.memory.redis_media import RedisMediaStore
from llmfix.memory.redis_store import RedisCallStore, RedisQuirkStore, RedisReasoningStore
from llmfix.memory.sqlite import SqliteStore
from llmfix.memory.sqlite_db import SqliteDb
from llmfix.memory.sqlite_quirks import SqliteQuirkStore
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import CallStore, MediaStore, MemoryStoreError, QuirkStore, ReasoningStore


@dataclass(frozen=True, slots=True)
class Backend:
    calls: CallStore
    media: MediaStore | None  # None: the proxy's in-process MediaWindow
    quirks: QuirkStore
    shared: bool  # memory calls may wait on the network: never make them on the event loop
    reasoning: ReasoningStore | None = None  # what answers said about reasoning (None: not kept)

    def close(self) -> None:
        """Close every store (each backend's stores share one file or one link: the last closes it)."""
        for store in (self.calls, self.quirks, self.reasoning):
            close = getattr(store, "close", None)
            if close is not None:
                close()


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
                       RedisQuirkStore(link, max_age_s=max_age_s), shared=True,
                       reasoning=RedisReasoningStore(link, max_age_s=max_age_s))
    db = SqliteDb(location).acquire()  # one connection to the file, for every store in it
    try:
        opened: list[SqliteStore | SqliteQuirkStore] = []
        try:  # the learned quirks and the reasoning records live in the same file, each in a table of its own
            calls = SqliteStore(db, max_age_s=max_age_s, max_entries=max_entries)
            opened.append(calls)
            quirks = SqliteQuirkStore(db, max_age_s=max_age_s)
            opened.append(quirks)
            reasoning = SqliteReasoningStore(db, max_age_s=max_age_s, max_entries=max_entries)
        except MemoryStoreError:
            for store in opened:
                store.close()
            raise
    finally:
        db.release()  # the stores hold it now; the last one to close closes it
    events.memory_state("sqlite", True)  # a Redis link says so itself, once it has reached Redis
    return Backend(calls, None, quirks, shared=False, reasoning=reasoning)
