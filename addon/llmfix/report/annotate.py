"""What a repaired request leaves behind: one console line per change, one JSONL record per change, and in mitmweb
a mark, a comment and the record the llmfix views show (``flow.metadata``), for an HTTP request or each
WebSocket message that carried one. Every transport reports through :func:`report`, so all read alike."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mitmproxy import http

from llmfix import events
from llmfix.report import changelog, views
from llmfix.report.flowinfo import MESSAGE_INFO, flow_name

if TYPE_CHECKING:
    from llmfix.engine import Outcome, Request

logger = logging.getLogger("llmfix")

MARKS = {"repair": ":wrench:", "report": ":mag:"}


def report(flow: http.HTTPFlow, req: Request, outcome: Outcome, mode: str, log: changelog.JsonlLog | None,
           message: int | None = None) -> None:
    """Console, JSONL (``log``), mitmweb for a repaired request; ``message``: the index, in
    ``flow.websocket.messages``, of the WebSocket message that carried it (None: the flow's HTTP request)."""
    events.repaired(req, outcome, mode, message)
    names = outcome.repairs
    verb = "" if mode == "repair" else "would "
    where = flow_name(flow) if message is None else f"{flow_name(flow)} message {message}"
    prefix = f"llmfix{'' if mode == 'repair' else ' (report)'}: {where}"
    changelog.console(prefix, outcome.changes, flow.client_conn.peername if flow.live else None, outcome.lines)
    if log is not None:
        context = {
            "flow": flow.id, "method": flow.request.method, "host": flow.request.pretty_host,
            "path": flow.request.path.split("?", 1)[0], "dialect": str(req.dialect),
            "profile": outcome.profile, "model": outcome.model, "mode": mode,
        }
        if message is not None:
            context |= {"transport": "websocket", "message": message}
        try:
            log.write(changelog.records(context, outcome.changes, outcome.records))
        except OSError as e:
            logger.warning("llmfix: cannot write change log %s: %s", log.path, e)
    flow.marked = MARKS[mode]
    n = len(outcome.changes)
    note = f"llmfix: {verb}{', '.join(names)} ({n} change{'s' if n != 1 else ''})"
    info = {
        "mode": mode,
        "repairs": names,
        "profile": outcome.profile,
        "model": outcome.model,
        "lines": list(outcome.lines) or [c.line() for c in outcome.changes],
        "changes": list(outcome.records) or [c.record() for c in outcome.changes],
        "before": list(outcome.before),
        "after": list(outcome.after),
        "original": req.raw if mode == "repair" else None,
    }
    if message is not None:  # one line per repaired message of the socket, each message its own diff
        note += f" in message {message}"
        flow.comment = f"{flow.comment}\n{note}" if flow.comment else note
        flow.metadata.setdefault(MESSAGE_INFO, {})[str(message)] = info
        return
    flow.comment = f"{flow.comment}\n{note}" if flow.comment and "llmfix:" not in flow.comment else note
    flow.metadata[views.META] = info
