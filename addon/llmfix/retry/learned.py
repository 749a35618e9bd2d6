"""The learned quirks the engine reads on every LLM request: an in-process view over a QuirkStore.

Every request asks :meth:`LearnedQuirks.flags` for its (host, port, dialect): one dict read, no I/O, so
the hot path costs nothing when nothing was learned. Learning writes through to the store (SQLite, or a
Redis a fleet shares), which keeps the quirk across restarts; the view is loaded from it on open. With a
shared store the view is read again from it at most every ``SYNC_S`` seconds (the Redis store answers from
its own local copy, so this never waits on the network): what another instance learned applies here too.
Expired quirks (older than the memory's max age) stop applying without a restart.

Safe from the event loop and worker threads: writers hold a lock and replace the per-upstream tuple
whole; readers only read the dict.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from llmfix.memory.store import Quirk, QuirkStore

logger = logging.getLogger("llmfix")

SYNC_S = 1.0
"""A shared store's quirks are read again at most this often."""
KEEP_LOCAL_S = 10.0
"""A quirk learned here is kept by a sync for this long even if the shared store does not show it yet."""

Key = tuple[str, int, str]
Flags = tuple[tuple[str, bool], ...]


class LearnedQuirks:
    def __init__(self, store: QuirkStore | None, max_age_s: float, clock: Callable[[], float] = time.time,
                 *, shared: bool = False) -> None:
        self.store = store
        self.max_age_s = max_age_s
        self.shared = shared and store is not None
        self._clock = clock
        self._synced = clock()
        self._lock = threading.Lock()
        self._by_upstream: dict[Key, tuple[Quirk, ...]] = {}
        for q in store.quirks() if store is not None else ():
            self._put(q)

    @staticmethod
    def key(host: str, port: int | None, dialect: str) -> Key:
        return (host.lower(), port or 0, str(dialect))

    def flags(self, host: str, port: int | None, dialect: str) -> Flags:
        """The flags learned for this upstream, sorted by name (empty when none or all expired)."""
        if self.shared and self._clock() - self._synced >= SYNC_S:
            self._sync()
        found = self._by_upstream.get(self.key(host, port, dialect))
        if not found:
            return ()
        cutoff = self._clock() - self.max_age_s
        return tuple(sorted((q.flag, q.value) for q in found if q.learned_at >= cutoff))

    def knows(self, host: str, port: int | None, dialect: str, flag: str, value: bool) -> bool:
        return (flag, value) in self.flags(host, port, dialect)

    def learn(self, quirk: Quirk) -> bool:
        """Remember ``quirk``; False (and no write) when the same value is already known and unexpired."""
        with self._lock:
            if self.knows(quirk.host, quirk.port, quirk.dialect, quirk.flag, quirk.value):
                return False
            self._put(quirk)
        if self.store is not None:
            self.store.learn(quirk)
        return True

    def unlearn(self, host: str, port: int | None, dialect: str, flag: str) -> None:
        """Drop one learned flag (a resend it shaped was rejected the same way: it did not help)."""
        key = self.key(host, port, dialect)
        with self._lock:
            kept = tuple(q for q in self._by_upstream.get(key, ()) if q.flag != flag)
            self._by_upstream[key] = kept
        if self.store is not None:  # the QuirkStore forgets by host: put back the host's other quirks
            self.store.forget(host)
            for k, qs in list(self._by_upstream.items()):
                for q in qs if k[0] == key[0] else ():
                    self.store.learn(q)

    def quirks(self) -> list[Quirk]:
        cutoff = self._clock() - self.max_age_s
        every = [q for qs in list(self._by_upstream.values()) for q in qs if q.learned_at >= cutoff]
        return sorted(every, key=lambda q: q.learned_at)

    def forget(self, host: str | None = None) -> int:
        """Forget the quirks of ``host`` (every host when None); how many were forgotten."""
        with self._lock:
            gone = [k for k in self._by_upstream if host is None or k[0] == host.lower()]
            n = sum(len(self._by_upstream.pop(k)) for k in gone)
        if self.store is not None:
            n = max(n, self.store.forget(host))
        return n

    def close(self) -> None:
        close = getattr(self.store, "close", None)
        if close is not None:
            close()

    def _sync(self) -> None:
        """Replace the view with the shared store's quirks, keeping what was learned here a moment ago."""
        assert self.store is not None
        now = self._clock()
        self._synced = now
        try:
            stored = self.store.quirks()
        except Exception as e:  # a backend's contract is not to raise; if one does, keep the view we have
            logger.warning("llmfix: cannot read the shared learned quirks: %s: %s", type(e).__name__, e)
            return
        with self._lock:
            recent = [q for qs in self._by_upstream.values() for q in qs if now - q.learned_at < KEEP_LOCAL_S]
            self._by_upstream = {}
            for q in stored:
                self._put(q)
            for q in recent:
                if not self.knows(q.host, q.port, q.dialect, q.flag, q.value):
                    self._put(q)

    def _put(self, quirk: Quirk) -> None:
        key = self.key(quirk.host, quirk.port, quirk.dialect)
        others = tuple(q for q in self._by_upstream.get(key, ()) if q.flag != quirk.flag)
        self._by_upstream[key] = (*others, quirk)
