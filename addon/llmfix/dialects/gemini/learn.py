"""What Gemini's answers teach: the function calls they issue, and the thought signature Gemini 3 issued with each.

An answer (``GenerateContentResponse``, https://ai.google.dev/api/generate-content#generatecontentresponse) holds
``candidates[0].content.parts``; streamed (``?alt=sse``), each event holds some parts of it, each function call
whole in one part, the parallel calls of a step each in its own event, the signature on the first
(https://ai.google.dev/gemini-api/docs/thought-signatures). Without ``alt=sse`` the same events come as one JSON
array; Code Assist wraps each as ``{"response": …}`` (google-gemini/gemini-cli
``packages/core/src/code_assist/converter.ts``).

Records, kind ``gemini.thought_signature``: ``value`` a signature exactly as issued, ``key`` :func:`signature_key` —
the upstream, the step's calls (each one's name and arguments, compared by value: :mod:`llmfix.memory.fingerprint`)
and the call's place among them. Not an id: the model may give none, and Gemini CLI replays each call with an id it
made itself. Two sessions making the same step (the same first call of a new session) make the same key: the kind is
single-valued (:data:`llmfix.memory.store.SINGLE_VALUED`), so such a key is ambiguous and gives nothing back. Calls
are learned as :class:`~llmfix.memory.store.ToolCall` only when the model gave them an id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from llmfix.memory.fingerprint import declaration, digest
from llmfix.memory.learn_base import Asked, Out, dicts, json_text
from llmfix.memory.store import Reasoning, ToolCall

__all__ = ["ANSWER_NEEDLES", "ARRAYS", "KIND", "REFUSED", "Assembler", "calls_in_request", "calls_in_response",
           "marker", "reasoning_in_response", "refused_key", "signature_key"]

KIND = "gemini.thought_signature"
REFUSED = "gemini.refused"
"""Signatures an upstream refused (``Corrupted thought signature.``): key :func:`refused_key`."""
ANSWER_NEEDLES = (b"functionCall", b"function_call")
"""Bytes a JSON answer holds when there is something in it to learn (a call, and its signature)."""
ARRAYS = True
"""A JSON answer may be an array (``streamGenerateContent`` without ``alt=sse``)."""


def _get(obj: Any, camel: str) -> Any:
    if not isinstance(obj, dict):
        return None
    return obj[camel] if camel in obj else obj.get("".join(f"_{c.lower()}" if c.isupper() else c for c in camel))


def signature_key(upstream: str, step: Iterable[tuple[str, Any]], position: int) -> str:
    """The key of the signature issued with the call at ``position`` of a step whose calls are ``step`` (name,
    arguments as a value)."""
    return "sig " + digest(upstream, str(position), *(declaration(name, "function", json_text(args if args is not None
                                                                                                else {}))
                                                       for name, args in step))


def refused_key(upstream: str, signature: str) -> str:
    """The key of a signature ``upstream`` refused."""
    return "refused " + digest(upstream, signature)


def marker(upstream: str) -> str:
    """The key of an upstream's marker in :data:`REFUSED`: new with every lesson, so a request's certain check asks
    again once the upstream refused something."""
    return "@" + upstream


def _responses(obj: Any) -> list[dict[str, Any]]:
    """The responses an answer holds: one, an array of them, each maybe in Code Assist's envelope."""
    out = []
    for item in obj if isinstance(obj, list) else [obj]:
        inner = item.get("response") if isinstance(item, dict) and isinstance(item.get("response"), dict) else item
        if isinstance(inner, dict):
            out.append(inner)
    return out


def _parts(response: dict[str, Any]) -> list[dict[str, Any]]:
    candidates = dicts(response.get("candidates"))
    first = next((c for c in candidates if c.get("index", 0) == 0), None)
    return dicts(_get(_get(first, "content"), "parts")) if first is not None else []


class _Step:
    """The function calls of one answer, in order: (id, name, arguments, signature)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, str, Any, str | None]] = []

    def add(self, parts: Iterable[dict[str, Any]]) -> None:
        for part in parts:
            call = _get(part, "functionCall")
            if not isinstance(call, dict) or not isinstance(name := call.get("name"), str) or not name:
                continue
            if _get(call, "partialArgs") is not None or _get(call, "willContinue"):
                continue  # Vertex's streamed arguments (streamFunctionCallArguments): not whole, not learned
            cid, signature = call.get("id"), _get(part, "thoughtSignature")
            self.calls.append((cid if isinstance(cid, str) and cid else None, name, call.get("args"),
                               signature if isinstance(signature, str) and signature else None))

    def report(self, upstream: str, out: Out) -> None:
        step = [(name, args) for _, name, args, _ in self.calls]
        for position, (cid, name, args, signature) in enumerate(self.calls):
            if cid is not None:
                out.append(ToolCall(cid, name, json_text(args if args is not None else {}), "gemini", "function"))
            if signature is not None:
                out.append(Reasoning(KIND, signature_key(upstream, step, position), signature, upstream))
        self.calls = []


def _learned(obj: Any, upstream: str) -> Out:
    step = _Step()
    for response in _responses(obj):
        step.add(_parts(response))
    out: Out = []
    step.report(upstream, out)
    return out


def calls_in_response(obj: Any) -> list[ToolCall]:
    return [x for x in _learned(obj, "") if isinstance(x, ToolCall)]


def reasoning_in_response(obj: Any, asked: Asked) -> list[Reasoning]:
    return [x for x in _learned(obj, asked.upstream) if isinstance(x, Reasoning)]


def calls_in_request(body: dict[str, Any], known: Callable[[Any], bool]) -> list[ToolCall]:
    holder = body.get("request") if "contents" not in body and isinstance(body.get("request"), dict) else body
    out = []
    for content in dicts(holder.get("contents")):
        if content.get("role") != "model":
            continue
        for part in dicts(_get(content, "parts")):
            call = _get(part, "functionCall")
            if isinstance(call, dict) and isinstance(cid := call.get("id"), str) and cid and not known(cid) \
                    and isinstance(name := call.get("name"), str) and name:
                out.append(ToolCall(cid, name, json_text(call.get("args") or {}), "gemini", "function"))
    return out


class Assembler:
    """The calls of a streamed answer, gathered event by event and reported when it ends (the signatures are keyed by
    the whole step)."""

    def __init__(self, asked: Asked | None = None) -> None:
        self._asked = asked or Asked()
        self._step = _Step()

    def wants(self, event: bytes) -> bool:
        return b"unctionCall" in event or b"unction_call" in event

    def on_event(self, data: Any, out: Out) -> None:
        for response in _responses(data):
            self._step.add(_parts(response))

    def finish(self, out: Out) -> None:
        self._step.report(self._asked.upstream, out)

    def forget_partial(self) -> None:
        self._step = _Step()
