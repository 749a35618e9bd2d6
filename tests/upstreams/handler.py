"""The HTTP/1.1 request handler of the strict mock upstream.

For each request: read the body (Content-Length or chunked), undo its Content-Encoding, parse the
JSON, choose the rule set, record everything, then answer the rule's `Rejection`, a streamed SSE
answer (``"stream": true``) or a minimal JSON answer of the dialect.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from mitmproxy.net import encoding

from tests.upstreams import canned, gemini_mock
from tests.upstreams.errors import Rejection, invalid_json, openai_error
from tests.upstreams.reasoning_items_rules import organization_for
from tests.upstreams.rules import check, dialect_of
from tests.upstreams.sse import CannedSSE, write_events

if TYPE_CHECKING:
    from tests.upstreams.mock import MockUpstream

SOCKET_TIMEOUT = 10.0
DECODABLE = frozenset({"gzip", "deflate", "br", "zstd"})
_decode_lock = threading.Lock()  # mitmproxy.net.encoding keeps a module-global cache


class BodyError(ValueError):
    """The request body could not be read or decoded."""


class MockHandler(BaseHTTPRequestHandler):
    """Answers like a strict LLM upstream; ``self.server.mock`` is the owning `MockUpstream`."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = SOCKET_TIMEOUT
    server_version = "llmfix-mock-upstream/1"

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests read ``mock.requests`` instead of the access log."""

    @property
    def mock(self) -> MockUpstream:
        return self.server.mock  # type: ignore[attr-defined]

    def _handle(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        rules = self.mock.rules_for(headers)
        if rules == "gemini":
            self._handle_gemini(headers)
            return
        try:
            raw = self._read_body()
            data, rejection = self._parse(raw, headers, rules)
        except BodyError as e:
            raw, data, rejection = b"", None, invalid_json(rules, str(e))
        dialect = dialect_of(self.path)
        if rejection is None and (self.command != "POST" or dialect is None):
            rejection = openai_error(f"Invalid URL ({self.command} {self.path})", reason="unknown-url",
                                     status=404)
        if rejection is None:
            rejection = check(rules, self.path, data) or self.mock.ledger.check(rules, dialect, data)
        org = organization_for(headers)
        if rejection is None and dialect == "responses" and rules == "openai":
            rejection = self.mock.items_ledger.check(org, data)
        streamed = rejection is None and data.get("stream") is True
        self.mock.record(
            method=self.command, path=self.path, headers=headers, body=raw, json=data, rules=rules,
            status=rejection.status if rejection else 200, reason=rejection.reason if rejection else None,
        )
        if rejection is not None:
            self._send_json(rejection.status, rejection.body)
        elif streamed:
            sse = self.mock.next_sse() or CannedSSE(canned.default_sse(dialect, data))
            self.mock.ledger.observe(rules, dialect, sse.text)
            if dialect == "responses":
                self.mock.items_ledger.issue(org, canned.completed_response(sse.text), data.get("previous_response_id"))
            self._send_sse(sse)
        else:
            answer = canned.default_json(dialect, data)
            if dialect == "responses":
                self.mock.items_ledger.issue(org, answer, data.get("previous_response_id"))
            self._send_json(200, answer)

    def _handle_gemini(self, headers: dict[str, str]) -> None:
        """Gemini's doors answer with their own shapes (tests/upstreams/gemini_mock.py)."""
        try:
            raw = self._read_body()
        except BodyError:
            raw = b""
        try:
            plain: bytes | None = _decode(raw, headers.get("content-encoding", "").strip().lower())
        except ValueError:
            plain = None
        gemini_mock.handle(self, headers, raw, plain)

    def _parse(self, raw: bytes, headers: dict[str, str], rules: str) -> tuple[Any, Rejection | None]:
        if self.command != "POST":
            return None, None
        content_encoding = headers.get("content-encoding", "").strip().lower()
        try:
            plain = _decode(raw, content_encoding)
            data = json.loads(plain)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:  # too deep to parse is bad JSON as well
            return None, invalid_json(rules, str(e))
        if not isinstance(data, dict):
            return data, invalid_json(rules, "the body must be a JSON object")
        return data, None

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return self._read_chunked()
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError as e:
            raise BodyError(f"bad content-length: {e}") from e
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked(self) -> bytes:
        body = bytearray()
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as e:
                raise BodyError(f"bad chunk size line {line!r}") from e
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                return bytes(body)
            body += self.rfile.read(size)
            self.rfile.readline(1024)

    def _send_json(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _send_sse(self, sse: CannedSSE) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        if sse.framing == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.flush()
        write_events(self.wfile, sse, self.mock.stopping)


def _decode(raw: bytes, content_encoding: str) -> bytes:
    if content_encoding in ("", "identity"):
        return raw
    if content_encoding not in DECODABLE:
        raise ValueError(f"unsupported content-encoding {content_encoding!r}")
    with _decode_lock:
        decoded = encoding.decode(raw, content_encoding)
    if not isinstance(decoded, bytes):
        raise ValueError(f"content-encoding {content_encoding!r} did not give bytes")
    return decoded
