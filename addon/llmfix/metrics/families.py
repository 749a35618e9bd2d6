"""llmfix's Prometheus metrics, in a registry of their own, kept up to date from :mod:`llmfix.events`.

One :class:`Families` per metrics addon: its own ``CollectorRegistry`` (never prometheus_client's global one, so a
reloaded addon starts from a fresh registry and two addons in one process never clash), the process collector
(CPU, resident memory, open files of the mitmdump process), and one family per question an operator asks; the
README ("Metrics") says what each answers. Labels go through :mod:`llmfix.metrics.labels`: bounded by llmfix's own
names, never a host, a model, a key, a header or a payload.
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

from llmfix import events
from llmfix.metrics import labels as lb

SECONDS_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0)
"""From 0.1 ms (a small request, no repair) to 10 s (a request waiting out a hung Redis)."""
REPAIR_LABELS = ("repair", "profile", "dialect", "mode")


class Families:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "llmfix_requests", "LLM API requests llmfix saw (HTTP bodies and Responses WebSocket messages), by the "
            "upstream profile chosen for them and what llmfix did.",
            ("profile", "dialect", "transport", "outcome"), registry=r)
        self.seconds = Histogram(
            "llmfix_request_seconds", "Time llmfix spent on one LLM request before forwarding it (its engine, "
            "waiting for a worker thread included).", ("dialect", "transport"), buckets=SECONDS_BUCKETS, registry=r)
        self.received = Counter("llmfix_request_received_bytes", "Request body bytes received from clients.",
                                ("dialect", "transport"), registry=r)
        self.sent = Counter("llmfix_request_sent_bytes", "Request body bytes forwarded upstream (after repair).",
                            ("dialect", "transport"), registry=r)
        self.repairs = Counter("llmfix_repairs", "Requests each repair changed (in report mode: would change).",
                               REPAIR_LABELS, registry=r)
        self.changes = Counter("llmfix_changes", "Changes each repair made: one JSONL change record each.",
                               REPAIR_LABELS, registry=r)
        self.images = Counter("llmfix_images", "Images fitted to the upstream's limits, or omitted (a placeholder).",
                              ("profile", "outcome"), registry=r)
        self.retries = Counter(
            "llmfix_retries", "Known rejections handled by repair-and-retry, by how the single resend went "
            "(not_resent: nothing to learn or report mode).", ("dialect", "transport", "rejection", "outcome"),
            registry=r)
        self.quirks = Counter("llmfix_quirks_learned", "Upstream quirks (profile flags, reasoning facts) learned "
                              "from rejections for the first time.", ("dialect", "quirk"), registry=r)
        self.memory_up = Gauge("llmfix_memory_up", "1 while llmfix's memory backend is reachable, 0 while llmfix "
                               "goes on without it (fail-open).", ("backend",), registry=r)
        self.fail_open = Counter("llmfix_memory_fail_open", "Memory operations that went on without the memory "
                                 "backend (skipped while it is down, or failed).", ("backend", "reason"), registry=r)
        ProcessCollector(registry=r)
        self._state_lock = threading.Lock()
        self.memory: events.MemoryState | None = None
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def _child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, kept: prometheus_client's lookup costs ~10 µs a call, this one a dict hit.
        Keyed by label values already bounded, so it holds at most one entry per series."""
        child = self._children.get((metric, values))
        if child is None:
            child = self._children[metric, values] = metric.labels(*values)
        return child

    def observe(self, event: events.Event) -> None:
        """Count one event (any thread; prometheus_client's metrics take their own locks)."""
        match event:
            case events.RequestSeen():
                dialect, transport = lb.dialect(event.dialect), lb.one_of(event.transport, lb.TRANSPORTS)
                self._child(self.requests, lb.profile(event.profile), dialect, transport,
                            lb.one_of(event.outcome, lb.REQUEST_OUTCOMES)).inc()
                self._child(self.seconds, dialect, transport).observe(event.seconds)
                self._child(self.received, dialect, transport).inc(event.bytes_in)
                self._child(self.sent, dialect, transport).inc(event.bytes_out)
            case events.Repaired():
                self._repaired(event)
            case events.Retried():
                self._child(self.retries, lb.dialect(event.dialect), lb.one_of(event.transport, lb.TRANSPORTS),
                            lb.rejection(event.rejection), lb.one_of(event.outcome, lb.RETRY_OUTCOMES)).inc()
            case events.QuirkLearned():
                self._child(self.quirks, lb.dialect(event.dialect), lb.quirk(event.quirk)).inc()
            case events.MemoryState():
                backend = lb.one_of(event.backend, lb.BACKENDS)
                with self._state_lock:
                    if self.memory is not None and self.memory.seq > event.seq:
                        return  # a state replayed to a late listener, older than one it got meanwhile
                    if self.memory is not None and self.memory.backend != event.backend:
                        self.memory_up.remove(lb.one_of(self.memory.backend, lb.BACKENDS))  # memory switched
                    self.memory = event
                    self.memory_up.labels(backend).set(1 if event.up else 0)
            case events.MemoryFailOpen():
                self._child(self.fail_open, lb.one_of(event.backend, lb.BACKENDS),
                            lb.one_of(event.reason, lb.FAIL_OPEN_REASONS)).inc()

    def _repaired(self, event: events.Repaired) -> None:
        profile, dialect, mode = lb.profile(event.profile), lb.dialect(event.dialect), lb.one_of(event.mode, lb.MODES)
        for name in event.repairs:
            self._child(self.repairs, lb.repair(name), profile, dialect, mode).inc()
        for name in event.changes:
            self._child(self.changes, lb.repair(name), profile, dialect, mode).inc()
        if event.images_fitted:
            self._child(self.images, profile, "fitted").inc(event.images_fitted)
        if event.images_omitted:
            self._child(self.images, profile, "omitted").inc(event.images_omitted)
