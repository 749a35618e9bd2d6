"""Where changes are reported: one console line per change, one JSONL record per change.

Records carry the flow's id, method, host and path (never header values), the dialect, profile and
model, the mode, and the redacted before/after of the touched items (:meth:`Change.record`).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import IO, Any

import orjson

from llmfix.report.changes import Change

logger = logging.getLogger("llmfix")


class JsonlLog:
    """Appends one JSON object per line; safe to call from several threads."""

    def __init__(self, path: str) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = self.path.open("ab")
        self._lock = threading.Lock()

    def write(self, records: list[dict[str, Any]]) -> None:
        data = b"".join(orjson.dumps(r) + b"\n" for r in records)
        with self._lock:
            self._file.write(data)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def records(context: dict[str, Any], changes: tuple[Change, ...],
            redacted: tuple[dict[str, Any], ...] = ()) -> list[dict[str, Any]]:
    """One JSONL record per change; ``redacted``: their ``Change.record()`` when already computed."""
    now = time.time()
    recs = redacted or tuple(c.record() for c in changes)
    return [{"ts": round(now, 3), **context, **r} for r in recs]


def console(prefix: str, changes: tuple[Change, ...], client: Any = None, lines: tuple[str, ...] = ()) -> None:
    """One console line per change; ``lines``: their ``Change.line()`` when already computed."""
    extra = {"client": client} if client else None
    for line in lines or tuple(c.line() for c in changes):
        logger.info("%s %s", prefix, line, extra=extra)
