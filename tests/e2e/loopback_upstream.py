"""mitmproxy script for e2e tests: send every flow to the loopback mock upstream, and nowhere else.

Load it AFTER the addon under test (``mitmdump -s addon/fix.py -s tests/e2e/loopback_upstream.py
--set loopback_upstream=127.0.0.1:PORT``), so that addon still sees the real host (api.x.ai, ...).

- ``request``: leaves requests already addressed to 127.0.0.1 alone (gateway test doubles); for every
  other one, records the original host in ``x-llmfix-test-original-host`` (the mock picks its rules
  from it), then points the flow at ``http://127.0.0.1:PORT`` keeping the path and the Host header.
- ``server_connect``: refuses any server connection that is not to 127.0.0.1, so a test can never
  reach the internet, whatever the option says or another addon does.
"""

import logging

from mitmproxy import exceptions, http
from mitmproxy.addonmanager import Loader
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

ORIGINAL_HOST_HEADER = "x-llmfix-test-original-host"
LOOPBACK = "127.0.0.1"

logger = logging.getLogger(__name__)


def parse_target(spec: str) -> int:
    """The port of ``127.0.0.1:PORT``; raises ValueError for anything else."""
    host, _, port = spec.rpartition(":")
    if host != LOOPBACK or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected {LOOPBACK}:PORT, got {spec!r}")
    return int(port)


class LoopbackUpstream:
    """Redirects flows to the mock upstream and blocks every non-loopback server connection."""

    def __init__(self) -> None:
        self.port: int | None = None

    def load(self, loader: Loader) -> None:
        loader.add_option(
            "loopback_upstream", str, "",
            "Mock upstream as 127.0.0.1:PORT; every request is sent there (empty: requests fail).",
        )

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx

        if "loopback_upstream" not in updated:
            return
        spec = ctx.options.loopback_upstream
        try:
            self.port = parse_target(spec) if spec else None
        except ValueError as e:
            raise exceptions.OptionsError(f"Cannot parse loopback_upstream option: {e}") from e

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response or flow.error:
            return
        if self.port is None:
            flow.kill()
            logger.error("loopback_upstream is not set: killed %s", flow.request.pretty_url)
            return
        if flow.request.host == LOOPBACK:
            return  # already on this machine (a gateway test double): leave it where it goes
        original_host, host_header = flow.request.host, flow.request.host_header
        flow.request.headers[ORIGINAL_HOST_HEADER] = original_host
        flow.request.scheme = "http"
        flow.request.host = LOOPBACK
        flow.request.port = self.port
        flow.request.host_header = host_header  # the mock sees the Host the client sent

    def server_connect(self, data: ServerConnectionHookData) -> None:
        server = data.server
        addresses = [server.address, server.via[1] if server.via else None]
        for address in addresses:
            if address is not None and address[0] != LOOPBACK:
                server.error = f"loopback_upstream: refusing non-loopback server {address[0]}:{address[1]}"
                logger.error(server.error)
                return
        if server.address is None:
            server.error = "loopback_upstream: refusing a server connection without an address"
            logger.error(server.error)


addons = [LoopbackUpstream()]
