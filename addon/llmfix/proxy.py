"""The mitmproxy addon: options, hooks and glue. The work happens in :mod:`llmfix.engine`.

Fail-open: every hook catches what goes wrong, logs one warning naming the flow and the reason, and
lets the request through unchanged. A body is replaced at most once, at the very end, so a failure
can never leave a half-repaired request.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
from collections.abc import Callable
from typing import Any

import orjson
from mitmproxy import ctx, exceptions, http

from llmfix import catalogue, engine, events, offload, options, route
from llmfix.dialects.registry import named
from llmfix.engine import Outcome, Settings
from llmfix.memory import backend, learn
from llmfix.memory.media_window import MediaWindow
from llmfix.memory.recall import Recall
from llmfix.memory.store import MemoryStoreError, Quirk, Reasoning, ReasoningStore, ToolCall, upstream_id
from llmfix.report import annotate, changelog, views
from llmfix.report.flowinfo import flow_name
from llmfix.retry.learned import LearnedQuirks

logger = logging.getLogger("llmfix")

OFFLOAD_BYTES = 256 * 1024
"""Bodies at least this large are repaired in a worker thread, so other flows are not stalled."""

STREAMED = ("text/event-stream", "application/x-ndjson", "application/jsonl", "application/jsonlines")
"""Content types of answers that arrive event by event (SSE; newline-delimited JSON, as Ollama streams)."""
ROUTE = "llmfix_dialect"
"""flow.metadata key: the dialect of a routed LLM request, read again by the response hooks."""
RETRY_OF = "llmfix_retry_of"
"""flow.metadata key of llmfix's own resend (llmfix.retry.addon): the request hooks leave it alone."""
UPSTREAM = "llmfix_upstream"
"""flow.metadata key: (scheme, host, port) the request was routed with, before any later addon re-points it."""
StreamWatcher = Callable[[http.HTTPFlow, bytes], None]
"""Told of each error event inside a routed SSE answer (its JSON text), on the event loop, inside mitmproxy's stream
callable: it must be quick (schedule any work) and may raise only what it wants logged."""


def upstream_name(flow: http.HTTPFlow, dialect: str) -> str:
    """``host:port/dialect`` of the upstream ``flow`` was routed to (before any later addon re-pointed it): how
    :class:`llmfix.memory.store.Reasoning` records name who issued them."""
    routed = flow.metadata.get(UPSTREAM)
    host, port = (routed[1], routed[2]) if routed else (flow.request.host, flow.request.port)
    return upstream_id(str(host), port, str(dialect))


def request_body(flow: http.HTTPFlow) -> Any:
    """The parsed JSON body of ``flow``'s request, for a learner that needs to know what its answer answered (None,
    with a warning, when it cannot be read)."""
    try:
        return orjson.loads(flow.request.get_content(strict=False) or b"")
    except (orjson.JSONDecodeError, ValueError) as e:
        logger.warning("llmfix: %s: cannot read the request to learn from its answer: %s", flow_name(flow), e)
        return None


class LLMFix:
    """The request and answer hooks of llmfix, and the one interface its other addons (repair-and-retry, the
    WebSocket transport, capture, metrics) use: the public methods under "for llmfix's other addons" below, never
    its fields."""

    def __init__(self) -> None:
        self.settings = Settings()
        self.log: changelog.JsonlLog | None = None
        self.recall: Recall | None = None
        self.quirks: LearnedQuirks | None = None  # flags learned from upstream rejections (llmfix.retry)
        self.reasoning: ReasoningStore | None = None  # what answers said about the model's reasoning
        self.window = MediaWindow(0.0)
        self.offload = False  # run every request's engine in a worker thread (a Redis memory)
        self._memory_spec: tuple[str, float, int, float] | None = None
        self._stream_watchers: list[StreamWatcher] = []

    def running(self) -> None:
        """Once the proxy is up: move everything alive now (modules, classes, pydantic's and mitmproxy's
        schemas — hundreds of thousands of objects, there for the life of the process) out of the garbage
        collector's reach (``gc.freeze``). llmfix keeps parsed histories in memory (``body/prefix.py``), so
        its process grows long-lived objects faster than bare mitmproxy's and runs full collections more
        often; each one walked every object of the process: 80 ms, ~1.3 ms per request on a 1 MB session.
        Frozen objects are still freed when their last reference goes; only a reference cycle among them
        would stay, and import-time objects form none that die. The models.dev catalogue is read first (its
        ~30,000 objects live as long; read now, the first request does not wait for it)."""
        catalogue.warm()
        gc.collect()
        gc.freeze()

    # -- options -------------------------------------------------------------------------------
    def load(self, loader: Any) -> None:
        for name, typespec, default, help_text in options.OPTIONS:
            loader.add_option(name, typespec, default, help_text)
        views.register()

    def configure(self, updated: set[str]) -> None:
        if not any(name.startswith("llmfix_") for name in updated):
            return
        try:
            settings = options.parse_settings(ctx.options)
        except ValueError as e:
            raise exceptions.OptionsError(str(e)) from e
        if "llmfix_log" in updated:
            self._open_log(ctx.options.llmfix_log)
        self._open_memory()
        self.window.window_s = options.parse_duration(ctx.options.llmfix_restore_window, "llmfix_restore_window")
        self.settings = dataclasses.replace(options.with_state(settings, self.recall, self.window), quirks=self.quirks,
                                            reasoning=self.reasoning)

    def _open_memory(self) -> None:
        o = ctx.options
        spec = (options.memory_path(o), options.parse_duration(o.llmfix_memory_max_age, "llmfix_memory_max_age"),
                o.llmfix_memory_max_entries, options.parse_duration(o.llmfix_memory_timeout, "llmfix_memory_timeout"))
        if spec == self._memory_spec:
            return
        try:  # an SQLite file, or a Redis shared by a fleet (memory/backend.py)
            memory = backend.open_memory(spec[0], max_age_s=int(spec[1]), max_entries=spec[2], timeout_s=spec[3])
        except MemoryStoreError as e:
            raise exceptions.OptionsError(f"llmfix_memory: {e}") from e
        self._close_memory()
        self.recall = Recall(memory.calls)
        self.reasoning = memory.reasoning
        self.quirks = LearnedQuirks(memory.quirks, spec[1], shared=memory.shared)
        self.offload = memory.shared  # a network memory is never waited for on the event loop
        if memory.media is not None or not isinstance(self.window, MediaWindow):
            self.window = memory.media if memory.media is not None else MediaWindow(0.0)
        self._memory_spec = spec

    def _open_log(self, path: str | None) -> None:
        if self.log:
            self.log.close()
            self.log = None
        if path:
            try:
                self.log = changelog.JsonlLog(path)
            except OSError as e:
                raise exceptions.OptionsError(f"llmfix_log: cannot open {path}: {e.strerror or e}") from e

    def done(self) -> None:
        if self.log:
            self.log.close()
            self.log = None
        self._close_memory()
        self._memory_spec = None

    def _close_memory(self) -> None:
        """Close the memory's stores (each closes its share of the file or link; the last one closes it)."""
        for store in (self.recall, self.quirks, self.reasoning):
            if store is not None:
                store.close()
        self.recall = self.quirks = self.reasoning = None

    # -- hooks ---------------------------------------------------------------------------------
    async def request(self, flow: http.HTTPFlow) -> None:
        settings = self.settings
        if settings.mode == "off" or (flow.live and (flow.response or flow.error)) or RETRY_OF in flow.metadata:
            return
        r = flow.request
        dialect = route.dialect_for(r.method, r.path, r.headers.get("content-type"))
        if dialect is None:
            if route.upgrade_dialect(r.method, r.path, r.headers.get("upgrade")) is not None:
                flow.metadata[UPSTREAM] = (r.scheme, r.host, r.port)  # where a Responses WebSocket goes
            return
        flow.metadata[ROUTE] = str(dialect)
        flow.metadata[UPSTREAM] = (r.scheme, r.host, r.port)
        raw = r.raw_content
        if not raw:
            reason = "body was streamed, llmfix cannot see it" if raw is None else "empty body"
            logger.warning("llmfix: %s left unchanged: %s", flow_name(flow), reason)
            return
        req = engine.request(dialect, r.host, r.port, r.path, raw, r.headers.get("content-encoding"), flow.id)
        started = events.now()
        try:
            outcome = await self.run(req, settings)
            events.request_seen("http", req, outcome, settings.mode, started)
            self._apply(flow, req, outcome, settings)
        except Exception as e:  # a bug in llmfix: never let it reach mitmproxy, never lose the request
            logger.warning("llmfix: %s left unchanged: internal error: %s: %s", flow_name(flow),
                           type(e).__name__, e, exc_info=True)

    async def run(self, req: engine.Request, settings: Settings) -> Outcome:
        """``engine.process`` of one request, whatever carried it (an HTTP body, a WebSocket message): in a worker
        thread for a large body, so that other flows are not stalled, unless it is a light append (which needs no
        thread); always there with a network memory, which is never waited for on the event loop. A body with an
        image to decode or convert is run again on llmfix's image workers (``llmfix.offload``)."""
        heavy = self.offload or (len(req.raw) >= OFFLOAD_BYTES and not engine.light(req, settings))
        return await offload.process(req, settings, offload=heavy)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        """Stream every streamed answer through untouched, event by event, whatever its host or path (mitmproxy holds
        an answer until it ends unless told otherwise: Gemini CLI gives up on headers after 60 s and sends its turn
        again); learn the tool calls that LLM answers issue."""
        dialect = flow.metadata.get(ROUTE)
        resp = flow.response
        if resp is None or resp.stream or RETRY_OF in flow.metadata:
            return  # llmfix's resend is read whole: its answer replaces a rejection in the response hook
        kind = resp.headers.get("content-type", "").lower()
        if not kind.startswith(STREAMED):
            return
        if dialect is None or not kind.startswith("text/event-stream"):
            resp.stream = True
            return
        on_error = (lambda event: self._stream_error(flow, event)) if self._stream_watchers else None
        learner = self.learner(flow, dialect, resp.headers.get("content-encoding"), on_error=on_error)

        def stream(data: bytes) -> bytes:
            try:
                learner.feed(data)
            except Exception as e:  # feed never raises by contract; a raise here would drop the chunk
                logger.warning("llmfix: %s: stream learner failed: %s", flow_name(flow), e)
            return data

        resp.stream = stream

    def error(self, flow: http.HTTPFlow) -> None:
        if flow.metadata.get(ROUTE) is not None:
            self.finished(flow.id)

    def response(self, flow: http.HTTPFlow) -> None:
        """Learn tool calls from a non-streamed JSON answer of an LLM request."""
        dialect = flow.metadata.get(ROUTE)
        if dialect is not None:
            self.finished(flow.id)
        resp = flow.response
        if dialect is None or resp is None or resp.stream or self.recall is None:
            return
        if "json" not in resp.headers.get("content-type", "").lower() or not resp.raw_content:
            return
        needles = named(dialect).learn.ANSWER_NEEDLES
        try:
            body = resp.get_content(strict=True)
        except ValueError as e:
            logger.warning("llmfix: %s: cannot decode the response to learn from it: %s", flow_name(flow), e)
            return
        if body and any(n in body for n in needles):
            self._remember(learn.learn_json_response(dialect, body, upstream=upstream_name(flow, dialect),
                                                     on_reasoning=self._note, request=lambda: request_body(flow)))

    def learner(self, flow: http.HTTPFlow, dialect: str, content_encoding: str | None = None, *,
                on_error: learn.OnError | None = None) -> learn.StreamLearner:
        """A learner for the answer of ``flow`` (an SSE body, or the server's messages on a WebSocket): every
        transport learns through one of these, so all of them learn the same things into the same memory.
        ``on_error``: told of each error event in the answer (an SSE answer's; a socket reads its own)."""
        return learn.StreamLearner(dialect, self._remember, content_encoding=content_encoding, label=flow_name(flow),
                                   upstream=upstream_name(flow, dialect), on_reasoning=self._note,
                                   request=lambda: request_body(flow), on_error=on_error)

    def _stream_error(self, flow: http.HTTPFlow, event: bytes) -> None:
        """An error event inside the SSE answer of ``flow``, to each watcher; one that fails is logged, never raised
        (the learner would stop, and mitmproxy's stream callable must not raise)."""
        for watcher in self._stream_watchers:
            try:
                watcher(flow, event)
            except Exception as e:
                logger.warning("llmfix: %s: an error inside the streamed answer was not read: %s: %s", flow_name(flow),
                               type(e).__name__, e, exc_info=True)

    def _remember(self, calls: list[ToolCall]) -> None:
        if self.recall is not None and calls:
            self.recall.remember(calls)

    def _note(self, records: list[Reasoning]) -> None:
        if self.reasoning is not None and records:
            self.reasoning.note(records)

    def _apply(self, flow: http.HTTPFlow, req: engine.Request, outcome: Outcome, settings: Settings) -> None:
        if outcome.status == "failed":
            logger.warning("llmfix: %s left unchanged: %s", flow_name(flow), outcome.reason)
            return
        if outcome.status != "repaired":
            return
        if settings.mode == "repair":
            assert outcome.wire is not None
            flow.request.raw_content = outcome.wire
            if "transfer-encoding" not in flow.request.headers:
                flow.request.headers["content-length"] = str(len(outcome.wire))
        self.report(flow, req, outcome, settings.mode)

    # -- for llmfix's other addons -------------------------------------------------------------------
    # (``settings``, the options as parsed, and :meth:`run` and :meth:`learner` above are theirs too)

    def report(self, flow: http.HTTPFlow, req: engine.Request, outcome: Outcome, mode: str,
               message: int | None = None) -> None:
        """Console, JSONL and mitmweb for a repaired request (``message``: the index of the WebSocket message that
        carried it; None: the flow's HTTP request)."""
        annotate.report(flow, req, outcome, mode, self.log, message)

    def record(self, records: list[dict[str, Any]]) -> None:
        """Records of llmfix's own (a retry) into the JSONL change log, when there is one."""
        if self.log is None:
            return
        try:
            self.log.write(records)
        except OSError as e:
            logger.warning("llmfix: cannot write change log %s: %s", self.log.path, e)

    def finished(self, key: str) -> None:
        """The request ``key`` names (a flow id, ``<flow id>/<message index>``) was answered: its media leave the
        window restore-tool-media reads (:mod:`llmfix.memory.media_window`)."""
        self.window.finish(key)

    def watch_stream_errors(self, watcher: StreamWatcher) -> None:
        """Tell ``watcher`` of each error event inside a routed SSE answer from now on (repair-and-retry learns from a
        rejection an upstream reports inside a 200 stream)."""
        self._stream_watchers.append(watcher)

    def learned(self) -> list[Quirk]:
        """The upstream quirks learned from rejections, oldest first."""
        return self.quirks.quirks() if self.quirks is not None else []

    def forget(self, host: str | None = None) -> int:
        """Forget the quirks learned for ``host`` (None: every host); how many were forgotten."""
        return self.quirks.forget(host) if self.quirks is not None else 0
