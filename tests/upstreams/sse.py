"""Canned SSE answers for the mock upstream: splitting into events and writing them one by one."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, Literal

Framing = Literal["chunked", "close"]
MAX_CHUNK_DELAY = 5.0
_EVENT = re.compile(r".*?(?:\r\n\r\n|\n\n|\r\r)|.+", re.DOTALL)


@dataclass(frozen=True)
class CannedSSE:
    """One queued streamed answer: the exact SSE text, the pause between events and the framing."""

    text: str
    chunk_delay: float = 0.0
    framing: Framing = "chunked"

    def __post_init__(self) -> None:
        if not 0.0 <= self.chunk_delay <= MAX_CHUNK_DELAY:
            raise ValueError(f"chunk_delay must be within 0..{MAX_CHUNK_DELAY} s, got {self.chunk_delay}")
        if self.framing not in ("chunked", "close"):
            raise ValueError(f"framing must be 'chunked' or 'close', got {self.framing!r}")


def split_events(text: str) -> list[bytes]:
    """The SSE text cut after each blank line; joined back together they are exactly ``text``."""
    return [m.group(0).encode() for m in _EVENT.finditer(text) if m.group(0)]


def write_events(wfile: BinaryIO, sse: CannedSSE, stop: threading.Event,
                 sending: Callable[[], None] | None = None) -> None:
    """Write each event as its own write (and HTTP chunk when chunked); give up early once ``stop`` is set.
    ``sending`` is called right before each event is written."""
    for index, event in enumerate(split_events(sse.text)):
        if index and sse.chunk_delay and stop.wait(sse.chunk_delay):
            return
        if sending is not None:
            sending()
        if sse.framing == "chunked":
            wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        else:
            wfile.write(event)
        wfile.flush()
    if sse.framing == "chunked":
        wfile.write(b"0\r\n\r\n")
        wfile.flush()
