"""The metrics HTTP server: ``/metrics`` (prometheus_client's WSGI app on llmfix's registry) and ``/healthz``.

A threaded WSGI server on a thread of its own, named ``llmfix-metrics``, so a scrape never runs on mitmproxy's
event loop. :func:`start` binds at once (a taken port or a bad host fails the option that asked for it);
:meth:`MetricsServer.stop` stops serving, closes the socket and joins every thread it started: a request thread
lives at most :data:`REQUEST_TIMEOUT_S` on a silent client, or a health check's wait. Requests are not logged.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from llmfix.metrics.health import Health, body

logger = logging.getLogger("llmfix")

REQUEST_TIMEOUT_S = 5.0
JOIN_TIMEOUT_S = 10.0
INDEX = b"llmfix: /metrics (Prometheus text format), /healthz (JSON; 200 while this llmfix serves)\n"
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class _Quiet(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S  # a client that sends nothing does not hold a thread (or stop()) for long

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one every few seconds)."""


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = False
    block_on_close = True  # server_close() joins the request threads: none outlives stop()


def app(registry: CollectorRegistry, health: Health) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    metrics = make_wsgi_app(registry)

    def route(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics(environ, start_response)
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD"), ("Content-Type", "text/plain")])
            return [b"GET or HEAD only\n"]
        head = environ.get("REQUEST_METHOD") == "HEAD"  # a load balancer's check may send HEAD: status only
        if path == "/healthz":
            code, payload = health.check()
            start_response(f"{code} {'OK' if code == 200 else 'Service Unavailable'}",
                           [("Content-Type", "application/json"), ("Cache-Control", "no-store")])
            return [b"" if head else body(payload)]
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"" if head else INDEX]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /metrics or /healthz\n"]

    return route


class MetricsServer:
    def __init__(self, server: _Server) -> None:
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="llmfix-metrics", daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def stop(self) -> None:
        self._server.shutdown()  # returns once serve_forever has (within its poll interval)
        self._server.server_close()  # closes the socket, joins the request threads
        self._thread.join(JOIN_TIMEOUT_S)
        if self._thread.is_alive():
            logger.warning("llmfix metrics: the server thread did not stop within %g s", JOIN_TIMEOUT_S)


def start(host: str, port: int, registry: CollectorRegistry, health: Health) -> MetricsServer:
    """Serve on ``host:port`` (port 0: a free one); OSError when it cannot listen there."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise OSError(f"cannot resolve {host}: {e.strerror}") from None
    family, _, _, _, sockaddr = infos[0]

    class Server(_Server):
        address_family = family

    return MetricsServer(make_server(str(sockaddr[0]), port, app(registry, health), Server, handler_class=_Quiet))
