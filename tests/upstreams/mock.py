"""A strict mock LLM upstream: a threaded HTTP/1.1 server on 127.0.0.1 that answers like the real one.

    with MockUpstream(rules="xai") as up:
        httpx.post(f"{up.url}/v1/responses", json=body)      # 422 with xAI's text, or 200
        up.requests[-1].json                                  # what it received

``rules`` is a fixed rule set (see `tests.upstreams.rules.RULE_SETS`; ``"gemini"`` answers Gemini's doors,
see `tests.upstreams.gemini_mock`) or ``"by-host"``: then each
request's rule set comes from the header ``x-llmfix-test-original-host`` (set by the loopback redirect
addon), falling back to the Host header. Every server, connection thread and streamed answer stops
when the context exits (connection sockets are shut down; handlers also time out after 10 s).
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from collections import deque
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Any

from tests.upstreams.gemini_mock import GeminiState
from tests.upstreams.handler import MockHandler
from tests.upstreams.reasoning_items_rules import Ledger as ItemsLedger
from tests.upstreams.rules import RULE_SETS, rules_for_host
from tests.upstreams.sse import CannedSSE, Framing
from tests.upstreams.thinking import Ledger

ORIGINAL_HOST_HEADER = "x-llmfix-test-original-host"
BY_HOST = "by-host"
JOIN_TIMEOUT = 5.0


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the mock saw it, and how it answered."""

    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes  # the wire bytes (still content-encoded)
    json: Any  # the decoded JSON, None if it did not parse
    rules: str
    status: int
    reason: str | None  # the Rejection.reason, None when answered 200


class _Server(ThreadingHTTPServer):
    """Tracks its connections so that `close_connections` can end them all promptly."""

    daemon_threads = True
    block_on_close = False
    # socketserver's default listen backlog is 5. Under the load test (200 connections at once) the
    # kernel's accept queue overflowed, SYN cookies failed and mitmproxy saw "server closed
    # connection" (502) on a few requests. Real upstreams listen with hundreds (nginx: 511).
    request_queue_size = 1024

    def __init__(self, mock: MockUpstream) -> None:
        super().__init__(("127.0.0.1", 0), MockHandler)
        self.mock = mock
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._conn_threads: list[threading.Thread] = []

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address),
            name="mock-upstream-connection", daemon=True,
        )
        with self._lock:
            self._connections.add(request)
            self._conn_threads = [t for t in self._conn_threads if t.is_alive()] + [thread]
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore the client going away (normal for streams); report anything else."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self._lock:
            connections, threads = list(self._connections), list(self._conn_threads)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(JOIN_TIMEOUT)


class MockUpstream:
    """A strict upstream on a free loopback port; a context manager (also `start`/`stop`)."""

    def __init__(self, rules: str = BY_HOST) -> None:
        if rules != BY_HOST and rules not in RULE_SETS:
            raise ValueError(f"rules must be {BY_HOST!r} or one of {', '.join(RULE_SETS)}; got {rules!r}")
        self.rules = rules
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._sse: deque[CannedSSE] = deque()
        self.ledger = Ledger()  # the thinking it signed and the reasoning it issued (tests/upstreams/thinking.py)
        self.items_ledger = ItemsLedger()  # the Responses reasoning items it issued, per organization
        self.gemini = GeminiState()  # Gemini's queued answers, signing keys, options (tests/upstreams/gemini_mock.py)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> MockUpstream:
        if self._server is not None:
            return self
        self.stopping.clear()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"mock-upstream-{self.port}", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self.stopping.set()
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(JOIN_TIMEOUT)

    def __enter__(self) -> MockUpstream:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # ------------------------------------------------------------------ address

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the mock upstream is not running")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no path)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``, the form of the ``loopback_upstream`` option."""
        return f"127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ behaviour

    def queue_sse(self, text: str, chunk_delay: float = 0.0, *, framing: Framing = "chunked") -> None:
        """Answer the next accepted ``"stream": true`` request with ``text`` (FIFO), event by event."""
        sse = CannedSSE(text, chunk_delay, framing)
        with self._lock:
            self._sse.append(sse)

    def next_sse(self) -> CannedSSE | None:
        with self._lock:
            return self._sse.popleft() if self._sse else None

    def rules_for(self, headers: dict[str, str]) -> str:
        """The rule set for a request with these (lower-case) headers."""
        if self.rules != BY_HOST:
            return self.rules
        return rules_for_host(headers.get(ORIGINAL_HOST_HEADER) or headers.get("host"))

    # ------------------------------------------------------------------ recording

    def record(self, **fields: Any) -> None:
        with self._lock:
            self._requests.append(RecordedRequest(**fields))

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)
