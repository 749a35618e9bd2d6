"""Glue between traffic and the tool-call store (a :class:`~llmfix.memory.store.CallStore`): what is written, when.

Every turn of a conversation re-sends its whole history, so the same declared calls pass again and
again; a call written in the last ``REFRESH_S`` seconds is not written again (the store's age bound is
days, not minutes) — unless the store's ``generation`` changed since (a shared Redis that came back
after an outage may have lost them). Safe to use from the event loop and worker threads at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from llmfix.memory.store import CallStore, ToolCall

REFRESH_S = 600.0
MAX_RECENT = 20_000


class Recall:
    def __init__(self, memory: CallStore, clock=time.monotonic) -> None:
        self.memory = memory
        self._clock = clock
        self._recent: dict[str, float] = {}
        self._lock = threading.Lock()
        self._generation = getattr(memory, "generation", 0)  # a shared store that may have lost what it held

    def remember(self, calls: Iterable[ToolCall]) -> int:
        now = self._clock()
        with self._lock:
            generation = getattr(self.memory, "generation", 0)
            if generation != self._generation:
                self._generation = generation
                self._recent.clear()
            fresh = [c for c in calls if now - self._recent.get(c.call_id, -REFRESH_S * 2) > REFRESH_S]
            if len(self._recent) > MAX_RECENT:
                self._recent.clear()
            for c in fresh:
                self._recent[c.call_id] = now
        return self.memory.remember(fresh) if fresh else 0

    def recently_written(self, call_id: object) -> bool:
        """Whether ``call_id`` was written in the last ``REFRESH_S`` seconds (so `remember` would skip it)."""
        at = self._recent.get(call_id) if isinstance(call_id, str) else None  # one dict read: no lock needed
        return at is not None and self._clock() - at <= REFRESH_S

    def lookup(self, call_ids: Iterable[str]) -> dict[str, ToolCall]:
        return self.memory.lookup(call_ids)

    def close(self) -> None:
        self.memory.close()
