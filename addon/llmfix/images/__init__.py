"""Images fitted to an upstream's limits: decode (within hard bounds), measure, fit, encode, remember.

    from llmfix import images
    result = images.fit(b64_text, "image/png", images.Limits(max_base64=5_242_880, max_side=8000))
    # Fits(shape): send it as it is · Fitted(before, after, mime, data, why, how): send ``data`` as ``mime``
    # Unusable(reason): put a placeholder in its place · Unreadable(reason): llmfix cannot read it, the upstream
    # may: send it as it is · raises Refused: over llmfix's bounds, change nothing

The answer for an image is remembered by the SHA-256 of its payload text and the limits it was fitted to, so
the same image in the next turn — a client resends its whole history — gets the very same answer without being
decoded or converted again (:data:`CACHE`). Converting is never done on the event loop, nor in a thread of a pool
every flow shares (:func:`deferring`): there, an image not remembered yet raises :class:`WouldBlock`, and the
caller runs the work again on image workers of its own (``llmfix.offload``).

Any repair may use it: the only state is the cache, shared by every flow and thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmfix.body.media import payload_digest
from llmfix.collector import COLLECTOR
from llmfix.images.decode import Undecodable, open_image, payload, short
from llmfix.images.encode import CannotFit, fit_decoded
from llmfix.images.shape import (
    FORMATS,
    MIME,
    Fits,
    Fitted,
    Limits,
    Refused,
    Result,
    Shape,
    Unreadable,
    Unusable,
    WouldBlock,
    base64_length,
    format_of_mime,
)
from llmfix.images.svg import BadSvg

__all__ = ["CACHE", "FORMATS", "MIME", "WORKERS", "Fits", "Fitted", "Limits", "Refused", "Result", "Shape",
           "Unreadable", "Unusable", "WouldBlock", "deferring", "fit", "format_of_mime", "identify", "measure",
           "on_event_loop"]

logger = logging.getLogger("llmfix")

WORKERS = 2
"""At most this many images are decoded at once, whatever the number of flows: bounds the memory they take."""
_WORK = threading.BoundedSemaphore(WORKERS)
_DEFERRED = contextvars.ContextVar("llmfix_images_deferred", default=False)


@dataclass(frozen=True, slots=True)
class _Refusal:
    reason: str


class Cache:
    """Answers by (payload hash, payload length, encoding, declared type, limits), least recently used dropped
    first; bounded by entries and by the bytes of the converted images it holds."""

    def __init__(self, max_entries: int = 1024, max_bytes: int = 96 * 1024 * 1024) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[object, ...], Result | _Refusal] = OrderedDict()
        self._bytes = 0
        self.converted = 0  # answers computed (decodes, conversions): what the cache saves on the next turn
        self.hits = 0

    def get(self, key: tuple[object, ...]) -> Result | _Refusal | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return hit

    def put(self, key: tuple[object, ...], value: Result | _Refusal) -> None:
        with self._lock:
            self.converted += 1
            if key in self._entries:
                return
            self._entries[key] = value
            self._bytes += _weight(value)
            while self._entries and (len(self._entries) > self.max_entries or self._bytes > self.max_bytes):
                _, old = self._entries.popitem(last=False)
                self._bytes -= _weight(old)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


def _weight(value: Result | _Refusal) -> int:
    return len(value.data) if isinstance(value, Fitted) and value.data else 0


CACHE = Cache()


def on_event_loop() -> bool:
    """Whether this thread is running an asyncio event loop (mitmproxy's hooks run on it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def deferring[T](fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` with image work deferred as on the event loop (an image not remembered yet raises
    :class:`WouldBlock`): for a thread of a pool every flow shares (asyncio's default executor), which must never
    wait for a conversion, nor for another one to end."""
    token = _DEFERRED.set(True)
    try:
        return fn(*args)
    finally:
        _DEFERRED.reset(token)


def identify(text: str, start: int = 0) -> tuple[bytes, int]:
    """What the cache knows an image payload (``text[start:]``) by: its SHA-256 and its length. The digest is the
    one the request's log references use (``body.media``): one request hashes each image once."""
    return payload_digest(text, start)[0], len(text) - start


def fit(text: str | Callable[[], str], declared: str | None, limits: Limits, *, is_base64: bool = True,
        ident: tuple[bytes, int] | None = None) -> Result:
    """The answer for the inline image whose payload is ``text`` (its base64, or a data URL's percent-encoded
    text), declared as ``declared``, for an upstream with ``limits``. Raises :class:`Refused` for an image over
    llmfix's decoding bounds and :class:`WouldBlock` when the answer must be computed and this is the event loop
    (or :func:`deferring` runs it).

    ``ident``: the payload's :func:`identify`, when the caller remembers it (then ``text`` may be a function that
    gives the payload: it is called only when the answer must be computed)."""
    if ident is None:
        text = text() if callable(text) else text
        ident = identify(text)
    key = (*ident, is_base64, (declared or "").strip().lower(), limits)
    hit = CACHE.get(key)
    if hit is None:
        if _DEFERRED.get() or on_event_loop():
            raise WouldBlock("an image to decode")
        started = time.perf_counter()
        with COLLECTOR.released(), _WORK:
            hit = _compute(text() if callable(text) else text, declared, limits, is_base64)
        CACHE.put(key, hit)
        if isinstance(hit, Fitted | Unusable | Unreadable):
            logger.debug("llmfix: image converted in %.0f ms: %s", (time.perf_counter() - started) * 1000,
                         hit.summary() if isinstance(hit, Fitted) else hit.reason)
    if isinstance(hit, _Refusal):
        raise Refused(hit.reason)
    return hit


def measure(text: str, *, is_base64: bool = True) -> Shape | None:
    """What the image is (format, pixels, frames, sizes), None when it cannot be decoded."""
    got = fit(text, None, Limits(undecodable_refused=True), is_base64=is_base64)
    return got.shape if isinstance(got, Fits) else None


def _compute(text: str, declared: str | None, limits: Limits, is_base64: bool) -> Result | _Refusal:
    shape = None
    try:
        raw = payload(text, is_base64)
        decoded = open_image(raw, len(text) if is_base64 else base64_length(len(raw)))
        shape = decoded.shape
        return fit_decoded(decoded, declared, limits)
    except Refused as e:
        return _Refusal(str(e))
    except (Undecodable, BadSvg) as e:
        why = f"it cannot be decoded: {e}"
    except CannotFit as e:
        return Unusable(f"it cannot be made to fit: {e}", shape)
    except (OSError, ValueError, MemoryError) as e:  # Pillow's own errors past the header (a corrupt stream)
        why = f"it cannot be decoded: {type(e).__name__}: {short(e)}"
    return Unusable(why, shape) if limits.undecodable_refused else Unreadable(why, shape)
