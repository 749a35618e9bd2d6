"""One shared Redis for a fleet of llmfix instances: the connection, its health, and a writer off the hot path.

Every Redis-backed store (:mod:`llmfix.memory.redis_store`, :mod:`llmfix.memory.redis_media`) talks to
Redis through one :class:`RedisLink`, which keeps three promises:

- **Bounded.** Every command has a socket timeout (``llmfix_memory_timeout``, a few seconds at most) and
  no retries: the request that waits for Redis waits at most that long. Stores call Redis only from
  worker threads (the proxy runs the engine off the event loop when memory is shared) or through
  :meth:`RedisLink.submit`, whose jobs run on the link's own thread; never on mitmproxy's event loop.
- **Fail open.** A Redis error never reaches the caller: :meth:`RedisLink.call` returns the caller's
  default. The first failure logs ONE warning ("unreachable … continuing without shared memory") and
  marks the link down; while it is down, calls return their default at once (no request pays a timeout)
  and the link's thread pings Redis every ``PROBE_S`` seconds. The first successful ping logs ONE
  warning ("back") and sharing resumes, without a restart.
- **No secrets.** The URL's password (and its query, which may carry one) never appears in a log line:
  :func:`redacted` is the only form ever printed. Keys live under :data:`PREFIX`.

Jobs given to :meth:`submit` while Redis is down are dropped (they were memory, not traffic); the queue is
bounded by ``QUEUE_MAX``.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import re
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from llmfix import events
from llmfix.memory.store import MemoryStoreError

logger = logging.getLogger(__name__)

PREFIX = b"llmfix:"
SCHEMES = ("redis", "rediss")
PROBE_S = 1.0
"""While Redis is down, the link tries a PING this often."""
QUEUE_MAX = 10_000
MAX_TIMEOUT_S = 10.0

_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
"""``scheme:`` of at least two letters (a Windows drive letter ``C:`` is a path)."""


def is_url(location: str) -> bool:
    """Whether ``llmfix_memory`` names a URL (any scheme) rather than a file path."""
    return bool(_URL_LIKE.match(location))


def redacted(url: str) -> str:
    """``url`` as it may be logged: no password, no query string."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unparsable Redis URL>"
    user = "***@" if parts.username or parts.password else ""  # a user name is not printed either
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"


def check_url(url: str) -> None:
    """Raise :class:`MemoryStoreError` unless ``url`` is a usable Redis URL (checked without connecting)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a bad port
    except ValueError as e:
        raise MemoryStoreError(f"{redacted(url)} is not a valid URL: {e}") from None
    if parts.scheme.lower() not in SCHEMES:
        raise MemoryStoreError(
            f"{parts.scheme}: URLs are not supported; use redis://HOST:PORT/DB or rediss://… for a shared "
            "memory, or a file path (write ./NAME for a file whose name contains ':')"
        )
    if not parts.hostname:
        raise MemoryStoreError(f"{redacted(url)} names no host; use redis://HOST:PORT/DB")
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise MemoryStoreError(f"{redacted(url)}: the database must be a number, as in redis://HOST:PORT/0")


class RedisLink:
    """A Redis client with a health state and a writer thread; see the module docstring."""

    def __init__(self, url: str, *, timeout_s: float = 2.0, probe_s: float = PROBE_S) -> None:
        check_url(url)
        if not 0 < timeout_s <= MAX_TIMEOUT_S:
            raise MemoryStoreError(f"the Redis timeout must be more than 0 and at most {MAX_TIMEOUT_S:g} s")
        self.url = url
        self.name = redacted(url)
        self.timeout_s = timeout_s
        self.probe_s = probe_s
        try:
            self.client = redis.Redis.from_url(
                url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, retry=Retry(NoBackoff(), 0),
                retry_on_timeout=False, health_check_interval=0, client_name="llmfix",
            )
        except (ValueError, redis.RedisError) as e:
            raise MemoryStoreError(f"cannot use {self.name}: {type(e).__name__}") from None
        self._state_lock = threading.Lock()
        self._up: bool | None = None  # None: not known yet (nothing said so far)
        self.generation = 0
        """How often Redis came back: what it held before may be gone (a restart), so write it again."""
        self._jobs: queue.Queue[Callable[[redis.Redis], object] | None] = queue.Queue(QUEUE_MAX)
        self._periodic: list[Callable[[], None]] = []
        self._full_warned = False
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="llmfix-redis", daemon=True)
        self._thread.start()

    # -- for the stores ------------------------------------------------------------------------

    @property
    def up(self) -> bool:
        return self._up is not False

    def call[T](self, fn: Callable[[redis.Redis], T], default: T) -> T:
        """``fn(client)``, or ``default`` at once while Redis is down or when ``fn`` fails. Never raises
        a Redis error. Blocks up to the timeout: never call it on the event loop."""
        if self._up is False or self._closed.is_set():
            events.memory_skipped("redis", self._up)
            return default
        try:
            result = fn(self.client)
        except redis.RedisError as e:
            self._went_down(e)
            events.memory_failed("redis", isinstance(e, redis.TimeoutError))
            return default
        self._came_up()
        return result

    def submit(self, job: Callable[[redis.Redis], object]) -> bool:
        """Run ``job(client)`` on the link's thread, soon and in order; False when it was dropped."""
        if self._up is False or self._closed.is_set():
            events.memory_skipped("redis", self._up)
            return False
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            if not self._full_warned:
                self._full_warned = True
                logger.warning("llmfix memory %s: too many writes waiting; dropping some", self.name)
            return False
        return True

    def every_probe(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` on the link's thread about every ``probe_s`` while Redis is up (a cache refresh)."""
        self._periodic.append(fn)

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until the jobs submitted so far have run (tests, close); False on timeout."""
        done = threading.Event()
        if not self.submit(lambda _r: done.set()):
            return self._jobs.empty()
        return done.wait(timeout_s)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self.flush(min(self.timeout_s * 2, 5.0))
        self._closed.set()
        with contextlib.suppress(queue.Full):
            self._jobs.put_nowait(None)
        self._thread.join(self.timeout_s + 1.0)
        with contextlib.suppress(redis.RedisError):
            self.client.close()

    # -- health --------------------------------------------------------------------------------

    def _went_down(self, e: BaseException) -> None:
        with self._state_lock:
            was, self._up = self._up, False
            events.memory_state("redis", False)  # under the lock: observers see the transitions in order
        if was is not False:
            logger.warning("llmfix memory %s: Redis is unreachable (%s); continuing without shared memory, "
                           "retrying every %g s", self.name, _reason(e), self.probe_s)

    def _came_up(self) -> None:
        if self._up is True:
            return
        with self._state_lock:  # said before it is up: whoever sees ``up`` also finds the line in the log
            was = self._up
            events.memory_state("redis", True)  # before the line: whoever reads the line finds the state
            if was is False:
                self.generation += 1
                logger.warning("llmfix memory %s: Redis is back; sharing memory again", self.name)
            elif was is None:
                logger.info("llmfix memory: shared through %s", self.name)
            self._up = True

    def _run(self) -> None:
        next_probe = 0.0
        while not self._closed.is_set():
            now = time.monotonic()
            if now >= next_probe:
                next_probe = now + self.probe_s
                if self._up is not True:
                    self.call_probe()
                if self._up is True:
                    for fn in self._periodic:
                        try:
                            fn()
                        except Exception as e:  # a refresh must never end the thread
                            logger.warning("llmfix memory %s: refresh failed: %s", self.name, e)
            try:
                job = self._jobs.get(timeout=max(next_probe - time.monotonic(), 0.01))
            except queue.Empty:
                continue
            if job is None:
                break
            if self._up is False:
                continue  # dropped: Redis went away after it was queued
            self.call(job, None)

    def call_probe(self) -> None:
        """One PING, marking the link up or down (what the link's thread does while Redis is down)."""
        try:
            self.client.ping()
        except redis.RedisError as e:
            self._went_down(e)
            return
        self._came_up()


def _reason(e: BaseException) -> str:
    """A short reason for a Redis error, without its arguments (they could carry a key or a URL)."""
    if isinstance(e, redis.AuthenticationError):
        return "authentication failed"
    if isinstance(e, redis.TimeoutError):
        return "timed out"
    if isinstance(e, redis.ConnectionError):
        return "connection failed"
    if isinstance(e, redis.ResponseError):
        first = str(e).split(" ", 1)[0]
        return f"error reply {first}" if first.isupper() else "error reply"
    return type(e).__name__
