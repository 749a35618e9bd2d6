"""RFC 6455 over a blocking socket, for the WebSocket mock upstream and the tests' scripted clients (wsproto).

Whole text messages in and out: :meth:`Peer.send_text`, :meth:`Peer.recv` (fragments are joined; a ping is
answered). :func:`accept` is the server side of the upgrade (the HTTP request already read by the mock's
handler), :func:`connect` the client side over a socket that is already open (plain, or TLS after a CONNECT).
``permessage-deflate`` is taken when asked for, on either side, so a test can run with and without it.
Every read is bounded by the socket's timeout.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import wsproto
import wsproto.extensions
from wsproto.connection import Connection, ConnectionType
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
READ = 256 * 1024


class Closed(ConnectionError):
    """The peer closed the connection (or it broke) before a whole message arrived."""


@dataclass
class Peer:
    """One end of an open WebSocket: ``read`` gets bytes from the network (b"" at its end), ``write`` sends."""

    conn: Connection
    read: Callable[[], bytes]
    write: Callable[[bytes], None]
    extensions: list[str] = field(default_factory=list)  # the names negotiated, e.g. ["permessage-deflate"]
    close_code: int | None = None
    _parts: list[str] = field(default_factory=list)
    _ready: list[str] = field(default_factory=list)

    def send_text(self, text: str | bytes) -> None:
        self.write(self.conn.send(TextMessage(text.decode() if isinstance(text, bytes) else text)))

    def recv(self) -> str:
        """The next whole text message; raises :class:`Closed` when the connection ends first."""
        self._drain()  # what arrived with the upgrade, or with the last read
        while not self._ready:
            if self.close_code is not None:
                raise Closed(f"closed with code {self.close_code}")
            try:
                data = self.read()
            except (OSError, ValueError) as e:  # a timeout or a socket shut down under us
                raise Closed(f"read failed: {e}") from e
            self.conn.receive_data(data or None)
            self._drain()
            if not data and not self._ready:
                raise Closed("connection ended")
        return self._ready.pop(0)

    def close(self, code: int = 1000) -> None:
        with contextlib.suppress(OSError, wsproto.utilities.LocalProtocolError):
            self.write(self.conn.send(CloseConnection(code)))

    def _drain(self) -> None:
        for event in self.conn.events():
            if isinstance(event, TextMessage):
                self._parts.append(event.data)
                if event.message_finished:
                    self._ready.append("".join(self._parts))
                    self._parts = []
            elif isinstance(event, BytesMessage):
                raise Closed("a binary message: the Responses WebSocket speaks text only")
            elif isinstance(event, Ping):
                self.write(self.conn.send(event.response()))
            elif isinstance(event, CloseConnection):
                self.close_code = event.code
                with contextlib.suppress(OSError, wsproto.utilities.LocalProtocolError):
                    self.write(self.conn.send(event.response()))


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def accept(headers: Mapping[str, str], read: Callable[[], bytes], write: Callable[[bytes], None], *,
           deflate: bool = False) -> Peer:
    """Answer an upgrade request (``headers``: lower-case names) with 101 and return the server's end.

    ``deflate``: take ``permessage-deflate`` when the client offers it (the default declines every extension,
    as the mock the shared capture was made with did)."""
    extensions: list[wsproto.extensions.Extension] = []
    lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Accept: {accept_key(headers.get('sec-websocket-key', ''))}"]
    offer = headers.get("sec-websocket-extensions", "")
    if deflate and "permessage-deflate" in offer:
        ext = wsproto.extensions.PerMessageDeflate()
        answer = ext.accept(next(o.strip() for o in offer.split(",") if o.strip().startswith("permessage-deflate")))
        if answer:
            lines.append(f"Sec-WebSocket-Extensions: {ext.name}" + (f"; {answer}" if isinstance(answer, str) else ""))
            extensions.append(ext)
    write(("\r\n".join(lines) + "\r\n\r\n").encode())
    return Peer(Connection(ConnectionType.SERVER, extensions), read, write, [e.name for e in extensions])


def connect(sock: socket.socket, host: str, path: str, headers: Mapping[str, str] | None = None, *,
            deflate: bool = True) -> Peer:
    """Open a WebSocket over ``sock`` (already connected: plain or TLS) with a client upgrade request."""
    ws = wsproto.WSConnection(ConnectionType.CLIENT)
    offered = [wsproto.extensions.PerMessageDeflate()] if deflate else []
    extra = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    sock.sendall(ws.send(Request(host=host, target=path, extra_headers=extra, extensions=offered)))
    while True:
        data = sock.recv(READ)
        if not data:
            raise Closed("the connection ended during the upgrade")
        ws.receive_data(data)
        for event in ws.events():
            if isinstance(event, AcceptConnection):
                conn = ws.connection
                assert conn is not None
                taken = [e.name for e in event.extensions]
                return Peer(conn, lambda: sock.recv(READ), sock.sendall, taken)
            if isinstance(event, (RejectConnection, RejectData)):
                raise Closed(f"the upgrade was refused: {getattr(event, 'status_code', '')}")
