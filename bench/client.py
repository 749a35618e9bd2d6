"""A minimal HTTP/1.1 client over one keep-alive socket: plain HTTP through a regular-mode proxy.

Lighter and more predictable than httpx for timing: headers and a small body go out in one send,
a large body in a second ``sendall`` straight from the prebuilt bytes (no copy, GIL released);
responses are read with Content-Length or chunked framing. Times are ``time.perf_counter()``.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field


class HttpError(RuntimeError):
    pass


@dataclass
class Req:
    method: str
    url: str  # absolute http:// URL (sent as the request target, as to a forward proxy)
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    def head(self) -> bytes:
        host = self.url.split("://", 1)[1].split("/", 1)[0]
        lines = [f"{self.method} {self.url} HTTP/1.1", f"host: {host}", "connection: keep-alive",
                 "accept-encoding: identity"]
        if self.body or self.method == "POST":
            lines.append(f"content-length: {len(self.body)}")
            lines.append("content-type: application/json")
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Conn:
    """One keep-alive connection to ``127.0.0.1:port``; reconnects if the peer closed it."""

    SMALL = 64 * 1024

    def __init__(self, port: int, timeout: float = 60.0) -> None:
        self.port = port
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.buf = bytearray()

    def _connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf.clear()
        return s

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def send(self, req: Req, head: bytes | None = None) -> None:
        if self.sock is None:
            self.sock = self._connect()
        head = head if head is not None else req.head()
        if len(req.body) <= self.SMALL:
            self.sock.sendall(head + req.body)
        else:
            self.sock.sendall(head)
            self.sock.sendall(req.body)

    def _recv(self) -> None:
        assert self.sock is not None
        data = self.sock.recv(1 << 18)
        if not data:
            raise HttpError("connection closed by peer")
        self.buf += data

    def _read_head(self) -> tuple[int, dict[str, str]]:
        while (i := self.buf.find(b"\r\n\r\n")) < 0:
            self._recv()
        head = bytes(self.buf[:i]).decode("latin-1").split("\r\n")
        del self.buf[: i + 4]
        status = int(head[0].split(" ", 2)[1])
        headers = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, headers

    def _read_body(self, headers: dict[str, str]) -> bytes:
        if "content-length" in headers:
            n = int(headers["content-length"])
            while len(self.buf) < n:
                self._recv()
            body = bytes(self.buf[:n])
            del self.buf[:n]
            return body
        if headers.get("transfer-encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                while (i := self.buf.find(b"\r\n")) < 0:
                    self._recv()
                size = int(bytes(self.buf[:i]).split(b";")[0], 16)
                del self.buf[: i + 2]
                while len(self.buf) < size + 2:
                    self._recv()
                out += self.buf[:size]
                del self.buf[: size + 2]
                if size == 0:
                    return bytes(out)
        raise HttpError(f"cannot frame a response with headers {headers}")

    def request(self, req: Req, head: bytes | None = None) -> tuple[int, float, dict[str, str]]:
        """Send ``req``, read the whole answer; (status, seconds from first byte sent to last read, headers)."""
        for attempt in (0, 1):
            t0 = time.perf_counter()
            try:
                self.send(req, head)
                status, headers = self._read_head()
                self._read_body(headers)
            except (HttpError, ConnectionError) as e:
                self.close()
                if attempt:
                    raise HttpError(f"{req.method} {req.url}: {e}") from e
                continue
            dt = time.perf_counter() - t0
            if headers.get("connection", "").lower() == "close":
                self.close()
            return status, dt, headers
        raise AssertionError("unreachable")

    def stream(self, req: Req) -> tuple[int, float, float, list[float]]:
        """Send ``req`` and read an SSE answer; (status, t_headers, t_first_event, event arrival times).

        Times are seconds after the request was sent. An event is counted when its terminating blank
        line has arrived (chunk framing never contains ``\\n\\n``). The connection is closed after.
        """
        self.close()
        self.sock = self._connect()
        t0 = time.perf_counter()
        self.send(req)
        status, _headers = self._read_head()
        t_head = time.perf_counter() - t0
        arrivals: list[float] = []
        seen = 0
        scan_from = 0
        done = False
        while not done:
            # count event terminators in what we have (chunk framing is "\r\n<hex>\r\n": no "\n\n")
            while (i := self.buf.find(b"\n\n", scan_from)) >= 0:
                seen += 1
                arrivals.append(time.perf_counter() - t0)
                scan_from = i + 2
            if self.buf.endswith(b"0\r\n\r\n") and b"response.completed" in self.buf:
                done = True
                break
            self._recv()
        self.close()
        t_first = arrivals[0] if arrivals else float("nan")
        return status, t_head, t_first, arrivals
