"""The in-flight tool-result media of restore-tool-media, in a Redis shared by a fleet of llmfix instances.

Why: a gateway's leg to its upstream may pass through another llmfix instance than its client's leg
(a load balancer in front of the fleet). The client leg's instance writes what each tool result carried
before forwarding the request; the gateway leg's instance reads it, so the image the gateway dropped (as
axonhub did before its fix, see restore-tool-media) comes back whichever instance each leg reached. Same rules as
the in-process :class:`~llmfix.memory.media_window.MediaWindow`: per call id only the latest observation, from
another request, while that request is in flight or ended at most ``window_s`` ago.

Layout: ``llmfix:media:<call id>`` → a hash ``{flow, token, data}`` (``data`` = JSON of the tool result:
its pieces, data URLs included, and the media after it in the same request); ``llmfix:media-ids``, the set
of those call ids, so a request with 60 tool results asks Redis once which may be held, not 60 times
(members whose hash expired are dropped when met and swept every minute). The correlation window is
enforced by Redis itself: an observation expires ``MAX_IN_FLIGHT_S`` after it was written (a request that
never reports its end), and when its request ends the instance that wrote it shortens that to ``window_s``
(deleted at once for the default ``0s``) — only if the hash is still that request's (a later request's
observation is never cut short). Held no longer than that; never a header, never a key.

Bounds: one request writes at most ``MAX_OBSERVE_BYTES`` (further results are not shared, with a warning).
Timing: ``observe`` runs in the request's worker thread and returns once Redis has the media, so they are
there before the request is forwarded; ``finish`` is handed to the link's thread (visible within
milliseconds). ``correlated`` reads two small fields first and fetches the media only when its local copy
of that observation (by token) is missing.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from typing import Any

import orjson
import redis
from pydantic import ValidationError

from llmfix.dialects.registry import named
from llmfix.memory.media_window import MAX_IN_FLIGHT_S, Seen
from llmfix.memory.redis_link import RedisLink
from llmfix.wire import toolresults
from llmfix.wire.toolresults import Piece, Result

logger = logging.getLogger(__name__)

MEDIA = b"llmfix:media:"
IDS = b"llmfix:media-ids"
"""A set of the call ids observed (an index: one read tells a request which of its results may be held)."""
SNAPSHOT_S = 1.0
FRESH_S = 0.25
"""worth_keeping reuses the index its own request's restore read at most this long ago (same thread)."""
SWEEP_S = 60.0
_SNAPSHOTS = 256
MAX_OBSERVE_BYTES = 32 << 20
MAX_CALL_ID_CHARS = 512
_CACHE = 64
_MAX_FLOWS = 10_000

_FINISH = """
if redis.call('HGET', KEYS[1], 'flow') == ARGV[1] then
  if tonumber(ARGV[2]) <= 0 then
    redis.call('SREM', KEYS[2], ARGV[3])
    return redis.call('DEL', KEYS[1])
  end
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_UNLIST = """
if redis.call('EXISTS', KEYS[2]) == 0 then return redis.call('SREM', KEYS[1], ARGV[1]) end
return 0
"""
_SWEEP = """
local n = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1] .. id) == 0 then
    redis.call('SREM', KEYS[1], id)
    n = n + 1
  end
end
return n
"""


def media_key(call_id: str) -> bytes:
    return MEDIA + call_id.encode()


class RedisMediaStore:
    """A :class:`~llmfix.memory.store.MediaStore` over Redis; see the module docstring."""

    def __init__(self, link: RedisLink, window_s: float = 0.0) -> None:
        self.link = link
        self.window_s = window_s
        self._finish = link.client.register_script(_FINISH)
        self._unlist = link.client.register_script(_UNLIST)
        self._sweep = link.client.register_script(_SWEEP)
        self._lock = threading.Lock()
        self._snapshots: dict[str, tuple[float, frozenset[bytes]]] = {}
        self._thread = threading.local()  # the index as this thread's request read it (engine: restore → observe)
        self._last_sweep = time.monotonic()
        link.every_probe(self._periodic)
        self._mine: dict[str, list[str]] = {}  # flows observed here → the call ids they wrote
        self._decoded: OrderedDict[tuple[str, bytes], Result] = OrderedDict()

    def __bool__(self) -> bool:
        """Always true: the fleet may hold observations. Asking costs a round trip, so the first
        :meth:`correlated` of a request reads the index once instead."""
        return True

    def knows(self, call_id: str | None) -> bool:
        """Whether an observation of ``call_id`` *may* be held: asking Redis once per tool result of a long
        history cost 60 round trips on a 200 KB Codex request, so every result is a candidate here and
        :meth:`worth_keeping` decides for all of them at once (from the index this request read already,
        or with one ``SMISMEMBER``)."""
        return bool(call_id) and len(call_id) <= MAX_CALL_ID_CHARS

    def held(self, call_id: str) -> bool:
        """Whether Redis holds an observation of ``call_id`` now (one round trip)."""
        return bool(self.link.call(lambda r: r.exists(media_key(call_id)), 0))

    def held_among(self, ids: Any, flow_id: str) -> list[str]:
        """The members of ``ids`` (an :class:`llmfix.idset.Ids`) the fleet's index lists, from the index this
        request reads once anyway (see :meth:`correlated`)."""
        live = self._live_ids(flow_id)
        return ids.common({c.decode(errors="replace") for c in live}) if live else []

    def worth_keeping(self, results: list[Result]) -> list[Result]:
        results = [r for r in results if len(r.call_id) <= MAX_CALL_ID_CHARS]
        ask = [r.call_id for r in results if not r.media]
        held: set[str] = set()
        if ask:  # an id whose observation just expired only costs a small write
            snapshot = getattr(self._thread, "snapshot", None)
            if snapshot is not None and time.monotonic() - snapshot[0] <= FRESH_S:
                held = {c for c in ask if c.encode() in snapshot[1]}  # read by this request's restore a moment ago
            else:
                flags = self.link.call(lambda r: r.smismember(IDS, ask), [])
                held = {c for c, n in zip(ask, flags, strict=False) if n}
        self._thread.snapshot = None
        return [r for r in results if r.media or r.call_id in held]

    def observe(self, flow_id: str, results: list[Result]) -> None:
        rows: list[tuple[str, bytes]] = []
        total = 0
        skipped = 0
        for result in results:
            data = _encode(result)
            if total + len(data) > MAX_OBSERVE_BYTES:
                skipped += 1
                continue
            total += len(data)
            rows.append((result.call_id, data))
        if skipped:
            logger.warning("llmfix memory %s: flow %s: %d tool result(s) not shared: one request may write at "
                           "most %d bytes of media", self.link.name, flow_id[:8], skipped, MAX_OBSERVE_BYTES)
        if not rows:
            return
        token = os.urandom(8).hex()
        ttl_ms = int(MAX_IN_FLIGHT_S * 1000)
        with self._lock:
            self._snapshots.pop(flow_id, None)

        def write(r: redis.Redis) -> bool:
            pipe = r.pipeline(transaction=True)
            for call_id, data in rows:
                key = media_key(call_id)
                pipe.hset(key, mapping={b"flow": flow_id, b"token": token, b"data": data})
                pipe.pexpire(key, ttl_ms)
            pipe.sadd(IDS, *[c for c, _ in rows])
            pipe.pexpire(IDS, ttl_ms)
            pipe.execute()
            return True

        if self.link.call(write, False):
            with self._lock:
                if len(self._mine) >= _MAX_FLOWS:
                    self._mine.pop(next(iter(self._mine)))
                self._mine.setdefault(flow_id, []).extend(c for c, _ in rows)

    def _live_ids(self, flow_id: str) -> frozenset[bytes]:
        """The call ids the fleet holds observations of, read once per request (``flow_id``): restore-tool-media
        asks about every tool result of a request, and most have none."""
        now = time.monotonic()
        with self._lock:
            got = self._snapshots.get(flow_id)
            if got is not None and now - got[0] <= SNAPSHOT_S:
                return got[1]
        ids = frozenset(self.link.call(lambda r: r.smembers(IDS), set()))
        self._thread.snapshot = (now, ids)
        with self._lock:
            self._snapshots[flow_id] = (now, ids)
            while len(self._snapshots) > _SNAPSHOTS:
                self._snapshots.pop(next(iter(self._snapshots)))
        return ids

    def sweep(self) -> int:
        """Drop ids from the index whose observation has expired (the link's thread, every ``SWEEP_S``)."""
        return int(self.link.call(lambda r: self._sweep(keys=[IDS], args=[MEDIA], client=r), 0) or 0)

    def _periodic(self) -> None:
        now = time.monotonic()
        if now - self._last_sweep >= SWEEP_S:
            self._last_sweep = now
            self.sweep()

    def finish(self, flow_id: str) -> None:
        with self._lock:
            self._snapshots.pop(flow_id, None)
            call_ids = self._mine.pop(flow_id, None)
        if not call_ids:
            return
        window_ms = str(int(self.window_s * 1000))

        def expire(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=False)
            for call_id in dict.fromkeys(call_ids):
                self._finish(keys=[media_key(call_id), IDS], args=[flow_id, window_ms, call_id], client=pipe)
            pipe.execute()

        self.link.submit(expire)

    def correlated(self, call_id: str, flow_id: str) -> Seen | None:
        if not call_id or len(call_id) > MAX_CALL_ID_CHARS:
            return None
        if call_id.encode() not in self._live_ids(flow_id):
            return None
        key = media_key(call_id)
        owner, token = self.link.call(lambda r: r.hmget(key, [b"flow", b"token"]), [None, None])
        if owner is None or token is None:
            self.link.submit(lambda r: self._unlist(keys=[IDS, key], args=[call_id], client=r))
            return None
        if owner.decode(errors="replace") == flow_id:
            return None
        with self._lock:
            result = self._decoded.get((call_id, token))
        if result is None:
            data = self.link.call(lambda r: r.hget(key, b"data"), None)
            result = _decode(data) if data is not None else None
            if result is None or result.call_id != call_id:
                return None
            with self._lock:
                self._decoded[(call_id, token)] = result
                while len(self._decoded) > _CACHE:
                    self._decoded.popitem(last=False)
        return Seen(owner.decode(errors="replace"), result, time.monotonic())


def _wire(part: Any) -> Any:
    return part.to_wire() if hasattr(part, "to_wire") else None


def _encode(result: Result) -> bytes:
    return orjson.dumps({
        "call_id": result.call_id,
        "index": result.index,
        "pieces": [[str(p.dialect), _wire(p.raw)] if p.dialect is not None and p.raw is not None
                   else [None, [p.kind, p.text, p.url, p.detail]] for p in result.pieces],  # each payload once
        "later": [_wire(p) for p in result.later],
        "later_dialect": str(result.dialect) if result.later and result.dialect is not None else None,
    })


def _decode(data: bytes) -> Result | None:
    """The tool result written by :func:`_encode`; None for anything else (a foreign or damaged value)."""
    try:
        obj = orjson.loads(data)
        pieces = []
        for dialect, raw in obj["pieces"]:
            if dialect is None:
                kind, text, url, detail = raw
                pieces.append(Piece(kind, text=text, url=url, detail=detail))
            else:  # a part as toolresults itself reads it (kind, URL, detail): each payload stored only once
                d = named(dialect)
                pieces.append(toolresults.piece(d, d.media.part.validate_python(raw)))
        later_dialect = named(obj["later_dialect"]) if obj.get("later_dialect") else None
        later: tuple[Any, ...] = ()
        if later_dialect is not None and obj["later"]:
            later = tuple(later_dialect.media.part.validate_python(p) for p in obj["later"])
        return Result(str(obj["call_id"]), int(obj["index"]), tuple(pieces), later, later_dialect)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, ValidationError):
        return None
