"""The Gemini side of the strict mock upstream: its doors, its state, and how it answers.

`MockUpstream` answers with these when a request's rule set is ``"gemini"`` (``MockUpstream(rules="gemini")``, or
by host: ``generativelanguage.googleapis.com``, ``*aiplatform.googleapis.com``, ``cloudcode-pa.googleapis.com``):

    with MockUpstream(rules="gemini") as up:
        up.gemini.queue(function_calls(("read_file", {"file_path": "a.png"}), ("read_file", {"file_path": "b.png"})))
        up.gemini.queue(text_answer("done"))
        ...  # the client's requests
        up.requests[-1].status, up.requests[-1].reason   # every request is recorded, as for the other dialects

Doors (`route`): the Gemini API ``/v1beta/models/{model}:generateContent | :streamGenerateContent[?alt=sse] |
:countTokens``; Vertex ``/v1*/projects/*/locations/*/publishers/google/models/{model}:…`` and express mode
``/v1*/publishers/google/models/{model}:…``; Code Assist ``/v1internal:…`` (body ``{"model", "project",
"request": {…}}``, answers ``{"response": …}``, paths in errors ``request.``-prefixed, errors array-wrapped); the
OpenAI-compatible door ``/v1beta/openai/chat/completions`` (tests/upstreams/gemini_door.py). Anything else: 404.

A request is judged by the pure rules (tests/upstreams/gemini_rules.py, gemini_schema.py, gemini_door.py), then by
what this mock signed (`GeminiState.ledger`); a ``countTokens`` request by the structure rules only. Accepted
generation requests take the next queued answer (else a short text), signed at send time with the answering
backend's key. ``payload_limit`` (20 MB, the Gemini API's inline limit) bounds the raw body.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.upstreams import gemini_canned, gemini_door, gemini_rules
from tests.upstreams.access import as_dict
from tests.upstreams.gemini_canned import GeminiAnswer, text_answer
from tests.upstreams.gemini_errors import Backend, GeminiError, not_found
from tests.upstreams.gemini_signatures import SignatureLedger
from tests.upstreams.sse import MAX_CHUNK_DELAY, CannedSSE, write_events

if TYPE_CHECKING:
    from tests.upstreams.handler import MockHandler

PAYLOAD_LIMIT = 20 * 1024 * 1024
METHODS = ("generateContent", "streamGenerateContent", "countTokens")
_GEMINI = re.compile(r"/v1(?:alpha|beta)?/models/(?P<model>[^/:]+):(?P<method>\w+)")
_VERTEX = re.compile(r"/v1(?:beta1)?/(?:projects/[^/]+/locations/[^/]+/)?publishers/google/models/"
                     r"(?P<model>[^/:]+):(?P<method>\w+)")
_CODE_ASSIST = re.compile(r"/v1internal:(?P<method>\w+)")
DOOR_PATH = "/v1beta/openai/chat/completions"


@dataclass(frozen=True)
class Route:
    """Which door a path is: the backend, the method, the model named in the path, whether SSE was asked for."""

    backend: Backend
    method: str
    model: str | None
    sse: bool


def route(path: str) -> Route | None:
    """The Gemini door of ``path`` (query string read for ``alt=sse``), or None."""
    bare, _, query = path.partition("?")
    sse = "alt=sse" in query.split("&")
    bare = bare.rstrip("/")
    if bare == DOOR_PATH:
        return Route("door", "chat", None, False)
    for backend, pattern in (("gemini", _GEMINI), ("vertex", _VERTEX), ("code-assist", _CODE_ASSIST)):
        match = pattern.fullmatch(bare)
        if match and match.group("method") in METHODS:
            return Route(backend, match.group("method"), match.groupdict().get("model"), sse)  # type: ignore[arg-type]
    return None


class GeminiState:
    """What one mock holds for Gemini: the queued answers, the signing ledger, the options."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: deque[GeminiAnswer] = deque()
        self.ledger = SignatureLedger()
        self.door = gemini_door.DoorStyle()
        self.payload_limit = PAYLOAD_LIMIT
        # False: the door lets any tool schema through, to watch what a client whose tools Gemini refuses sends next
        self.door_schemas = True
        self.sent: list[GeminiAnswer] = []  # the answers sent, in order (their ``issued`` parts filled in)

    def queue(self, *answers: GeminiAnswer) -> None:
        """Answer the next accepted generation requests with ``answers`` (FIFO)."""
        with self._lock:
            self._answers.extend(answers)

    def next_answer(self) -> GeminiAnswer:
        with self._lock:
            answer = self._answers.popleft() if self._answers else text_answer()
            self.sent.append(answer)
            return answer

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._answers)

    def trust(self, *signatures: str, signer: str = "gemini") -> None:
        """Accept ``signatures`` as issued by ``signer`` (a real capture's)."""
        self.ledger.trust(*signatures, signer=signer)


def unwrap(route_: Route, data: dict[str, Any]) -> tuple[dict[str, Any], str | None, str]:
    """``(the native request, its model, the error-path prefix)``: Code Assist's envelope and countTokens' forms."""
    model = route_.model
    if route_.backend == "code-assist":
        inner = as_dict(data.get("request"))
        model = str(data.get("model") or inner.get("model") or "").removeprefix("models/") or None
        return inner, model, "request."
    if route_.method == "countTokens" and isinstance(data.get("generateContentRequest"), dict):
        return data["generateContentRequest"], model, "generate_content_request."
    return data, model, ""


def judge(state: GeminiState, route_: Route, data: Any, size: int) -> GeminiError | None:
    """The rejection of one parsed request, or None."""
    if size > state.payload_limit:
        return GeminiError(f"Request payload size exceeds the limit: {state.payload_limit} bytes.", "payload-size")
    if not isinstance(data, dict):
        return GeminiError("Invalid JSON payload received. Unexpected token.", "invalid-json")
    if route_.backend == "door":
        return gemini_door.check(data, state.ledger, schemas=state.door_schemas)
    inner, model, prefix = unwrap(route_, data)
    counting = route_.method == "countTokens"
    rejection = gemini_rules.check(inner, backend=route_.backend, prefix=prefix, pairing=not counting)
    if rejection is None and not counting:
        rejection = state.ledger.check(gemini_rules.contents_of(inner), backend=route_.backend, model=model)
    return rejection


def handle(handler: MockHandler, headers: dict[str, str], raw: bytes, plain: bytes | None) -> None:
    """Answer one request of the ``gemini`` rule set on ``handler`` (the body already read and decoded)."""
    mock, path = handler.mock, handler.path
    state: GeminiState = mock.gemini
    route_ = route(path) if handler.command == "POST" else None
    data: Any = None
    if plain is not None:
        try:
            data = json.loads(plain)
        except (ValueError, UnicodeDecodeError, RecursionError):
            data = None
    if route_ is None:
        rejection: GeminiError | None = not_found(path.partition("?")[0])
        backend: Backend = "gemini"
    else:
        backend = route_.backend
        rejection = judge(state, route_, data, len(raw))
    array = route_ is not None and route_.method == "streamGenerateContent" and not route_.sse
    mock.record(method=handler.command, path=path, headers=headers, body=raw, json=data, rules="gemini",
                status=rejection.status if rejection else 200, reason=rejection.reason if rejection else None)
    if rejection is not None:
        _send_json(handler, rejection.status, rejection.body(backend, array=array))
        return
    assert route_ is not None and isinstance(data, dict)
    if route_.method == "countTokens":
        _send_json(handler, 200, _count(route_, data))
    elif backend == "door":
        _answer_door(handler, state, data)
    else:
        _answer_native(handler, state, route_, data, array)


def _count(route_: Route, data: dict[str, Any]) -> dict[str, Any]:
    tokens = max(1, len(json.dumps(unwrap(route_, data)[0].get("contents", []))) // 4)
    return {"totalTokens": tokens, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}]}


def _answer_native(handler: MockHandler, state: GeminiState, route_: Route, data: dict[str, Any], array: bool) -> None:
    inner, model, _ = unwrap(route_, data)
    answer = state.next_answer()
    events = gemini_canned.model_parts(answer, state.ledger, route_.backend, model)
    streamed = gemini_canned.responses(answer, events, model=model, prompt_tokens=len(json.dumps(inner)) // 4)
    wrap = gemini_canned.wrap_code_assist if route_.backend == "code-assist" else (lambda r: r)
    if route_.method == "generateContent":
        _send_json(handler, 200, wrap(gemini_canned.merged(streamed)))
        return
    items = [wrap(r) for r in streamed]
    error = None
    if answer.error is not None:
        items = items[:answer.error_after]
        error = answer.error.body(route_.backend)
        error = error[0] if isinstance(error, list) else error
    if array:
        _send_json(handler, 200, items if error is None else [*items, error])
        return
    _send_sse(handler, gemini_canned.sse_text(items, error), answer)


def _answer_door(handler: MockHandler, state: GeminiState, data: dict[str, Any]) -> None:
    answer = state.next_answer()
    if data.get("stream") is not True:
        _send_json(handler, 200, gemini_door.completion(answer, state.ledger, data))
        return
    items = gemini_door.chunks(answer, state.ledger, data, state.door)
    error = None
    if answer.error is not None:
        items, error = items[:answer.error_after], answer.error.body("gemini")
    _send_sse(handler, gemini_door.sse_text(items, error), answer)


def _send_json(handler: MockHandler, status: int, body: Any) -> None:
    payload = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json; charset=UTF-8")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)
    handler.wfile.flush()


def _send_sse(handler: MockHandler, text: str, answer: GeminiAnswer) -> None:
    """Stream ``text`` event by event, ``answer.delay`` apart, noting in ``answer.sending_at`` when each was
    about to be written."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    handler.wfile.flush()
    write_events(handler.wfile, CannedSSE(text, min(answer.delay, MAX_CHUNK_DELAY)), handler.mock.stopping,
                 lambda: answer.sending_at.append(time.monotonic()))
