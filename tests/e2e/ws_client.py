"""A scripted WebSocket client for the tests: a Responses socket through a real mitmdump, over TLS with its CA.

    with open_socket(proxy, "api.openai.com") as ws:      # CONNECT, TLS (mitmproxy's CA), the upgrade
        ws.send_text(json.dumps({"type": "response.create", ...}))
        events = read_response(ws)                          # up to the terminal event of that request

``direct(mock)`` opens the same socket straight to a mock upstream (plain ws://, no llmfix): what the strict
upstream says of a message on its own. Every read is bounded by the socket timeout.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
from collections.abc import Iterator, Mapping
from typing import Any

from tests.e2e.harness import Mitmdump
from tests.upstreams import wsframes
from tests.upstreams.mock import MockUpstream

TIMEOUT = 30.0
BETA = {"OpenAI-Beta": "responses_websockets=2026-02-06"}
TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")


@contextlib.contextmanager
def open_socket(proxy: Mitmdump, host: str, path: str = "/v1/responses", headers: Mapping[str, str] = BETA, *,
                deflate: bool = True) -> Iterator[wsframes.Peer]:
    """A WebSocket to ``https://host`` through ``proxy`` (HTTP CONNECT, then TLS trusting mitmproxy's CA)."""
    raw = socket.create_connection(("127.0.0.1", proxy.port), timeout=TIMEOUT)
    tls: ssl.SSLSocket | None = None
    try:
        raw.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = raw.recv(4096)
            if not chunk:
                raise wsframes.Closed("the proxy closed the connection during CONNECT")
            answer += chunk
        if not answer.startswith(b"HTTP/1.1 200"):
            raise wsframes.Closed(f"CONNECT refused: {answer[:80]!r}")
        tls = proxy.ssl_context().wrap_socket(raw, server_hostname=host)
        peer = wsframes.connect(tls, host, path, headers, deflate=deflate)
        yield peer
        peer.close()
    finally:
        (tls or raw).close()


@contextlib.contextmanager
def direct(mock: MockUpstream, host: str = "api.openai.com", path: str = "/v1/responses") -> Iterator[wsframes.Peer]:
    """A WebSocket straight to the mock (no proxy, no llmfix), with ``Host: host`` choosing its rules."""
    sock = socket.create_connection(("127.0.0.1", mock.port), timeout=TIMEOUT)
    try:
        peer = wsframes.connect(sock, host, path, BETA, deflate=False)
        yield peer
        peer.close()
    finally:
        sock.close()


def read_response(peer: wsframes.Peer) -> list[dict[str, Any]]:
    """The events of one answer, up to and including its terminal event (``response.completed``, ``error``…)."""
    events: list[dict[str, Any]] = []
    while not events or events[-1].get("type") not in TERMINAL:
        events.append(json.loads(peer.recv()))
    return events


def ask(peer: wsframes.Peer, message: dict[str, Any] | bytes) -> list[dict[str, Any]]:
    """Send one message (a dict as compact JSON, non-ASCII as is, the way Codex writes it) and read its answer."""
    text = message if isinstance(message, bytes) else json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    peer.send_text(text)
    return read_response(peer)
