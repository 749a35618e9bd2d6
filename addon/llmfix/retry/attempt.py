"""One rejected request's repair and retry, whatever carried it: an HTTP flow, or a message on a WebSocket.

The transports differ only in how the repaired request is sent again and when its answer is known: mitmproxy's
replay for HTTP, with the answer in hand (:mod:`llmfix.retry.addon`), or ``inject.websocket`` on the same socket,
its answer a later terminal event (:mod:`llmfix.websocket`). Everything else is written here, once: what the
rejection teaches and the repaired request (:func:`llmfix.retry.decide.decide`), learning it just before the
resend goes out, the report of the resent request, the flow's record of the retry (the llmfix views show it), its
comment, one console line and one JSONL record, and what the resend's answer means for what was learned
(:func:`llmfix.retry.decide.settle`). Never a header value or a key: the error text is a redacted excerpt.

A rejection that came inside an answer already streaming to the client (``streamed``) cannot be resent:
:meth:`Attempt.learn_unsent` learns what the resend would have taught, so the next request is repaired up front.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mitmproxy import ctx, http
from mitmproxy.hooks import UpdateHook

from llmfix import engine, events
from llmfix.dialects.base import Dialect
from llmfix.proxy import UPSTREAM
from llmfix.report import views
from llmfix.report.flowinfo import MESSAGE_INFO, flow_name
from llmfix.retry import decide
from llmfix.retry.rules import Match

if TYPE_CHECKING:
    from llmfix.proxy import LLMFix

logger = logging.getLogger("llmfix")
UNSENT = "not resent (the answer was already streaming to the client): the next request is repaired up front"


def client_request(flow: http.HTTPFlow, dialect: Dialect) -> engine.Request:
    """The request of ``flow`` as its client sent it (the body llmfix kept before repairing it), to the upstream it
    was routed to; no media-window key (trying flags is not a request in flight)."""
    _, host, port = flow.metadata[UPSTREAM]
    info = flow.metadata.get(views.META) if isinstance(flow.metadata.get(views.META), dict) else {}
    raw = info.get("original") or flow.request.raw_content
    return engine.request(dialect, host, port, flow.request.path, raw, flow.request.headers.get("content-encoding"),
                          None)


@dataclass
class Attempt:
    """A known rejection of ``req`` (the request as the client sent it; its host and port: the upstream it went to),
    answered ``status``; ``message``: the index of the WebSocket message that carried it (None: the flow's HTTP
    request)."""

    fix: LLMFix
    flow: http.HTTPFlow
    dialect: Dialect
    found: Match
    status: int
    req: engine.Request
    message: int | None = None
    streamed: bool = False
    """The rejection came inside a 200 answer already streaming to the client: nothing can be resent."""
    decision: decide.Decision | None = None
    record: dict[str, Any] = field(default_factory=dict)
    """What the llmfix views show of this retry, under the request's record (``"retry"``)."""

    async def decide(self, sent: bytes) -> engine.Outcome | None:
        """Work out what the rejection teaches and the repaired request (None: nothing to resend, logged by
        :meth:`give_up`). ``sent``: the wire bytes llmfix sent and the upstream rejected."""
        self.decision = await decide.decide(self.found, self.status, self.req, sent, self.fix.settings, self.fix.run)
        return self.decision.outcome

    def give_up(self, why: str | None = None) -> None:
        """Nothing is resent: logged once, with ``why`` (default: the decision's); nothing is learned that no
        resend proved."""
        d = self._decision
        if why is not None:
            d.outcome, d.why, d.event["learned"] = None, why, []
        self.log(d.why)

    def learn_unsent(self) -> None:
        """For a ``streamed`` rejection: learn what the resend would have taught (the flags that change the body, or
        the facts about it: exactly what a rejection answered with its status would teach), note it on the flow and
        log it once. Nothing is learned where nothing would have been resent (report mode, no change)."""
        d = self._decision
        learned = f"learned {views.learned_text(d.event['learned'])}"
        if d.outcome is not None:
            decide.learn(d, self.fix.settings)
            result = UNSENT
        elif self.fix.settings.mode != "repair" and d.why.startswith("report mode"):
            result, learned = "report mode: would learn it for the next request", f"would have {learned}"
        else:
            result, learned = d.why, "learned nothing"
        note = f"llmfix: rejected inside its 200 stream ({self.found.rule.name}) → {learned}"
        self.flow.comment = f"{self.flow.comment}\n{note}" if self.flow.comment else note
        self._show()
        self.log(result)

    def begin(self, first: bytes) -> bytes:
        """Learn what the rejection teaches and note the retry; the repaired request to send (``first``: the
        rejection's body, shown redacted in the llmfix views)."""
        d = self._decision
        assert d.outcome is not None and d.outcome.wire is not None
        decide.learn(d, self.fix.settings)
        d.event["resent"] = True
        self.record.update({"status": self.status, "rule": self.found.rule.name, "error": d.event["error"],
                            "learned": d.event["learned"], "first_response": views.pretty_redacted(first),
                            "resend_flow": self.flow.id, "outcome": "pending"})
        return d.outcome.wire

    def report(self) -> None:
        """Report the resent request on the client's flow (console, JSONL, mitmweb) and show the retry there."""
        d = self._decision
        assert d.outcome is not None
        self.fix.report(self.flow, self.req, d.outcome, "repair", message=self.message)
        self._show()

    def end(self, outcome: str | int, again: Match | None, result: str, *, answered: bool = True) -> None:
        """The resend's answer is known: ``outcome`` (a status, a terminal event, ``error``), ``again`` the known
        rejection it is (None: none), ``result`` what the log says of it; ``answered`` False: no answer came (what
        was learned stays, the client gets the first rejection)."""
        d = self._decision
        if answered:
            decide.settle(d, self.fix.settings, again)
        if again is not None:
            result += f" ({again.rule.name} again: the client gets it)"
        d.event["outcome"] = self.record["outcome"] = outcome
        where = "" if self.message is None else f"message {self.message} "
        note = f"llmfix: {where}retried after {self.status} {self.found.rule.name} → {outcome}"
        self.flow.comment = f"{self.flow.comment}\n{note}" if self.flow.comment else note
        self._show()
        self.log(result)

    def log(self, result: str) -> None:
        """One console line and one JSONL record for this retry."""
        event = self._decision.event
        events.retried(str(self.dialect), event, self.message is not None)
        learned = views.learned_text(event["learned"])
        host, port = self.flow.metadata[UPSTREAM][1:]
        mode = self.fix.settings.mode
        report = "" if mode == "repair" else " (report)"
        name = flow_name(self.flow)
        where = name if self.message is None else f"{name} message {self.message}"
        what = "rejected inside its 200 stream" if self.streamed else "retry"
        logger.info("llmfix%s: %s %s: %s %s \"%s\" → learned %s for %s:%s (%s); %s", report, where, what,
                    event["status"], event["rejection"], event["error"], learned, host, port, self.dialect, result)
        r = self.flow.request
        self.fix.record([{"ts": round(time.time(), 3), "flow": self.flow.id, "method": r.method, "host": host,
                          "port": port, "path": r.path.split("?", 1)[0], "dialect": str(self.dialect), "mode": mode,
                          **({} if self.message is None else {"transport": "websocket", "message": self.message}),
                          "event": "stream-rejection" if self.streamed else "retry", **event, "result": result}])

    @property
    def _decision(self) -> decide.Decision:
        assert self.decision is not None, "decide() first"
        return self.decision

    def _show(self) -> None:
        """The retry's record under the request's own (the report may have replaced that), and mitmweb told: it
        refreshes a flow's mark and comment on update events only."""
        if self.record:
            if self.message is None:
                info = self.flow.metadata.setdefault(views.META, {})
            else:
                info = self.flow.metadata.setdefault(MESSAGE_INFO, {}).setdefault(str(self.message), {})
            info["retry"] = self.record
        ctx.master.addons.trigger(UpdateHook([self.flow]))
