"""Glue between traffic and the tool-call store (a :class:`~llmfix.memory.store.CallStore`): what is written, when.

Every turn of a conversation re-sends its whole history, so the same declared calls pass again and
again; a call written in the last ``REFRESH_S`` seconds is not written again (the store's age bound is
days, not minutes) — unless the store's ``generation`` changed since (a shared Redis that came back
after an outage may have lost them), or it comes with another declaration than the one written (the store then
makes the id ambiguous: another session of a vendor that numbers its ids per conversation). A request's history is
read past the ids written lately (``recently_written``): such a second declaration is compared when an answer
issues it, which is where every call first appears. Safe to use from the event loop and worker threads at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from llmfix.memory.store import CallStore, ToolCall

REFRESH_S = 600.0
MAX_RECENT = 20_000


_NEVER = (-REFRESH_S * 2, 0)


def _declared(c: ToolCall) -> int:
    """A cheap, in-process tell of a call's declaration as written (the store compares what it says)."""
    return hash((c.name, c.kind, c.arguments))


class Recall:
    def __init__(self, memory: CallStore, clock=time.monotonic) -> None:
        self.memory = memory
        self._clock = clock
        self._recent: dict[str, tuple[float, int]] = {}  # call id → (when written, what it declared)
        self._lock = threading.Lock()
        self._generation = getattr(memory, "generation", 0)  # a shared store that may have lost what it held

    def remember(self, calls: Iterable[ToolCall]) -> int:
        now = self._clock()
        with self._lock:
            generation = getattr(self.memory, "generation", 0)
            if generation != self._generation:
                self._generation = generation
                self._recent.clear()
            fresh = [c for c in calls if (now - (seen := self._recent.get(c.call_id, _NEVER))[0] > REFRESH_S
                                          or seen[1] != _declared(c))]
            if len(self._recent) > MAX_RECENT:
                self._recent.clear()
            for c in fresh:
                self._recent[c.call_id] = (now, _declared(c))
        return self.memory.remember(fresh) if fresh else 0

    def recently_written(self, call_id: object) -> bool:
        """Whether ``call_id`` was written in the last ``REFRESH_S`` seconds (so `remember` would skip it)."""
        seen = self._recent.get(call_id) if isinstance(call_id, str) else None  # one dict read: no lock needed
        return seen is not None and self._clock() - seen[0] <= REFRESH_S

    def lookup(self, call_ids: Iterable[str]) -> dict[str, ToolCall]:
        return self.memory.lookup(call_ids)

    def close(self) -> None:
        self.memory.close()
