"""The mitmproxy side of llmfix's metrics: the ``llmfix_metrics`` option, and the server's whole life.

``--set llmfix_metrics=HOST:PORT`` (``[::1]:9464`` for IPv6; port 0 picks a free one, the log line says which)
serves ``/metrics`` and ``/healthz`` there (:mod:`llmfix.metrics.server`). Unset (the default) nothing listens and
nothing is counted: no listener is subscribed to :mod:`llmfix.events`.

``configure`` checks the value itself (mitmproxy silently ignores a mistyped ``--set`` of a script's option) and
binds at once: a malformed value, a host that does not resolve or a port that is taken raises ``OptionsError``
naming the option, which stops startup. A new value binds its server first and only then stops the old one, so a
value refused at run time leaves the old server serving. ``done`` (mitmproxy's shutdown, or a reload of the script)
stops the server and unsubscribes: no thread or port outlives the addon, and a reloaded addon binds the same port
afresh with a registry of its own.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

from mitmproxy import ctx, exceptions

from llmfix import events
from llmfix.metrics import server
from llmfix.metrics.families import Families
from llmfix.metrics.health import Health

logger = logging.getLogger("llmfix")

OPTION = "llmfix_metrics"
HELP = ("Serve Prometheus metrics at http://HOST:PORT/metrics and a health check at /healthz (e.g. 127.0.0.1:9464, "
        "[::1]:9464; port 0: a free port, logged). Unset: nothing listens.")
_HOST = re.compile(r"\A[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?\Z")


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` → (host, port); ValueError saying what is wrong."""
    text = value.strip()
    if "://" in text:
        raise ValueError(f"{OPTION} is HOST:PORT (the paths are /metrics and /healthz), not a URL: {value!r}")
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{OPTION} must be HOST:PORT, e.g. 127.0.0.1:9464, not {value!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if not host or not re.fullmatch(r"[0-9A-Fa-f:.]+", host):
            raise ValueError(f"{OPTION}: {value!r} does not hold an IPv6 address in its brackets")
    elif ":" in host:
        raise ValueError(f"{OPTION}: write an IPv6 address in brackets, e.g. [::1]:9464, not {value!r}")
    elif not _HOST.match(host):
        raise ValueError(f"{OPTION}: {host!r} is not a host name or address (in {value!r})")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{OPTION}: the port must be a number from 0 to 65535, not {port_text!r} (in {value!r})")
    return host, int(port_text)


class Metrics:
    def __init__(self) -> None:
        self.families = Families()
        self.health = Health(lambda: self.families.memory)
        self.server: server.MetricsServer | None = None
        self._spec: tuple[str, int] | None = None
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def url(self) -> str | None:
        """``http://HOST:PORT`` the metrics are served on (None: not served)."""
        return self.server.url if self.server is not None else None

    def load(self, loader: Any) -> None:
        loader.add_option(OPTION, str | None, None, HELP)

    def configure(self, updated: set[str]) -> None:
        if OPTION not in updated:
            return
        value = ctx.options.llmfix_metrics
        try:
            spec = parse_address(value) if value else None
        except ValueError as e:
            raise exceptions.OptionsError(str(e)) from e
        if spec == self._spec and (spec is None or self.server is not None):
            return
        new = None
        if spec is not None:
            try:
                new = server.start(*spec, self.families.registry, self.health)
            except OSError as e:
                raise exceptions.OptionsError(f"{OPTION}: cannot listen on {value}: {e.strerror or e}") from e
        self._stop()
        self.server, self._spec = new, spec
        if new is None:
            return
        self._unsubscribe = events.subscribe(self.families.observe)
        if (last := events.last_memory_state()) is not None:  # the memory opened before this listener
            self.families.observe(last)
        logger.info("llmfix metrics: serving %s/metrics and %s/healthz", new.url, new.url)

    def running(self) -> None:
        """The proxy is up: from now on the health check asks its event loop (until then it says "starting")."""
        self.health.loop = asyncio.get_running_loop()

    def done(self) -> None:
        self.health.stopping = True
        self._stop()
        self._spec = None

    def _stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self.server is not None:
            self.server.stop()
            logger.info("llmfix metrics: stopped serving %s", self.server.url)
            self.server = None
