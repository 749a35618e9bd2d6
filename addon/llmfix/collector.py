"""Python's cycle collector off while llmfix processes a body, and back on while it converts an image.

Parsing, typing and checking a body llmfix has not seen allocates ~100,000 objects per MB, none of them in a
reference cycle: they all go when the request is done. Meanwhile the collector ran young and full collections
over them and over the whole proxy's heap: measured inside mitmdump, 6-9 ms of GC per 1 MB first sight, as
much as the work itself (team bench, Messages 1 MB first sight: 7.4x bare CPU with the collector paused for
the parse and typing only, 5.9x with it paused for the whole request). An image conversion (tens to hundreds of
milliseconds) and the wait for an image worker release this thread's pause, so that image traffic never keeps
the collector off for long. Cycles made meanwhile are collected once it is back on; a collector that was off
(someone else's choice) stays off.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator


class Collector:
    """A pause any number of threads hold at once; the collector runs again when none holds one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_on = True
        self._mine = threading.local()  # how many pauses this thread holds

    def _take(self) -> None:
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                self._was_on = gc.isenabled()
                gc.disable()

    def _give(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._was_on:
                gc.enable()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        self._take()
        self._mine.held = getattr(self._mine, "held", 0) + 1
        try:
            yield
        finally:
            self._mine.held -= 1
            self._give()

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        """This thread's pauses given back for the block (the collector runs unless another thread holds one)."""
        held = getattr(self._mine, "held", 0)
        for _ in range(held):
            self._give()
        self._mine.held = 0
        try:
            yield
        finally:
            for _ in range(held):
                self._take()
            self._mine.held = held


COLLECTOR = Collector()
