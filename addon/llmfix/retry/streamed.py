"""A known rejection inside a 200 event stream: recognised and learned from, never resent.

Gemini may answer ``200 text/event-stream`` and report the rejection inside the stream, as a bare JSON chunk
``{"error": {"code": 400, "message": …, "status": "INVALID_ARGUMENT"}}`` with no ``data:`` (Google's SDKs look for
it in every chunk: googleapis/js-genai ``processStreamResponse`` throws on an ``error`` key with a code of 400–599;
googleapis/python-genai ``_api_client.py``: "When API returns an error message, it comes line by line"), or as a
``data:`` event holding one. The stream learner (:mod:`llmfix.memory.learn`) hands each such event here through
``LLMFix.watch_stream_errors``; its text is read like any error body (:func:`llmfix.retry.rejections.match`, the
status from the error's ``code``).

By then the answer has begun reaching the client: it cannot be taken back, and llmfix does not resend. It learns what
a rejection answered with that status would teach (:func:`llmfix.retry.decide.decide`: the flags that change the
body, or the facts about it) so that the client's next request is repaired up front, and says so in one console line
naming the flow and the rule, one JSONL record (``"event": "stream-rejection"``) and a line in the flow's comment
(:meth:`llmfix.retry.attempt.Attempt.learn_unsent`). The decision runs as a task of its own as soon as the error is
seen (the stream callable must return at once, and must never raise: a raise drops the chunk), and the response hook
waits for it: mitmproxy ends the client's stream only after that hook, so the client cannot send its next request
before the lesson is learned (a client that closes early does not stop the task either).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from mitmproxy import http

from llmfix.dialects.registry import named
from llmfix.memory.learn import error_of
from llmfix.proxy import ROUTE, UPSTREAM
from llmfix.report.flowinfo import flow_name
from llmfix.retry import rejections
from llmfix.retry.attempt import Attempt, client_request
from llmfix.retry.rules import Match

if TYPE_CHECKING:
    from llmfix.proxy import LLMFix

logger = logging.getLogger("llmfix")

SEEN = "llmfix_stream_rejection"
"""flow.metadata key: the rule of the rejection seen inside the flow's stream (one is learned from per answer)."""


def status_of(event: bytes) -> int | None:
    """The HTTP status an error event states (its error's ``code``: ``400``, or ``"400"``), None if it states none."""
    error = error_of(event)
    code = error.get("code") if error is not None else None
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    return code if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599 else None


class StreamRejections:
    """The rejections seen inside routed SSE answers, each decided and learned from in a task the response hook
    waits for. ``enabled()``: whether repair-and-retry is on (``llmfix_retry``)."""

    def __init__(self, fix: LLMFix, enabled: Callable[[], bool]) -> None:
        self.fix = fix
        self._enabled = enabled
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def seen(self, flow: http.HTTPFlow, event: bytes) -> None:
        """An error event inside the answer of ``flow`` (called by the stream learner, on the event loop): a known
        rejection starts its task; anything else passes as it is."""
        settings = self.fix.settings
        if (SEEN in flow.metadata or not self._enabled() or not flow.live or settings.mode == "off"
                or settings.quirks is None or flow.request.raw_content is None):
            return
        dialect, upstream = flow.metadata.get(ROUTE), flow.metadata.get(UPSTREAM)
        status = status_of(event)
        if dialect is None or upstream is None or status is None:
            return
        found = rejections.match(named(dialect), status, event)
        if found is None:
            return
        flow.metadata[SEEN] = found.rule.name
        task = asyncio.get_running_loop().create_task(self._learn(flow, found, status))
        self._tasks[flow.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(flow.id, None))

    async def settle(self, flow: http.HTTPFlow) -> None:
        """Wait until what the stream of ``flow`` taught is learned (nothing to wait for: returns at once)."""
        task = self._tasks.get(flow.id)
        if task is not None:
            await asyncio.shield(task)  # the hook may be cancelled; the lesson is still learned

    async def _learn(self, flow: http.HTTPFlow, found: Match, status: int) -> None:
        try:
            dialect = named(flow.metadata[ROUTE])
            attempt = Attempt(self.fix, flow, dialect, found, status, client_request(flow, dialect), streamed=True)
            await attempt.decide(flow.request.raw_content or b"")
            attempt.learn_unsent()
        except Exception as e:  # a bug in llmfix: the answer went on as it came; nothing is learned
            logger.warning("llmfix: %s: the rejection inside its 200 stream was not learned from: internal error: "
                           "%s: %s", flow_name(flow), type(e).__name__, e, exc_info=True)
