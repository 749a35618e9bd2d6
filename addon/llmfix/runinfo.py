"""What the launcher (``llmfix -- CLIENT``, :mod:`llmfix.cli`) needs to know from the mitmdump it started.

A small mitmproxy addon, loaded by the launcher's script after :class:`llmfix.proxy.LLMFix` (so its
``request`` hook sees what LLMFix decided). Two options, both empty (off) unless the launcher sets them:

- ``llmfix_ready_file``: once startup has passed mitmdump's last error check, a JSON file saying where
  each proxy mode listens, which confdir (so which CA) is in use, where the JSONL change log goes and where
  the metrics are served (``llmfix_metrics``).
  Written atomically; its existence means "ready".
- ``llmfix_summary_file``: at ``done``, a JSON file with this run's counts: HTTP requests, LLM API
  requests, and requests repaired (or, in report mode, that would be), per repair. A request carried by a
  Responses WebSocket message counts like one carried by an HTTP request.

Nothing here touches a flow. Counting reads the flow metadata LLMFix sets (the dialect it routed, its
report); writing a file that fails logs one warning and changes nothing else.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import Counter
from typing import Any

from mitmproxy import ctx, http

from llmfix.proxy import ROUTE
from llmfix.report.flowinfo import MESSAGE_INFO, META, SOCKET
from llmfix.websocket import REQUESTS, message_type

logger = logging.getLogger("llmfix")

OPTIONS: tuple[tuple[str, Any, Any, str], ...] = (
    ("llmfix_ready_file", str, "",
     "Set by the llmfix launcher: write a JSON file saying where llmfix listens once startup has finished."),
    ("llmfix_summary_file", str, "",
     "Set by the llmfix launcher: write this run's request and repair counts to this JSON file at exit."),
)
ERRORCHECK_POLL_S = 0.01
ERRORCHECK_MAX_S = 5.0


def write_json(path: str, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (a reader never sees half a file)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


class Tally:
    """Counts of one run; ``summary()`` is what goes into the summary file."""

    def __init__(self) -> None:
        self.http = 0
        self.llm = 0
        self.repaired = 0
        self.by_repair: Counter[str] = Counter()
        self.mode = "repair"

    def count(self, flow: http.HTTPFlow) -> None:
        self.http += 1
        if flow.metadata.get(ROUTE) is None:
            return
        self.llm += 1
        report = flow.metadata.get(META)
        if report:
            self.repaired += 1
            self.mode = report.get("mode", self.mode)
            self.by_repair.update(report.get("repairs", ()))

    def count_message(self, flow: http.HTTPFlow) -> None:
        """A WebSocket message: a request when it is a ``response.create`` on a socket llmfix watches."""
        assert flow.websocket is not None
        index = len(flow.websocket.messages) - 1
        message = flow.websocket.messages[index]
        if (flow.metadata.get(SOCKET) is None or not message.from_client or message.injected
                or message_type(message.content) not in REQUESTS):
            return
        self.http += 1
        self.llm += 1
        report = flow.metadata.get(MESSAGE_INFO, {}).get(str(index))
        if report:
            self.repaired += 1
            self.mode = report.get("mode", self.mode)
            self.by_repair.update(report.get("repairs", ()))

    def summary(self) -> dict[str, Any]:
        return {"http_requests": self.http, "llm_requests": self.llm, "repaired": self.repaired,
                "mode": self.mode, "by_repair": dict(sorted(self.by_repair.items()))}


class RunInfo:
    def __init__(self) -> None:
        self.tally = Tally()
        self._ready_task: asyncio.Task[None] | None = None

    def load(self, loader: Any) -> None:
        for name, typespec, default, help_text in OPTIONS:
            loader.add_option(name, typespec, default, help_text)

    def running(self) -> None:
        if ctx.options.llmfix_ready_file:
            self._ready_task = asyncio.get_running_loop().create_task(self._announce())

    async def _announce(self) -> None:
        """Write the ready file once mitmdump's startup error check is over (it exits on an error)."""
        errorcheck = ctx.master.addons.get("errorcheck")
        handlers = logging.getLogger().handlers
        waited = 0.0
        while errorcheck is not None and errorcheck.logger in handlers and waited < ERRORCHECK_MAX_S:
            await asyncio.sleep(ERRORCHECK_POLL_S)
            waited += ERRORCHECK_POLL_S
        self._write(ctx.options.llmfix_ready_file, self.ready_info())

    def ready_info(self) -> dict[str, Any]:
        servers = []
        proxyserver = ctx.master.addons.get("proxyserver")
        for server in proxyserver.servers if proxyserver else ():
            servers.append({"mode": server.mode.full_spec, "type": server.mode.type_name,
                            "addrs": [list(a[:2]) for a in server.listen_addrs]})
        metrics = ctx.master.addons.get("metrics")  # llmfix.metrics.addon.Metrics
        return {"pid": os.getpid(), "confdir": os.path.expanduser(ctx.options.confdir), "servers": servers,
                "log": ctx.options.llmfix_log, "metrics": getattr(metrics, "url", None)}

    def request(self, flow: http.HTTPFlow) -> None:
        self.tally.count(flow)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        self.tally.count_message(flow)

    def done(self) -> None:
        if ctx.options.llmfix_summary_file:
            self._write(ctx.options.llmfix_summary_file, {**self.tally.summary(), "log": ctx.options.llmfix_log})

    @staticmethod
    def _write(path: str, data: Any) -> None:
        try:
            write_json(path, data)
        except OSError as e:
            logger.warning("llmfix: cannot write %s: %s", path, e.strerror or e)
