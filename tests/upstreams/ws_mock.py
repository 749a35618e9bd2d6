"""A strict mock of the Responses API's WebSocket transport (``wss://…/v1/responses``), on loopback.

    with ResponsesSocketMock() as up:          # also answers plain HTTP, exactly like MockUpstream
        up.queue(function_call("view_image", {"path": "x.png"}))   # the next generating turn's output
        ... a client opens ws://127.0.0.1:<port>/v1/responses (through mitmdump and the loopback redirect)
        up.sockets[-1].received                # every client message, its bytes, and how it was answered

What it does, as observed of OpenAI with Codex 0.171 (tests/fixtures/codex-ws/README.md):

- The upgrade ``GET …/responses`` is answered 101; ``permessage-deflate`` only when made with ``deflate=True``
  (the default declines every extension, like the mock of the shared capture).
- Each ``{"type": "response.create", …}`` is one request. Its history is the chain it continues plus its own
  ``input``: ``previous_response_id`` names a response of this socket (the most recent one only, as the server
  keeps just that in the socket's memory with ``store: false``), or any earlier one when it was stored (``store``
  not false). An unknown id is answered OpenAI's ``previous_response_not_found``. The whole history is then
  checked with the SAME strict rules as the HTTP mock (:func:`tests.upstreams.rules.check`, the rule set by host),
  as one body without ``previous_response_id``: an interrupted call, an orphan output, duplicate ids are
  rejected over the union of the chain as they would be in one HTTP body.
- A rejection is one ``error`` event, ``{"type": "error", "status": 400, "error": {"type", "code", "message",
  "param"}}`` (codex-api's WrappedWebsocketErrorEvent), with the HTTP rejection's status and text, and the
  socket stays open; the failed turn evicts the response it chained on (a resend of it would be refused for
  the id). An accepted one is streamed as the events of the capture (tests/fixtures/codex-ws/), one message
  each: ``response.created``, ``response.in_progress``, per output item its ``added`` / delta / ``done`` events,
  ``response.completed`` with the id later turns chain on. ``generate: false`` (Codex's warm-up) gets an
  empty response.
- ``response.processed`` (Codex's acknowledgement) is recorded and not answered. Any other message, or one
  that is not a JSON object, gets an ``error`` event worded by this mock (OpenAI's own text is not known).

Every read is bounded (:data:`IDLE_TIMEOUT`); every socket is shut down when the mock stops.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.upstreams import wsframes
from tests.upstreams.canned import MOCK_TEXT
from tests.upstreams.errors import Rejection, openai_error
from tests.upstreams.handler import MockHandler
from tests.upstreams.mock import BY_HOST, MockUpstream
from tests.upstreams.rules import check

IDLE_TIMEOUT = 60.0
"""The longest the mock waits for a client's next message before it closes the socket."""
CREATED = 1_796_151_707
USAGE = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}


def function_call(name: str, arguments: str | dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """An output item the mock streams: a function call (its ``call_id`` made up unless given)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"fc_{uuid.uuid4().hex[:24]}", "type": "function_call", "status": "completed", "arguments": args,
            "call_id": call_id or f"call_{uuid.uuid4().hex[:24]}", "name": name}


def text(message: str = MOCK_TEXT) -> dict[str, Any]:
    """An output item the mock streams: an assistant message."""
    return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "text": message}]}


@dataclass(frozen=True)
class Received:
    """One client message as the mock got it, and how it answered."""

    raw: bytes  # the message's bytes (its text, UTF-8)
    json: Any  # decoded, None when not JSON
    status: int  # 200, or the error event's status
    reason: str | None  # the Rejection.reason, None when accepted
    response_id: str | None  # the response it created (None: rejected, or not a request)
    chained_on: str | None = None  # its previous_response_id


@dataclass
class SocketRecord:
    """One WebSocket the mock served."""

    path: str
    headers: dict[str, str]  # the upgrade request's, lower-case names
    rules: str
    extensions: list[str]
    received: list[Received] = field(default_factory=list)
    answers: list[list[dict[str, Any]]] = field(default_factory=list)  # the events sent for each received message


@dataclass
class _State:
    """What the server holds for one socket: the most recent response's whole history."""

    latest: dict[str, list[Any]] = field(default_factory=dict)


class ResponsesSocketMock(MockUpstream):
    """:class:`MockUpstream` (HTTP, unchanged) that also serves the Responses WebSocket at ``…/responses``."""

    def __init__(self, rules: str = BY_HOST, *, deflate: bool = False,
                 extra: Callable[[dict[str, Any]], Rejection | None] | None = None) -> None:
        super().__init__(rules)
        self.deflate = deflate
        self.extra = extra  # asked first about each whole history (a vendor quirk): its Rejection is the answer
        self._answers: deque[tuple[list[dict[str, Any]], threading.Event | None]] = deque()
        self._stored: dict[str, list[Any]] = {}  # responses created with store: true, by id
        self._sockets: list[SocketRecord] = []

    def start(self) -> ResponsesSocketMock:
        super().start()
        assert self._server is not None
        self._server.RequestHandlerClass = _SocketHandler
        return self

    def queue(self, *items: dict[str, Any], hold: threading.Event | None = None) -> None:
        """Answer the next generating ``response.create`` (FIFO) with these output items; with ``hold``, its
        terminal event waits until ``hold`` is set (at most :data:`IDLE_TIMEOUT`): the request stays in flight."""
        with self._lock:
            self._answers.append((list(items), hold))

    @property
    def sockets(self) -> list[SocketRecord]:
        with self._lock:
            return list(self._sockets)

    def received(self) -> list[Received]:
        """Every client message of every socket, in order."""
        return [r for s in self.sockets for r in s.received]

    # -- serving one socket (on its connection's thread) -----------------------------------------------

    def serve(self, handler: MockHandler, headers: dict[str, str]) -> None:
        handler.connection.settimeout(IDLE_TIMEOUT)
        peer = wsframes.accept(headers, lambda: handler.rfile.read1(wsframes.READ), handler.connection.sendall,
                               deflate=self.deflate)
        record = SocketRecord(handler.path, headers, self.rules_for(headers), peer.extensions)
        with self._lock:
            self._sockets.append(record)
        state = _State()
        try:
            while not self.stopping.is_set():
                message = peer.recv()
                events, hold = self._turn(record, state, message)
                record.answers.append(events)
                for n, event in enumerate(events):
                    if hold is not None and n == len(events) - 1:
                        hold.wait(IDLE_TIMEOUT)
                    peer.send_text(json.dumps(event))
        except (wsframes.Closed, OSError):
            pass  # the client went away, or the mock is stopping
        finally:
            peer.close()

    def _turn(self, record: SocketRecord, state: _State, message: str
              ) -> tuple[list[dict[str, Any]], threading.Event | None]:
        raw = message.encode()
        try:
            body = json.loads(message)
        except ValueError as e:
            return self._refuse(record, raw, None, _mock_error(f"The message is not valid JSON ({e}).", "invalid-json"))
        kind = body.get("type") if isinstance(body, dict) else None
        if kind == "response.processed":
            record.received.append(Received(raw, body, 200, None, None))
            return [], None
        if kind != "response.create":
            return self._refuse(record, raw, body, _mock_error(f"Unsupported message type {kind!r}.", "unknown-type"))
        chained_on = body.get("previous_response_id") or None
        base: list[Any] = []
        if chained_on is not None:
            found = state.latest.get(chained_on)
            with self._lock:
                found = found if found is not None else self._stored.get(chained_on)
            if found is None:
                return self._refuse(record, raw, body, openai_error(
                    f"Previous response with id '{chained_on}' not found.", reason="previous-response-not-found",
                    param="previous_response_id", code="previous_response_not_found"), chained_on)
            base = found
        items = body.get("input")
        items = [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else items
        history = base + (items if isinstance(items, list) else [])
        whole = {k: v for k, v in body.items() if k not in ("type", "previous_response_id")} | {"input": history}
        rejection = (self.extra and self.extra(whole)) or check(record.rules, record.path, whole)
        if rejection is not None:
            state.latest.pop(chained_on, None)  # the failed turn cost the state it chained on
            return self._refuse(record, raw, body, rejection, chained_on)
        output, hold = ([], None) if body.get("generate") is False else self._next_answer()
        response_id = f"resp_{uuid.uuid4().hex[:24]}"
        state.latest = {response_id: history + output}
        if body.get("store") is not False:
            with self._lock:
                self._stored[response_id] = history + output
        record.received.append(Received(raw, body, 200, None, response_id, chained_on))
        return stream_events(response_id, body.get("model"), output), hold

    def _refuse(self, record: SocketRecord, raw: bytes, body: Any, rejection: Rejection,
                chained_on: str | None = None) -> tuple[list[dict[str, Any]], None]:
        record.received.append(Received(raw, body, rejection.status, rejection.reason, None, chained_on))
        return [error_event(rejection)], None

    def _next_answer(self) -> tuple[list[dict[str, Any]], threading.Event | None]:
        with self._lock:
            return self._answers.popleft() if self._answers else ([text()], None)


class _SocketHandler(MockHandler):
    def do_GET(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        if headers.get("upgrade", "").lower() != "websocket" or not self.path.split("?", 1)[0].rstrip("/").endswith(
                "/responses"):
            return self._handle()
        self.close_connection = True
        self.mock.serve(self, headers)  # type: ignore[attr-defined]


def _mock_error(message: str, reason: str) -> Rejection:
    return openai_error(message, reason=reason, code="invalid_request")


def error_event(rejection: Rejection) -> dict[str, Any]:
    """A rejection as the WebSocket's ``error`` event: the HTTP error body's fields under ``error``, with its status."""
    error = rejection.body.get("error")
    if not isinstance(error, dict):  # xAI's shape: {"code": …, "error": "text"}
        error = {"type": "invalid_request_error", "code": rejection.body.get("code"), "message": str(error or ""),
                 "param": None}
    return {"type": "error", "status": rejection.status,
            "error": {k: error.get(k) for k in ("type", "code", "message", "param")}}


def stream_events(response_id: str, model: Any, output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stream events of one response with these output items (the shapes of the shared capture)."""
    def response(status: str, out: list[dict[str, Any]]) -> dict[str, Any]:
        r = {"id": response_id, "object": "response", "created_at": CREATED, "status": status, "model": model,
             "output": out}
        return r | {"usage": USAGE} if status == "completed" else r

    events: list[dict[str, Any]] = [{"type": "response.created", "response": response("in_progress", [])},
                                    {"type": "response.in_progress", "response": response("in_progress", [])}]
    for n, item in enumerate(output):
        events += _item_events(n, item)
    events.append({"type": "response.completed", "response": response("completed", output)})
    return [e | {"sequence_number": seq} for seq, e in enumerate(events)]


def _item_events(n: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    at = {"item_id": item.get("id"), "output_index": n}
    if item.get("type") == "function_call":
        start = item | {"status": "in_progress", "arguments": ""}
        return [{"type": "response.output_item.added", "output_index": n, "item": start},
                {"type": "response.function_call_arguments.delta", **at, "delta": item["arguments"]},
                {"type": "response.function_call_arguments.done", **at, "arguments": item["arguments"]},
                {"type": "response.output_item.done", "output_index": n, "item": item}]
    if item.get("type") == "message":
        events = [{"type": "response.output_item.added", "output_index": n,
                   "item": item | {"status": "in_progress", "content": []}}]
        for k, part in enumerate(item.get("content", [])):
            where = at | {"content_index": k}
            events += [{"type": "response.content_part.added", **where, "part": part | {"text": ""}},
                       {"type": "response.output_text.delta", **where, "delta": part.get("text", ""), "logprobs": []},
                       {"type": "response.output_text.done", **where, "text": part.get("text", ""), "logprobs": []},
                       {"type": "response.content_part.done", **where, "part": part}]
        return [*events, {"type": "response.output_item.done", "output_index": n, "item": item}]
    return [{"type": "response.output_item.added", "output_index": n, "item": item},
            {"type": "response.output_item.done", "output_index": n, "item": item}]
