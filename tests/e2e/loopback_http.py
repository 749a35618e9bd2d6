"""A threaded HTTP server on 127.0.0.1 (a free port) for the test doubles that answer llmfix or its client: started
by ``with``, shut down and its thread joined (bounded) on the way out."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class LoopbackHTTP:
    """Serves ``handler`` on a daemon thread while in a ``with`` block."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"  # bound already: the port is known
        self.url = f"http://{self.address}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
