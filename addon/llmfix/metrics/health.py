"""What ``/healthz`` answers: is this llmfix serving, and is its memory backend up.

The check runs on the metrics server's thread. It asks mitmproxy's event loop, where every flow's hooks run, to
answer (``call_soon_threadsafe``) and waits at most :data:`LOOP_TIMEOUT_S`:

- ``200 {"status": "ok", ...}``: the proxy is running and its event loop answered. A memory backend that is down
  does not fail it (llmfix fails open: requests are still answered and repaired without shared memory); the body
  says so: ``"memory": {"backend": "redis", "up": false}``. A load balancer keeps the instance, an operator sees why
  repairs may be fewer.
- ``503 {"status": "starting" | "stopping" | "stalled", ...}``: the proxy is not running yet (before mitmproxy's
  ``running`` hook), is shutting down, or its event loop did not answer in time (every flow through it is stuck).
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from llmfix import events

LOOP_TIMEOUT_S = 2.0


class Health:
    def __init__(self, memory: Any) -> None:
        self._memory = memory  # a callable giving the latest events.MemoryState (None: not known yet)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping = False

    def check(self, timeout_s: float = LOOP_TIMEOUT_S) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body)."""
        state: events.MemoryState | None = self._memory()
        memory = {"backend": state.backend, "up": state.up} if state is not None else {"backend": None, "up": None}
        status = self._status(timeout_s)
        return (200 if status == "ok" else 503), {"status": status, "memory": memory}

    def _status(self, timeout_s: float) -> str:
        loop = self.loop
        if self.stopping:
            return "stopping"
        if loop is None:
            return "starting"
        answered = threading.Event()
        try:
            loop.call_soon_threadsafe(answered.set)
        except RuntimeError:  # the loop is closed
            return "stopping"
        return "ok" if answered.wait(timeout_s) else "stalled"


def body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True).encode() + b"\n"
