"""The Responses API over a WebSocket: the same repairs, memory and log as over HTTP, message by message.

Codex (0.171, its built-in ``openai`` provider) speaks the Responses API over ``wss://…/v1/responses`` before
HTTPS: one upgrade per session, then one text message per request, ``{"type": "response.create", …the
Responses body's fields…}``, answered by one text message per stream event (the JSON of an SSE ``data:``
line). The first message of a socket carries the whole history; later ones chain on ``previous_response_id``
with only the new items (the server keeps the chain for that socket, even with ``store: false``). Codex also
sends ``{"type": "response.processed", "response_id": …}`` acknowledgements, which carry no request.

This addon (mitmproxy's ``websocket_start`` / ``websocket_message`` / ``websocket_end``) recognises a
Responses WebSocket by its upgrade (``GET …/responses`` with ``Upgrade: websocket``) and:

- passes each ``response.create`` message through :func:`llmfix.engine.process` exactly like a ``POST
  …/responses`` body (``LLMFix.run``: same profile by host and dialect, same repairs, same fast path, a large
  message in a worker thread). Untouched messages keep their bytes; a repaired one gets its new text before
  mitmproxy forwards it; one llmfix cannot read goes on unchanged with one warning naming the flow and the
  message. A message with ``previous_response_id`` continues server-side state: the engine leaves the history
  repairs alone then (``server_state``), as for HTTP. The change is reported like a repaired request's
  (console line, JSONL record with ``"transport": "websocket"`` and the message's index, the flow marked and
  commented, the diff in the ``llmfix diff`` view of that message);
- learns from each server message as from an SSE event (``LLMFix.learner(flow, "responses")`` and
  ``feed_event``), never delaying or altering it, and ends the learner with the socket;
- keeps each request's entry in the media window (restore-tool-media) open until its answer ends (a terminal
  event: ``response.completed`` / ``.failed`` / ``.incomplete`` or ``error``), or the socket does.

Repair-and-retry. A rejection arrives as an ``error`` event on the socket, ``{"type": "error", "status": 400,
"error": {"type", "code", "message", "param"}}`` (codex-api's ``WrappedWebsocketErrorEvent``: Codex turns it
into the HTTP error of that status and drops the socket). When it is a rejection llmfix knows
(:mod:`llmfix.retry.rejections`), :func:`llmfix.retry.decide.decide` works out the flags that avoid it and the
repaired message, as for HTTP, and:

- if the rejected message carried the whole history (no ``previous_response_id``), the error is held (never
  forwarded), the flags are learned and the repaired message is sent once on the same socket (mitmproxy's
  ``inject.websocket``); the client receives that answer's events instead. A second rejection reaches the
  client (and un-learns the flags, as over HTTP); the resend is never retried;
- if it chained on ``previous_response_id``, the error reaches the client unchanged and nothing is learned: a
  failed turn may have cost the server the state it chained on (the resend could only be refused for a missing
  ``previous_response_id``), and a flag is learned only when a resend proves it. Codex then opens a fresh
  socket, whose first message carries the whole history: that one is repaired, resent and learned from.

Report mode logs what would be learned and resent and forwards the error; ``llmfix_retry=false`` switches
retries off here too. Messages another addon injects (and llmfix's own resend) are not repaired again.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from mitmproxy import ctx, http
from mitmproxy.hooks import UpdateHook
from mitmproxy.proxy.layers.websocket import Fragmentizer
from mitmproxy.websocket import WebSocketMessage

from llmfix import engine, events, route
from llmfix.dialects.base import Dialect
from llmfix.memory.learn import StreamLearner
from llmfix.proxy import UPSTREAM, flow_name
from llmfix.report.flowinfo import SOCKET
from llmfix.retry import rejections
from llmfix.retry.attempt import Attempt

if TYPE_CHECKING:
    from llmfix.proxy import LLMFix

logger = logging.getLogger("llmfix")

REQUESTS = frozenset({"response.create"})
"""Client message types that carry a Responses request."""
NO_REQUEST = frozenset({"response.processed"})
"""Client message types known to carry none (Codex's acknowledgement of a response it has handled)."""
TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})
"""Server events that end the answer to the oldest request in flight."""
ONE_FRAME = 1 << 62
_TYPE = re.compile(rb'\A\s*\{\s*"type"\s*:\s*"([^"\\]{1,64})"')


def message_type(content: bytes) -> str | None:
    """The ``type`` of a JSON message: read from its head when it comes first (as Codex and OpenAI write it),
    else from the whole object; None when the message is not a JSON object with a string ``type``."""
    if m := _TYPE.match(content):
        return m.group(1).decode()
    try:
        value = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else None


@dataclass
class Sent:
    """A request message in flight: as the client sent it (``req``), and what llmfix sent (``wire``)."""

    index: int
    req: engine.Request | None  # None: another addon's injected request, answered in turn but never llmfix's
    wire: bytes
    retry: Attempt | None = None  # set on llmfix's resend: the retry that sent it
    response: str | None = None  # the id of the response the server created for it (``response.created``)


@dataclass
class Socket:
    dialect: Dialect  # the dialect its client messages carry
    learner: StreamLearner
    host: str
    port: int
    in_flight: deque[Sent] = field(default_factory=deque)
    injecting: deque[bytes] = field(default_factory=deque)  # llmfix's own resends, until they pass the hook
    warned: set[str] = field(default_factory=set)  # reasons already warned about on this socket


class ResponsesWebSocket:
    """The mitmproxy hooks of the Responses WebSocket transport; the work is :class:`~llmfix.proxy.LLMFix`'s."""

    def __init__(self, fix: LLMFix) -> None:
        self.fix = fix
        self.retry = False
        self._sockets: dict[str, Socket] = {}

    def load(self, loader: Any) -> None:
        # mitmproxy re-frames a changed (or injected) text message in pieces of FRAGMENT_SIZE bytes and decodes
        # each piece on its own: a character cut at a boundary arrives as U+FFFD (seen with mitmproxy 12.3: "é"
        # across byte 4000 became two). Its docstring asks addons that change messages to set the size: one
        # frame per message, as Codex itself sends them. The setting is process-wide: every addon's changed
        # WebSocket messages are then sent in one frame each too (never split, never garbled).
        Fragmentizer.FRAGMENT_SIZE = ONE_FRAME

    def configure(self, updated: set[str]) -> None:
        if "llmfix_retry" in updated:  # declared by llmfix.retry.addon; without that addon, no retries
            self.retry = bool(ctx.options.llmfix_retry)

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        r = flow.request
        dialect = route.upgrade_dialect(r.method, r.path, r.headers.get("upgrade"))
        if self.fix.settings.mode == "off" or dialect is None:
            return
        # where the upgrade went before any later addon re-pointed it (LLMFix.request noted it)
        _, host, port = flow.metadata.get(UPSTREAM) or (r.scheme, r.host, r.port)
        flow.metadata[SOCKET] = str(dialect)
        self._sockets[flow.id] = Socket(dialect, self.fix.learner(flow, str(dialect)), host, port)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        sock = self._sockets.pop(flow.id, None)
        if sock is None:
            return
        sock.learner.end()
        for sent in sock.in_flight:
            if sent.req is not None:
                self.fix.finished(sent.req.flow_id or "")

    async def websocket_message(self, flow: http.HTTPFlow) -> None:
        sock = self._sockets.get(flow.id)
        if sock is None or flow.websocket is None:
            return
        index = len(flow.websocket.messages) - 1
        message = flow.websocket.messages[index]
        try:
            if message.from_client:
                await self._request(flow, sock, message, index)
            else:
                await self._answer(flow, sock, message)
        except Exception as e:  # a bug in llmfix: the message goes on as it is, the proxy goes on
            logger.warning("llmfix: %s message %d left unchanged: internal error: %s: %s", flow_name(flow), index,
                           type(e).__name__, e, exc_info=True)

    # -- client → server -------------------------------------------------------------------------------

    async def _request(self, flow: http.HTTPFlow, sock: Socket, message: WebSocketMessage, index: int) -> None:
        if message.injected:  # llmfix's own resend (tracked when sent), or another addon's message
            if sock.injecting and sock.injecting[0] == message.content:
                sock.injecting.popleft()
            elif message.is_text and message_type(message.content) in REQUESTS:
                sock.in_flight.append(Sent(index, None, message.content))  # answered in turn: not ours to judge
            return
        if not message.is_text:
            return self._warn(flow, sock, index, "a binary message: not a Responses request llmfix knows")
        content = message.content
        kind = message_type(content)
        if kind in NO_REQUEST:
            return
        if kind not in REQUESTS:
            why = "not a JSON object with a type" if kind is None else f"client message type {kind!r}"
            return self._warn(flow, sock, index, f"{why}: not a Responses request llmfix knows")
        settings = self.fix.settings
        req = engine.Request(sock.dialect, sock.host, sock.port, content, None, f"{flow.id}/{index}")
        sent = Sent(index, req, content)
        sock.in_flight.append(sent)
        started = events.now()
        outcome = await self.fix.run(req, settings)
        events.request_seen("websocket", req, outcome, settings.mode, started)
        if outcome.status == "failed":
            logger.warning("llmfix: %s message %d left unchanged: %s", flow_name(flow), index, outcome.reason)
            return
        if outcome.status != "repaired":
            return
        if settings.mode == "repair" and outcome.wire is not None:
            message.content = sent.wire = outcome.wire
        self.fix.report(flow, req, outcome, settings.mode, message=index)
        _show(flow)

    def _warn(self, flow: http.HTTPFlow, sock: Socket, index: int, why: str) -> None:
        if why not in sock.warned:  # once per socket: a client sending many such messages gets one line
            sock.warned.add(why)
            logger.warning("llmfix: %s message %d left unchanged: %s", flow_name(flow), index, why)

    # -- server → client -------------------------------------------------------------------------------

    async def _answer(self, flow: http.HTTPFlow, sock: Socket, message: WebSocketMessage) -> None:
        content = message.content
        sock.learner.feed_event(content)  # observes only, never raises
        kind = message_type(content)
        if kind == "response.created":
            _created(sock, content)
        if kind not in TERMINAL:
            return
        sent = _answered(sock, content, kind)
        if sent is None or sent.req is None:
            return
        self.fix.finished(sent.req.flow_id or "")
        if kind == "error":
            await self._rejected(flow, sock, message, sent)
        elif sent.retry is not None:
            self._resent(sent, message, None)

    async def _rejected(self, flow: http.HTTPFlow, sock: Socket, message: WebSocketMessage, sent: Sent) -> None:
        """An error event for ``sent``: a known rejection of a whole history is repaired and sent again."""
        assert sent.req is not None
        event = _loads(message.content)
        status = event.get("status", event.get("status_code"))
        found = rejections.match(sock.dialect, status, message.content) if isinstance(status, int) else None
        if sent.retry is not None:
            return self._resent(sent, message, found)
        settings = self.fix.settings
        if found is None or not self.retry or settings.mode == "off" or settings.quirks is None:
            return
        assert isinstance(status, int)
        client = dataclasses.replace(sent.req, flow_id=None)  # trying flags is not a request in flight
        attempt = Attempt(self.fix, flow, sock.dialect, found, status, client, message=sent.index)
        if await attempt.decide(sent.wire) is None:
            return attempt.give_up()
        if _loads(sent.req.raw).get("previous_response_id"):
            return attempt.give_up("not resent: the message continues server-side state (previous_response_id) "
                                   "that the failed turn may have cost; the whole history on the client's next "
                                   "socket will be")
        wire = attempt.begin(message.content)
        message.drop()  # the client never sees this rejection: it gets the resend's answer
        sock.in_flight.appendleft(Sent(sent.index, sent.req, wire, attempt))
        sock.injecting.append(wire)
        ctx.master.commands.call("inject.websocket", flow, False, wire, True)
        attempt.report()

    def _resent(self, sent: Sent, message: WebSocketMessage, again: rejections.Match | None) -> None:
        """The answer to llmfix's resend has ended: what it means for what was learned, logged once."""
        assert sent.retry is not None
        outcome = (message_type(message.content) or "?").removeprefix("response.")
        sent.retry.end(outcome, again, f"resent once on the socket → {outcome}")


def _show(flow: http.HTTPFlow) -> None:
    """mitmweb refreshes a flow's mark and comment on update events only, and none comes with a message."""
    ctx.master.addons.trigger(UpdateHook([flow]))


def _loads(content: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(content)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _created(sock: Socket, content: bytes) -> None:
    """``response.created``: the server began answering its oldest request not yet answered; note the id."""
    rid = _response_id(content)
    waiting = next((s for s in sock.in_flight if s.response is None), None)
    if rid is not None and waiting is not None:
        waiting.response = rid


def _answered(sock: Socket, content: bytes, kind: str) -> Sent | None:
    """The request a terminal event answers: the one whose response it names (``response.completed`` and the
    like carry the response), else — an ``error`` names none: it refuses a request before a response exists —
    the oldest request the server has not begun to answer. Taken out of the socket's in-flight requests."""
    rid = _response_id(content) if kind != "error" else None
    found = next((s for s in sock.in_flight if rid is not None and s.response == rid), None)
    if found is None:
        found = next((s for s in sock.in_flight if s.response is None), None)
    if found is not None:
        sock.in_flight.remove(found)
    return found


def _response_id(content: bytes) -> str | None:
    response = _loads(content).get("response")
    rid = response.get("id") if isinstance(response, dict) else None
    return rid if isinstance(rid, str) else None

