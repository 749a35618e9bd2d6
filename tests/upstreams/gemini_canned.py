"""Scripted answers of the Gemini mock, shaped like the real ones (``GenerateContentResponse``).

A test queues `GeminiAnswer` values on the mock (``mock.gemini.queue(function_calls(...))``); the mock signs them
when it sends them, with the key of the backend that answers, and streams them as Gemini streams
(https://ai.google.dev/gemini-api/docs/thought-signatures; NousResearch/hermes-agent #101536's capture):

- each response is ``{"candidates": [{"content": {"role": "model", "parts": […]}, "index": 0}], "usageMetadata",
  "modelVersion", "responseId"}``; the last one has ``finishReason: "STOP"`` and the token counts;
- parts are deltas: a thought summary (``thought: true``) first when asked, each function call whole in its own
  event (parallel calls: only the first signed; ``sequential=True`` signs each), text split over ``chunks`` events
  with the signature on the last part (Gemini 3);
- SSE events are ``data: <json>\\r\\n\\r\\n``; without ``alt=sse`` the whole stream is one JSON array; a unary
  ``generateContent`` answers the merged parts in one response; Code Assist wraps each as ``{"response": …,
  "traceId": …}``;
- ``delay``: the pause between events (headers and the first event go at once); ``error``: after ``error_after``
  events, a bare ``{"error": …}`` chunk ends the 200 stream (how ``@google/genai`` sees an error mid-stream).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field, replace
from typing import Any

from tests.upstreams.gemini_errors import Backend, GeminiError
from tests.upstreams.gemini_signatures import SignatureLedger, requires_signatures, signer_of

MOCK_TEXT = "ok from mock"


@dataclass(frozen=True)
class Call:
    """One function call of an answer; ``signature`` pins what it carries (None: the mock decides)."""

    name: str
    args: dict[str, Any]
    id: str | None = None
    signature: str | None = None


@dataclass(frozen=True)
class GeminiAnswer:
    """One scripted answer: function calls, or text; how it streams; an optional error inside the stream."""

    calls: tuple[Call, ...] = ()
    text: str | None = None
    thought: str | None = None
    chunks: int = 1
    sequential: bool = False
    delay: float = 0.0
    error: GeminiError | None = None
    error_after: int = 1
    text_signature: str | None = None
    finish_reason: str = "STOP"
    signer: str | None = None  # sign as another backend would (None: the answering backend)
    issued: list[dict[str, Any]] = field(default_factory=list, compare=False)  # the parts it sent, once sent
    # when each event of a streamed answer was about to be written (time.monotonic(), the test's clock)
    sending_at: list[float] = field(default_factory=list, compare=False)

    def with_error(self, error: GeminiError, after: int = 1) -> GeminiAnswer:
        """This answer cut after ``after`` events by ``error`` inside the 200 stream."""
        return replace(self, error=error, error_after=after)


def function_calls(*calls: tuple[str, dict[str, Any]] | Call, ids: bool = False, sequential: bool = False,
                   thought: str | None = None, delay: float = 0.0) -> GeminiAnswer:
    """Parallel calls (``ids``: Gemini-made ids ``call_<hex>``, else none as in the Gemini CLI capture)."""
    made = []
    for call in calls:
        if isinstance(call, tuple):
            name, args = call
            call = Call(name, args, f"call_{secrets.token_hex(4)}" if ids else None)
        made.append(call)
    return GeminiAnswer(calls=tuple(made), sequential=sequential, thought=thought, delay=delay)


def text_answer(text: str = MOCK_TEXT, *, chunks: int = 1, delay: float = 0.0, thought: str | None = None,
                signature: str | None = None) -> GeminiAnswer:
    """A text answer in ``chunks`` deltas, ``delay`` seconds apart (signed on the last part for Gemini 3)."""
    return GeminiAnswer(text=text, chunks=max(1, chunks), delay=delay, thought=thought, text_signature=signature)


def slow_text(text: str, *, events: int = 6, seconds: float = 6.0) -> GeminiAnswer:
    """A text answer whose ``events`` events are spread over ``seconds`` (the first at once)."""
    return text_answer(text, chunks=events, delay=seconds / max(1, events - 1))


def _split(text: str, chunks: int) -> list[str]:
    size = max(1, -(-len(text) // chunks))
    pieces = [text[i:i + size] for i in range(0, len(text), size)] or [""]
    return pieces


def _part_of(call: Call) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": call.name, "args": call.args}
    if call.id is not None:
        fc = {"id": call.id, **fc}
    return {"functionCall": fc}


def model_parts(answer: GeminiAnswer, ledger: SignatureLedger, backend: Backend, model: str | None) -> list[list[dict]]:
    """The parts of each event of ``answer`` as ``backend`` sends them to ``model``, signed."""
    signer = answer.signer or signer_of(backend)
    signs = requires_signatures(model)
    events: list[list[dict[str, Any]]] = []
    if answer.thought:
        events.append([{"text": answer.thought, "thought": True}])
    for n, call in enumerate(answer.calls):
        part = _part_of(call)
        signature = call.signature
        if signature is None and signs and (n == 0 or answer.sequential):
            signature = ledger.sign_call(call.name, call.args, signer)
        if signature:
            part["thoughtSignature"] = signature
        events.append([part])
    if not answer.calls:
        pieces = _split(answer.text if answer.text is not None else MOCK_TEXT, answer.chunks)
        for k, piece in enumerate(pieces):
            part: dict[str, Any] = {"text": piece}
            if k == len(pieces) - 1:
                signature = answer.text_signature or (ledger.sign_text(signer) if signs else None)
                if signature:
                    part["thoughtSignature"] = signature
            events.append([part])
    answer.issued[:] = [p for parts in events for p in parts]
    return events


def _usage(prompt_tokens: int, answer: GeminiAnswer) -> dict[str, Any]:
    out = 8 * max(1, len(answer.calls)) + len(answer.text or "") // 4
    usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": out, "totalTokenCount": prompt_tokens + out}
    if answer.thought:
        usage["thoughtsTokenCount"] = len(answer.thought) // 4 + 1
        usage["totalTokenCount"] += usage["thoughtsTokenCount"]
    return usage


def responses(answer: GeminiAnswer, events: list[list[dict[str, Any]]], *, model: str | None,
              prompt_tokens: int) -> list[dict[str, Any]]:
    """One ``GenerateContentResponse`` per event; the last finishes and counts."""
    response_id = secrets.token_urlsafe(12)
    out = []
    for n, parts in enumerate(events):
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        response: dict[str, Any] = {"candidates": [candidate]}
        if n == len(events) - 1:
            candidate["finishReason"] = answer.finish_reason
            response["usageMetadata"] = _usage(prompt_tokens, answer)
        else:
            response["usageMetadata"] = {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens}
        response["modelVersion"] = model or "gemini-mock"
        response["responseId"] = response_id
        out.append(response)
    return out


def merged(streamed: list[dict[str, Any]]) -> dict[str, Any]:
    """The unary answer: every part of the stream in one response (text deltas joined, the signature kept)."""
    parts: list[dict[str, Any]] = []
    for response in streamed:
        for part in response["candidates"][0]["content"]["parts"]:
            last = parts[-1] if parts else None
            if (last is not None and "text" in part and "text" in last and last.get("thought") == part.get("thought")
                    and "thoughtSignature" not in last):
                parts[-1] = {**last, **part, "text": last["text"] + part["text"]}
            else:
                parts.append(dict(part))
    final = dict(streamed[-1])
    final["candidates"] = [{**final["candidates"][0], "content": {"role": "model", "parts": parts}}]
    return final


def wrap_code_assist(response: dict[str, Any]) -> dict[str, Any]:
    """Code Assist's envelope of one response."""
    return {"response": response, "traceId": secrets.token_hex(8)}


def sse_text(items: list[Any], error: dict[str, Any] | None = None) -> str:
    """``data: <json>`` events, CRLF-separated as Google sends them; an error as a bare JSON chunk at the end."""
    text = "".join(f"data: {json.dumps(item, separators=(',', ':'))}\r\n\r\n" for item in items)
    return text + (json.dumps(error, separators=(",", ":")) if error is not None else "")
