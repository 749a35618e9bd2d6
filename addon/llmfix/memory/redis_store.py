"""Tool calls, reasoning records and learned quirks in a Redis shared by a fleet of llmfix instances.

Why: behind a load balancer, Droid's turn 1 may stream through instance A and its broken turn 2 reach
instance B; untangle-tool-run on B can give the trimmed declarations back only if A's memory is B's
too. Same for an upstream quirk one instance learned from a rejection (``QuirkStore``).

Layout (every key under ``llmfix:``, nothing else written):

- ``llmfix:call:<call id>`` → the call's :func:`~llmfix.memory.fingerprint.declaration` (32 hex digits) then
  JSON ``[name, arguments, dialect, kind]``, expiring after ``max_age_s`` (``llmfix_memory_max_age``); re-seen
  calls refresh it. An id written with another declaration becomes :data:`AMBIGUOUS` and stays so while it is
  written again (a small Lua script compares and sets, atomically for the whole fleet); an older value, plain
  JSON, is replaced. Redis enforces the age bound; the count bound ``llmfix_memory_max_entries`` is the SQLite
  store's — size a shared Redis with ``maxmemory`` and an eviction policy (``volatile-ttl``) instead.
- ``llmfix:reasoning-key:<kind>:<key>`` → the SHA-256 of the :class:`Reasoning` record's value (hex), a space and
  its upstream; ``llmfix:reasoning-value:<sha256>`` → the value itself, once however many keys map to it. Both
  expire after ``max_age_s`` (a value is refreshed with every key written to it, so it outlives them); same size
  bounds as the SQLite store's (``sqlite_reasoning.storable``). A key of a single-valued kind written with another
  value or upstream becomes :data:`AMBIGUOUS` (the same script), like a call id.
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

from llmfix.memory.fingerprint import declaration, value_digest
from llmfix.memory.redis_link import RedisLink
from llmfix.memory.sqlite import MAX_ARGUMENTS_CHARS
from llmfix.memory.sqlite_reasoning import storable
from llmfix.memory.store import SINGLE_VALUED, Quirk, Reasoning, ToolCall

logger = logging.getLogger(__name__)

CALL = b"llmfix:call:"
QUIRKS = b"llmfix:quirks"
REASONING_KEY = b"llmfix:reasoning-key:"
REASONING_VALUE = b"llmfix:reasoning-value:"
AMBIGUOUS = b"ambiguous"
"""What a call id or a single-valued reasoning key holds once two writers gave it different values."""
MAX_CALL_ID_CHARS = 512
MAX_REMEMBER_BYTES = 4 << 20
_MGET_CHUNK = 500
_DECLARATION = 32  # hex digits of a call's declaration digest, before its JSON

# KEYS: the call keys; ARGV[1]: the age in seconds, ARGV[1 + i]: the value for KEYS[i] (declaration, then JSON).
_WRITE_CALLS = f"""
for i = 1, #KEYS do
  local new = ARGV[1 + i]
  local old = redis.call('GETRANGE', KEYS[i], 0, {_DECLARATION - 1})
  if old ~= '' and string.sub(old, 1, 1) ~= '[' and old ~= string.sub(new, 1, {_DECLARATION}) then
    new = '{AMBIGUOUS.decode()}'
  end
  redis.call('SET', KEYS[i], new, 'EX', ARGV[1])
end
return #KEYS
"""
# KEYS: n reasoning keys, then the value keys; ARGV[1]: the age, ARGV[2]: n, ARGV[1 + 2i]: "1" when KEYS[i] is of a
# single-valued kind, ARGV[2 + 2i]: its digest and upstream; ARGV[2 + 2n + j]: the value for KEYS[n + j].
_WRITE_REASONING = f"""
local n = tonumber(ARGV[2])
for j = 1, #KEYS - n do
  redis.call('SET', KEYS[n + j], ARGV[2 + 2 * n + j], 'EX', ARGV[1])
end
for i = 1, n do
  local mapping = ARGV[2 + 2 * i]
  if ARGV[1 + 2 * i] == '1' then
    local old = redis.call('GET', KEYS[i])
    if old and old ~= mapping then mapping = '{AMBIGUOUS.decode()}' end
  end
  redis.call('SET', KEYS[i], mapping, 'EX', ARGV[1])
end
return n
"""


def run_script(link: RedisLink, source: str, keys: list[bytes], args: list[bytes | int]) -> bool:
    """Run the Lua ``source`` on ``keys`` and ``args`` through the link's thread (EVALSHA, loaded when Redis lacks
    it); False when the write was dropped."""

    return link.submit(lambda r: r.register_script(source)(keys=keys, args=args, client=r))


def call_key(call_id: str) -> bytes:
    return CALL + call_id.encode()


def call_value(c: ToolCall) -> bytes:
    """What ``llmfix:call:<id>`` holds for ``c``: its declaration's digest, then its JSON."""
    return declaration(c.name, c.kind, c.arguments).encode() + orjson.dumps([c.name, c.arguments, c.dialect, c.kind])


def write_calls(r: redis.Redis, rows: list[tuple[bytes, bytes]], age: int) -> None:
    """Write ``rows`` (call key, :func:`call_value`) as the link's thread does: an id held with another declaration
    turns :data:`AMBIGUOUS`."""
    r.register_script(_WRITE_CALLS)(keys=[k for k, _ in rows], args=[age, *(v for _, v in rows)], client=r)


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
            value = call_value(c)
            if total + len(value) > MAX_REMEMBER_BYTES:
                skipped += 1
                continue
            total += len(value)
            rows.append((call_key(c.call_id), value))
        if skipped:
            logger.warning("llmfix memory %s: %d tool call(s) not shared: one request may write at most %d bytes",
                           self.link.name, skipped, MAX_REMEMBER_BYTES)
        if not rows:
            return 0
        age = self.max_age_s
        return len(rows) if self.link.submit(lambda r: write_calls(r, rows, age)) else 0

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
    """The call stored under ``call_id``; None for a missing, ambiguous or foreign value (another writer's, a bad
    one)."""
    if value is None or value == AMBIGUOUS:
        return None
    try:
        name, arguments, dialect, kind = orjson.loads(value if value[:1] == b"[" else value[_DECLARATION:])
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return None
    if not all(isinstance(v, str) for v in (name, arguments, dialect, kind)):
        return None
    return ToolCall(call_id, name, arguments, dialect, kind)


def reasoning_key(kind: str, key: str) -> bytes:
    return REASONING_KEY + kind.encode() + b":" + key.encode()


def value_key(digest: str) -> bytes:
    return REASONING_VALUE + digest.encode()


def _mget(r: redis.Redis, keys: list[bytes]) -> list[Any]:
    values: list[Any] = []
    for start in range(0, len(keys), _MGET_CHUNK):
        values += r.mget(keys[start:start + _MGET_CHUNK])
    return values


class RedisReasoningStore:
    """A :class:`~llmfix.memory.store.ReasoningStore` over Redis: writes through the link's thread (a streamed
    answer costs the event loop nothing), reads in the caller's worker thread. The link is closed by the call
    store."""

    def __init__(self, link: RedisLink, *, max_age_s: int) -> None:
        self.link = link
        self.max_age_s = max(int(max_age_s), 1)

    def note(self, records: Iterable[Reasoning]) -> int:
        mappings: list[tuple[bytes, bytes, bytes]] = []  # (key, "1" if single-valued, digest and upstream)
        values: dict[str, bytes] = {}
        total = 0
        for r in records:
            if not storable(r):
                continue
            digest = value_digest(r.value)
            value = b"" if digest in values else r.value.encode("utf-8", "surrogatepass")
            if total + len(value) > MAX_REMEMBER_BYTES:
                logger.warning("llmfix memory %s: reasoning record(s) not shared: one answer may write at most %d "
                               "bytes", self.link.name, MAX_REMEMBER_BYTES)
                break
            total += len(value)
            values.setdefault(digest, value)
            mappings.append((reasoning_key(r.kind, r.key), b"1" if r.kind in SINGLE_VALUED else b"0",
                             f"{digest} {r.upstream}".encode()))
        if not mappings:
            return 0
        keys = [k for k, _, _ in mappings] + [value_key(d) for d in values]
        args: list[bytes | int] = [self.max_age_s, len(mappings)]
        for _, once, mapping in mappings:
            args += [once, mapping]
        ok = run_script(self.link, _WRITE_REASONING, keys, [*args, *values.values()])
        return len(mappings) if ok else 0

    def recall(self, kind: str, keys: Iterable[str]) -> dict[str, Reasoning]:
        wanted = list(dict.fromkeys(k for k in keys if isinstance(k, str) and k))
        if not wanted:
            return {}

        def read(r: redis.Redis) -> dict[str, Reasoning]:
            mapped: dict[str, tuple[str, str]] = {}
            for key, raw in zip(wanted, _mget(r, [reasoning_key(kind, k) for k in wanted]), strict=True):
                digest, _, upstream = raw.decode("utf-8", "replace").partition(" ") if raw else ("", "", "")
                if len(digest) == 64:  # not missing, not ambiguous
                    mapped[key] = (digest, upstream)
            digests = list(dict.fromkeys(d for d, _ in mapped.values()))
            held = dict(zip(digests, _mget(r, [value_key(d) for d in digests]), strict=True)) if digests else {}
            found: dict[str, Reasoning] = {}
            for key, (d, upstream) in mapped.items():
                value = _text(held.get(d))
                if value is not None and value_digest(value) == d:  # a value evicted or foreign is not this one
                    found[key] = Reasoning(kind, key, value, upstream)
            return found

        return self.link.call(read, {})

    def close(self) -> None:
        """Nothing of its own to close: the link is the call store's."""


def _text(raw: bytes | None) -> str | None:
    try:
        return raw.decode("utf-8", "surrogatepass") if raw is not None else None
    except UnicodeDecodeError:
        return None


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
        self._read_once = False
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
        if not self._read_once:  # once: what the fleet had learned when this instance joined it
            self._read_once = True
            logger.info("llmfix memory: %d learned quirk(s) read from %s", len(known), self.link.name)
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
