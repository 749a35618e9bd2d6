"""What each tool result carried in the requests llmfix saw most recently, while those requests matter.

restore-tool-media may only put back media that a *correlated* request carried: one still in flight
(a gateway's upstream request happens while its client's request is open), or finished within a short
window. The store keeps, per call id, the latest observation only — so a client that sent a call's
result without its image (dropping old images on purpose) overrides what an earlier turn carried, and
nothing comes back. Held in process memory only, bounded in time and size; never written to disk.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmfix.wire.toolresults import Result

MAX_IN_FLIGHT_S = 600.0
"""An observation whose request never reports its end is dropped after this long."""
MAX_ENTRIES = 10_000


@dataclass(frozen=True, slots=True)
class Seen:
    flow_id: str
    result: Result
    at: float


class MediaWindow:
    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self._latest: dict[str, Seen] = {}
        self._ended: dict[str, float | None] = {}  # flows that made an observation → when they ended
        self._lock = threading.Lock()
        self._since_prune = 0
        self._last_prune = clock()

    def __bool__(self) -> bool:
        return bool(self._latest)

    def knows(self, call_id: str | None) -> bool:
        """Whether some request's observation of ``call_id`` is held (cheap; no liveness check)."""
        return call_id in self._latest

    def held_among(self, ids: Any, flow_id: str) -> list[str]:
        """The members of ``ids`` (an :class:`llmfix.idset.Ids`) this window holds an observation of (cheap:
        whichever side is smaller is walked; no liveness check)."""
        if not self._latest:
            return []
        with self._lock:  # another flow's observe may grow the dict meanwhile
            return ids.common(self._latest.keys())

    def worth_keeping(self, results: list[Result]) -> list[Result]:
        """What of a request's tool results to observe: those with media (what a restore needs), and those
        overriding an observation held now (a client that dropped a call's media must win). Text-only
        results of calls nobody holds change nothing, and recording them would cost every request."""
        return [r for r in results if r.media or r.call_id in self._latest]

    def observe(self, flow_id: str, results: list[Result]) -> None:
        """Record what a request carries for each call id (after llmfix's own repairs)."""
        now = self._clock()
        with self._lock:
            for r in results:
                self._latest[r.call_id] = Seen(flow_id, r, now)
            if results:
                self._ended.setdefault(flow_id, None)
            self._since_prune += 1
            if self._since_prune >= 256 or len(self._latest) > MAX_ENTRIES:
                self._prune(now)

    def finish(self, flow_id: str) -> None:
        """The request ``flow_id`` has ended (answered or failed)."""
        with self._lock:
            if flow_id in self._ended:
                now = self._clock()
                self._ended[flow_id] = now
                if now - self._last_prune >= self.window_s:  # its media may be held only window_s longer
                    self._prune(now)

    def correlated(self, call_id: str, flow_id: str) -> Seen | None:
        """The latest observation of ``call_id`` from another request that is in flight or just ended."""
        now = self._clock()
        with self._lock:
            seen = self._latest.get(call_id)
            if seen is None or seen.flow_id == flow_id or not self._live(seen, now):
                return None
            return seen

    def _live(self, seen: Seen, now: float) -> bool:
        ended = self._ended.get(seen.flow_id)
        if ended is None:
            return now - seen.at <= MAX_IN_FLIGHT_S
        return now - ended <= self.window_s

    def _prune(self, now: float) -> None:
        self._since_prune = 0
        self._last_prune = now
        self._latest = {k: s for k, s in self._latest.items() if self._live(s, now)}
        while len(self._latest) > MAX_ENTRIES:
            self._latest.pop(next(iter(self._latest)))
        flows = {s.flow_id for s in self._latest.values()}
        self._ended = {f: t for f, t in self._ended.items() if f in flows}
