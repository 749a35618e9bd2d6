"""Tool calls, reasoning records and learned quirks in a Redis shared by a fleet of llmfix instances.

Why: behind a load balancer, Droid's turn 1 may stream through instance A and its broken turn 2 reach
instance B; untangle-tool-run on B can give the trimmed declarations back only if A's memory is B's
too. Same for an upstream quirk one instance learned from a rejection (``QuirkStore``).

Layout (every key under ``llmfix:``, nothing else written):

- ``llmfix:call:<call id>`` → JSON ``[name, arguments, dialect, kind]``, expiring after ``max_age_s``
  (``llmfix_memory_max_age``); re-seen calls refresh it. Redis enforces the age bound; the count bound
  ``llmfix_memory_max_entries`` is the SQLite store's — size a shared Redis with ``maxmemory`` and an
  eviction policy (``volatile-ttl``) instead.
- ``llmfix:reasoning:<kind>:<key>`` → JSON ``[value, upstream]`` of a :class:`Reasoning` record, expiring after
  ``max_age_s`` like a call (same bounds as the SQLite store's, ``sqlite_reasoning.storable``).
- ``llmfix:quirks`` → a hash, field ``host|port|dialect|flag`` → JSON of the :class:`Quirk`; the hash
  expires ``max_age_s`` after the last quirk learned, and a quirk older than that is invisible (Redis 7.0
  has no per-field expiry).

Bounds: a call id longer than ``MAX_CALL_ID_CHARS`` or arguments longer than ``MAX_ARGUMENTS_CHARS`` are
not stored, and one ``remember`` writes at most ``MAX_REMEMBER_BYTES`` (the rest is skipped, with a warning).
Nothing from a header is ever written: calls and quirks hold only what the model issued and a redacted
excerpt of an error text.

Timing: writes go through :meth:`RedisLink.submit` (the link's thread, in order, within milliseconds), so a
streamed answer that declares calls costs the event loop nothing. Lookups run in the caller's worker thread.
Quirks are read from a local copy refreshed every second by the link's thread, so ``quirks()`` never waits.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson
import redis

from llmfix.memory.redis_link import RedisLink
from llmfix.memory.sqlite import MAX_ARGUMENTS_CHARS
from llmfix.memory.sqlite_reasoning import storable
from llmfix.memory.store import Quirk, Reasoning, ToolCall

logger = logging.getLogger(__name__)

CALL = b"llmfix:call:"
QUIRKS = b"llmfix:quirks"
REASONING = b"llmfix:reasoning:"
MAX_CALL_ID_CHARS = 512
MAX_REMEMBER_BYTES = 4 << 20
_MGET_CHUNK = 500


def set_all(link: RedisLink, rows: list[tuple[bytes, bytes]], age: int) -> int:
    """Write ``rows`` (key, value), each expiring after ``age`` seconds, through the link's thread; how many."""
    if not rows:
        return 0

    def write(r: redis.Redis) -> None:
        pipe = r.pipeline(transaction=False)
        for key, value in rows:
            pipe.set(key, value, ex=age)
        pipe.execute()

    return len(rows) if link.submit(write) else 0


def call_key(call_id: str) -> bytes:
    return CALL + call_id.encode()


class RedisCallStore:
    """A :class:`~llmfix.memory.store.CallStore` over Redis; closing it closes the link."""

    def __init__(self, link: RedisLink, *, max_age_s: int) -> None:
        self.link = link
        self.max_age_s = max(int(max_age_s), 1)

    @property
    def generation(self) -> int:
        """Changes when Redis came back after an outage (:class:`~llmfix.memory.recall.Recall` then forgets
        which calls it wrote lately, so a restarted, empty Redis learns them again)."""
        return self.link.generation

    def remember(self, calls: Iterable[ToolCall]) -> int:
        rows: list[tuple[bytes, bytes]] = []
        total = skipped = 0
        for c in calls:
            if not c.call_id or len(c.call_id) > MAX_CALL_ID_CHARS or len(c.arguments) > MAX_ARGUMENTS_CHARS:
                continue
            value = orjson.dumps([c.name, c.arguments, c.dialect, c.kind])
            if total + len(value) > MAX_REMEMBER_BYTES:
                skipped += 1
                continue
            total += len(value)
            rows.append((call_key(c.call_id), value))
        if skipped:
            logger.warning("llmfix memory %s: %d tool call(s) not shared: one request may write at most %d bytes",
                           self.link.name, skipped, MAX_REMEMBER_BYTES)
        return set_all(self.link, rows, self.max_age_s)

    def lookup(self, call_ids: Iterable[str]) -> dict[str, ToolCall]:
        ids = list(dict.fromkeys(i for i in call_ids if isinstance(i, str) and i and len(i) <= MAX_CALL_ID_CHARS))
        if not ids:
            return {}

        def read(r: redis.Redis) -> list[Any]:
            values: list[Any] = []
            for start in range(0, len(ids), _MGET_CHUNK):
                values += r.mget([call_key(i) for i in ids[start:start + _MGET_CHUNK]])
            return values

        found: dict[str, ToolCall] = {}
        for call_id, value in zip(ids, self.link.call(read, []), strict=False):
            call = _call(call_id, value)
            if call is not None:
                found[call_id] = call
        return found

    def close(self) -> None:
        self.link.close()


def _call(call_id: str, value: bytes | None) -> ToolCall | None:
    """The call stored under ``call_id``; None for a missing or foreign value (another writer's, a bad one)."""
    if value is None:
        return None
    try:
        name, arguments, dialect, kind = orjson.loads(value)
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return None
    if not all(isinstance(v, str) for v in (name, arguments, dialect, kind)):
        return None
    return ToolCall(call_id, name, arguments, dialect, kind)


def reasoning_key(kind: str, key: str) -> bytes:
    return REASONING + kind.encode() + b":" + key.encode()


class RedisReasoningStore:
    """A :class:`~llmfix.memory.store.ReasoningStore` over Redis: writes through the link's thread (a streamed
    answer costs the event loop nothing), reads in the caller's worker thread. The link is closed by the call
    store."""

    def __init__(self, link: RedisLink, *, max_age_s: int) -> None:
        self.link = link
        self.max_age_s = max(int(max_age_s), 1)

    def note(self, records: Iterable[Reasoning]) -> int:
        rows: list[tuple[bytes, bytes]] = []
        total = 0
        for r in records:
            if not storable(r):
                continue
            value = orjson.dumps([r.value, r.upstream])
            if total + len(value) > MAX_REMEMBER_BYTES:
                logger.warning("llmfix memory %s: reasoning record(s) not shared: one answer may write at most %d "
                               "bytes", self.link.name, MAX_REMEMBER_BYTES)
                break
            total += len(value)
            rows.append((reasoning_key(r.kind, r.key), value))
        return set_all(self.link, rows, self.max_age_s)

    def recall(self, kind: str, keys: Iterable[str]) -> dict[str, Reasoning]:
        wanted = list(dict.fromkeys(k for k in keys if isinstance(k, str) and k))
        if not wanted:
            return {}

        def read(r: redis.Redis) -> list[Any]:
            values: list[Any] = []
            for start in range(0, len(wanted), _MGET_CHUNK):
                values += r.mget([reasoning_key(kind, k) for k in wanted[start:start + _MGET_CHUNK]])
            return values

        found: dict[str, Reasoning] = {}
        for key, raw in zip(wanted, self.link.call(read, []), strict=False):
            if raw is None:
                continue
            try:
                value, upstream = orjson.loads(raw)
            except (orjson.JSONDecodeError, TypeError, ValueError):
                continue
            if isinstance(value, str) and isinstance(upstream, str):
                found[key] = Reasoning(kind, key, value, upstream)
        return found

    def close(self) -> None:
        """Nothing of its own to close: the link is the call store's."""


def _field(host: str, port: int, dialect: str, flag: str) -> bytes:
    return f"{host}|{port}|{dialect}|{flag}".encode()


class RedisQuirkStore:
    """A :class:`~llmfix.memory.store.QuirkStore` over Redis, shared by every instance naming the same Redis.

    ``learn`` writes through the link's thread and updates the local copy at once; ``quirks`` reads the
    local copy (refreshed every ``PROBE_S`` by the link's thread, or by :meth:`refresh`); ``forget`` is a
    command: it waits for Redis (bounded by the timeout)."""

    def __init__(self, link: RedisLink, *, max_age_s: int, clock: Callable[[], float] = time.time) -> None:
        self.link = link
        self.max_age_s = max(int(max_age_s), 1)
        self._clock = clock
        self._lock = threading.Lock()
        self._known: dict[bytes, Quirk] = {}
        link.every_probe(self.refresh)

    def learn(self, quirk: Quirk) -> None:
        field = _field(quirk.host, quirk.port, quirk.dialect, quirk.flag)
        value = orjson.dumps([quirk.host, quirk.port, quirk.dialect, quirk.flag, quirk.value, quirk.reason,
                              quirk.learned_at])
        with self._lock:
            self._known[field] = quirk
        age = self.max_age_s

        def write(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=True)
            pipe.hset(QUIRKS, field, value)
            pipe.expire(QUIRKS, age)
            pipe.execute()

        self.link.submit(write)

    def quirks(self) -> list[Quirk]:
        cutoff = self._clock() - self.max_age_s
        with self._lock:
            fresh = [q for q in self._known.values() if q.learned_at >= cutoff]
        return sorted(fresh, key=lambda q: q.learned_at)

    def refresh(self) -> bool:
        """Replace the local copy with what Redis holds now; False (copy kept) when Redis cannot answer."""
        stored = self.link.call(lambda r: r.hgetall(QUIRKS), None)
        if stored is None:
            return False
        known = {f: q for f, v in stored.items() if (q := _quirk(v)) is not None}
        with self._lock:
            self._known = known
        return True

    def forget(self, host: str | None = None) -> int:
        cutoff = self._clock() - self.max_age_s

        def drop(r: redis.Redis) -> int:
            stored = r.hgetall(QUIRKS)
            gone = [f for f, v in stored.items()
                    if host is None or ((q := _quirk(v)) is not None and q.host == host)]
            if gone:
                r.hdel(QUIRKS, *gone)
            return len([f for f in gone if (q := _quirk(stored[f])) is not None and q.learned_at >= cutoff])

        with self._lock:
            local = [f for f, q in self._known.items() if host is None or q.host == host]
            for f in local:
                del self._known[f]
        return self.link.call(drop, len(local))


def _quirk(value: bytes) -> Quirk | None:
    try:
        host, port, dialect, flag, flag_value, reason, learned_at = orjson.loads(value)
        quirk = Quirk(str(host), int(port), str(dialect), str(flag), bool(flag_value), str(reason), float(learned_at))
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return None
    return quirk
