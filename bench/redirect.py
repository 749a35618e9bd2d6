"""mitmproxy script for the bench: send every flow to the bench upstream on 127.0.0.1, keeping the Host.

The same job as ``tests/e2e/loopback_upstream.py`` (load it AFTER llmfix, so llmfix still sees the
real host such as api.x.ai), plus one thing the bench needs: a request whose body mitmproxy streams
(the SSE baseline runs bare mitmdump with ``stream_large_bodies=1``, which also streams request
bodies) connects upstream before the ``request`` hook, so it is redirected in ``requestheaders``.
Every proxy of the bench loads this script, so the only difference between them is llmfix.
"""

import logging

from mitmproxy import ctx, exceptions, http
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

LOOPBACK = "127.0.0.1"
logger = logging.getLogger(__name__)


class BenchRedirect:
    def __init__(self) -> None:
        self.port: int | None = None

    def load(self, loader) -> None:
        loader.add_option("bench_upstream", str, "", "The bench upstream as 127.0.0.1:PORT.")

    def configure(self, updated: set[str]) -> None:
        if "bench_upstream" in updated:
            host, _, port = ctx.options.bench_upstream.rpartition(":")
            if ctx.options.bench_upstream and (host != LOOPBACK or not port.isdigit()):
                raise exceptions.OptionsError(
                    f"bench_upstream must be 127.0.0.1:PORT, not {ctx.options.bench_upstream!r}")
            self.port = int(port) if port else None

    def _redirect(self, flow: http.HTTPFlow) -> None:
        if self.port is None:
            flow.kill()
            return
        r = flow.request
        host_header = r.host_header
        r.scheme = "http"
        r.host = LOOPBACK
        r.port = self.port
        r.host_header = host_header

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.request.stream:  # set by stream_large_bodies: the server connection opens before `request`
            self._redirect(flow)

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response or flow.error or flow.request.stream:
            return
        self._redirect(flow)

    def server_connect(self, data: ServerConnectionHookData) -> None:
        address = data.server.address
        if address is None or address[0] != LOOPBACK:
            data.server.error = f"bench redirect: refusing non-loopback server {address}"
            logger.error(data.server.error)


addons = [BenchRedirect()]
