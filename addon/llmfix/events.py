"""What llmfix did, as typed events for whoever observes it (the metrics addon): a small public interface.

The transports and the memory call one function here where they already log what happened:

- :func:`request_seen`: an LLM request went through the engine (``LLMFix.request`` for HTTP, the WebSocket addon
  for a Responses message): upstream profile, dialect, transport, outcome, bytes in and out, seconds in the engine;
- :func:`repaired`: a repair was reported (console and JSONL): which repairs, one name per change, images fitted
  or omitted, read from the change records;
- :func:`retried`: a known rejection was handled (``retry.attempt.Attempt.log``): resent or not, and how the resend
  was answered; each flag or fact it taught for the first time as a :class:`QuirkLearned`;
- :func:`memory_state`, :func:`memory_skipped`, :func:`memory_failed`: the memory backend came up or went down, and
  each memory operation that went on without it (llmfix fails open).

A listener registered with :func:`subscribe` gets every event in the thread that emitted it (the event loop, a
worker thread, the Redis link's thread, sometimes under that link's state lock): it must be quick, thread-safe and
never call back into llmfix. With no listener (``llmfix_metrics`` unset) each call returns at once and builds
nothing. A listener that raises is logged once per listener and event type, with its traceback, and kept.

Events carry only names llmfix itself defines (dialect, profile, repair, rule, flag), counts, sizes and durations:
never a host, a model, a header value, a key or a payload. A listener still bounds what it turns into labels.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmfix.engine import Outcome, Request

logger = logging.getLogger("llmfix")

FIT_IMAGES = "fit-images"
"""The repair whose changes (without a ``dropped`` record) are images fitted to an upstream's limits."""
now = time.perf_counter
"""The clock of :func:`request_seen`'s ``started``."""


@dataclass(frozen=True, slots=True)
class RequestSeen:
    transport: str  # "http" | "websocket"
    dialect: str
    profile: str | None  # the upstream profile's name (None: the engine stopped before choosing one)
    outcome: str  # "untouched" | "repaired" | "reported" (report mode) | "failed" (passed unchanged, warned)
    bytes_in: int  # the body as the client sent it (content-encoded as it came)
    bytes_out: int  # the body as llmfix forwarded it
    seconds: float  # time in llmfix's engine, waiting for a worker thread included


@dataclass(frozen=True, slots=True)
class Repaired:
    transport: str
    dialect: str
    profile: str | None
    mode: str  # "repair" | "report"
    repairs: tuple[str, ...]  # each repair that changed the request, once
    changes: tuple[str, ...]  # the repair of each change (one JSONL record each)
    images_fitted: int
    images_omitted: int  # images replaced by a placeholder (their ``dropped`` records)


@dataclass(frozen=True, slots=True)
class Retried:
    transport: str
    dialect: str
    rejection: str  # the rule that recognised the rejection
    outcome: str  # "not_resent" | "succeeded" | "still_rejected" | "failed" (the resend got no usable answer)


@dataclass(frozen=True, slots=True)
class QuirkLearned:
    transport: str
    dialect: str
    quirk: str  # a profile flag, or the kind of a reasoning fact


@dataclass(frozen=True, slots=True)
class MemoryState:
    backend: str  # "sqlite" | "redis"
    up: bool
    seq: int = 0  # increases with every state emitted: a listener keeps the newest it got, whatever the order


@dataclass(frozen=True, slots=True)
class MemoryFailOpen:
    backend: str
    reason: str  # "down" (skipped at once: known down) | "timeout" | "error" (a command failed)


Event = RequestSeen | Repaired | Retried | QuirkLearned | MemoryState | MemoryFailOpen
Listener = Callable[[Event], None]

_listeners: tuple[Listener, ...] = ()
_lock = threading.Lock()
_warned: set[tuple[int, str]] = set()
_memory: MemoryState | None = None
_seq = itertools.count(1)


def subscribe(listener: Listener) -> Callable[[], None]:
    """Send every event to ``listener`` from now on; returns the function that stops it."""
    global _listeners
    with _lock:
        _listeners = (*_listeners, listener)

    def unsubscribe() -> None:
        global _listeners
        with _lock:
            _listeners = tuple(fn for fn in _listeners if fn is not listener)

    return unsubscribe


def last_memory_state() -> MemoryState | None:
    """The memory state emitted last in this process (None: none yet), for a listener that starts late."""
    return _memory


def emit(event: Event) -> None:
    for listener in _listeners:
        try:
            listener(event)
        except Exception as e:  # an observer's bug must never reach a hook, nor go unseen
            key = (id(listener), type(event).__name__)
            if key not in _warned:
                _warned.add(key)
                logger.warning("llmfix: observer %r failed on %s (logged once): %s: %s", listener,
                               type(event).__name__, type(e).__name__, e, exc_info=True)


def request_seen(transport: str, req: Request, outcome: Outcome, mode: str, started: float) -> None:
    """``req`` went through the engine since ``started`` (:data:`now`), in ``mode``, and came out as ``outcome``."""
    if not _listeners:
        return
    status = outcome.status
    if status == "repaired" and mode != "repair":
        status = "reported"
    sent = len(outcome.wire) if status == "repaired" and outcome.wire is not None else len(req.raw)
    emit(RequestSeen(transport, str(req.dialect), outcome.profile, status, len(req.raw), sent, now() - started))


def repaired(req: Request, outcome: Outcome, mode: str, message: int | None = None) -> None:
    """``outcome``'s changes were reported for ``req`` (``message``: carried by that WebSocket message)."""
    if not _listeners:
        return
    fitted = sum(1 for c in outcome.changes if c.repair == FIT_IMAGES and not c.dropped)
    omitted = sum(1 for c in outcome.changes for d in c.dropped if d.startswith("<image"))
    emit(Repaired("http" if message is None else "websocket", str(req.dialect), outcome.profile, mode,
                  tuple(outcome.repairs), tuple(c.repair for c in outcome.changes), fitted, omitted))


def retry_outcome(event: Mapping[str, Any], websocket: bool) -> str:
    """What a retry record says happened: an HTTP resend's status, or a WebSocket resend's terminal event."""
    if not event.get("resent"):
        return "not_resent"
    answer = event.get("outcome")
    if isinstance(answer, int):
        return "succeeded" if answer < 400 else "still_rejected"
    if answer in ("completed", "incomplete"):  # the upstream took the request (incomplete: it hit a limit)
        return "succeeded"
    if answer == "error" and websocket:  # an error event: refused again
        return "still_rejected"
    return "failed"  # no answer over HTTP, or response.failed on the socket


def retried(dialect: str, event: Mapping[str, Any], websocket: bool) -> None:
    """A known rejection was handled; ``event``: the retry record written to the JSONL log."""
    if not _listeners:
        return
    transport = "websocket" if websocket else "http"
    emit(Retried(transport, dialect, str(event.get("rejection")), retry_outcome(event, websocket)))
    for record in event.get("learned", ()):
        if record.get("new"):
            emit(QuirkLearned(transport, dialect, str(record.get("flag") or record.get("fact"))))


def memory_state(backend: str, up: bool) -> None:
    """The memory backend is (now) up or down; remembered for a listener that subscribes later."""
    global _memory
    _memory = MemoryState(backend, up, next(_seq))
    emit(_memory)


def memory_skipped(backend: str, up: bool | None) -> None:
    """A memory operation returned its default without trying; counted only when the backend is known down."""
    if up is False and _listeners:
        emit(MemoryFailOpen(backend, "down"))


def memory_failed(backend: str, timed_out: bool) -> None:
    """A memory operation failed (the caller goes on without memory)."""
    if _listeners:
        emit(MemoryFailOpen(backend, "timeout" if timed_out else "error"))
