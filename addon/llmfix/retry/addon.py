"""The mitmproxy side of repair-and-retry: a known rejection → learn the flag → resend once.

When an LLM request's answer is 400/422 with a text :mod:`llmfix.retry.rejections` knows, the response
hook repairs the client's original request with the flags that avoid it and, only if that changes the
body, sends it again once through mitmproxy's own replay machinery (``ReplayHandler``): a copy of the
flow with the client's own headers, to the address the original went to (``flow.request`` after every
addon's request hook; upstream mode is kept), as a new flow marked as llmfix's resend. The client gets
the second answer; the first rejection stays in the flow's llmfix view (``metadata["llmfix"]["retry"]``).

Learned flags go to the memory (:class:`~llmfix.retry.learned.LearnedQuirks`), so the next request to
that upstream is repaired up front. Never in report mode (it logs what it would learn), never for a
resend itself (at most one per client request), never when ``llmfix_retry`` is false. The resent answer
is buffered, not streamed: see the README ("Repair and retry") for why.

Console line and JSONL record per retry carry the flow id, host, path, status, the rule's name and a
redacted excerpt of the error text: never a header value or a key.

A known rejection inside a 200 event stream (Gemini's ``{"error": …}`` chunk) cannot be resent: it is learned from
for the next request (:mod:`llmfix.retry.streamed`), and the response hook waits until it is.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from mitmproxy import command, ctx, http
from mitmproxy.addons.clientplayback import ReplayHandler

from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import named
from llmfix.proxy import RETRY_OF, ROUTE, UPSTREAM, flow_name
from llmfix.retry import rejections
from llmfix.retry.attempt import Attempt, client_request
from llmfix.retry.streamed import StreamRejections

if TYPE_CHECKING:
    from llmfix.proxy import LLMFix

logger = logging.getLogger("llmfix")

class Retry:
    def __init__(self, fix: LLMFix) -> None:
        self.fix = fix
        self.enabled = True
        self.streamed = StreamRejections(fix, lambda: self.enabled)
        fix.watch_stream_errors(self.streamed.seen)

    def load(self, loader: Any) -> None:
        loader.add_option(
            "llmfix_retry", bool, True,
            "When an LLM request's answer is a 400/422 whose text llmfix knows, learn the profile flag that "
            "avoids it for that upstream (host and port), repair the request with it and send it again, once. "
            "The learned flag is kept in llmfix_memory and applied up front to later requests.",
        )

    def configure(self, updated: set[str]) -> None:
        if "llmfix_retry" in updated:
            self.enabled = bool(ctx.options.llmfix_retry)

    # -- commands ----------------------------------------------------------------------------------------
    @command.command("llmfix.quirks")
    def list_quirks(self) -> str:
        """List the upstream quirks llmfix has learned from rejections."""
        quirks = self.fix.learned()
        lines = [
            f"{q.host}:{q.port} {q.dialect} {q.flag}={str(q.value).lower()} "
            f"(learned {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(q.learned_at))} from {q.reason})"
            for q in quirks
        ] or ["no learned quirks"]
        for line in lines:
            logger.info("llmfix quirk: %s", line)
        return "\n".join(lines)

    @command.command("llmfix.forget")
    def forget(self, host: str = "") -> str:
        """Forget the quirks learned for HOST (all hosts when empty)."""
        n = self.fix.forget(host or None)
        message = f"llmfix: forgot {n} learned quirk(s){f' of {host}' if host else ''}"
        logger.info(message)
        return message

    # -- hooks -------------------------------------------------------------------------------------------
    async def response(self, flow: http.HTTPFlow) -> None:
        await self.streamed.settle(flow)  # a rejection inside its stream is learned before the client sees the end
        if RETRY_OF in flow.metadata or not self.enabled or not flow.live:
            return  # a flow read from a file (``mitmdump -nr``) is never resent: offline means no traffic
        dialect, upstream, resp = flow.metadata.get(ROUTE), flow.metadata.get(UPSTREAM), flow.response
        if dialect is None or upstream is None or resp is None or resp.status_code not in rejections.STATUSES:
            return
        settings = self.fix.settings
        if settings.mode == "off" or settings.quirks is None or flow.request.raw_content is None:
            return
        try:
            found = rejections.match(named(dialect), resp.status_code, resp.get_content(strict=False) or b"")
            if found is not None:
                await self._retry(flow, found)
        except Exception as e:  # a bug in llmfix: the client still gets the upstream's answer
            logger.warning("llmfix: %s: retry failed, the client gets the upstream's answer: internal error: %s: %s",
                           flow_name(flow), type(e).__name__, e, exc_info=True)

    async def _retry(self, flow: http.HTTPFlow, found: rejections.Match) -> None:
        dialect = named(flow.metadata[ROUTE])
        status = flow.response.status_code if flow.response else 0
        attempt = Attempt(self.fix, flow, dialect, found, status, client_request(flow, dialect))
        if await attempt.decide(flow.request.raw_content or b"") is None:
            return attempt.give_up()
        first = flow.response
        assert first is not None
        wire = attempt.begin(first.get_content(strict=False) or b"")
        answer = await self._resend(flow, wire, dialect)
        attempt.record["resend_flow"] = answer.id
        if answer.response is None:
            why = answer.error.msg if answer.error else "no answer"
            return attempt.end("error", None, f"resend failed ({why}): the client gets the first rejection",
                               answered=False)
        again = rejections.match(dialect, answer.response.status_code, answer.response.get_content(strict=False) or b"")
        self._take(flow, answer, wire)
        attempt.report()  # the client's flow now shows the resent body
        attempt.end(answer.response.status_code, again, f"resent once → {answer.response.status_code}")

    async def _resend(self, flow: http.HTTPFlow, wire: bytes, dialect: Dialect) -> http.HTTPFlow:
        """Send ``wire`` with the client's headers to where ``flow`` went; the finished resend flow."""
        copy = flow.copy()
        copy.metadata = {RETRY_OF: flow.id, ROUTE: str(dialect)}
        copy.response = None
        copy.error = None
        copy.is_replay = "request"
        copy.marked = ":repeat:"
        copy.comment = f"llmfix: resend of {flow.id[:8]} after its {flow.response.status_code if flow.response else ''}"
        copy.request.raw_content = wire
        if "transfer-encoding" not in copy.request.headers:
            copy.request.headers["content-length"] = str(len(wire))
        await ReplayHandler(copy, ctx.options).replay()
        return copy

    def _take(self, flow: http.HTTPFlow, answer: http.HTTPFlow, wire: bytes) -> None:
        """The client's flow now shows what was resent and its answer; tool calls in a streamed answer are learned."""
        assert answer.response is not None
        flow.request.raw_content = wire
        if "transfer-encoding" not in flow.request.headers:
            flow.request.headers["content-length"] = str(len(wire))
        flow.response = answer.response
        resp = answer.response
        if resp.headers.get("content-type", "").lower().startswith("text/event-stream") and resp.raw_content:
            learner = self.fix.learner(flow, str(answer.metadata[ROUTE]), resp.headers.get("content-encoding"))
            learner.feed(resp.raw_content)
            learner.feed(b"")
