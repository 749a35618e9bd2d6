"""Learning the thought signature Gemini issued with each tool call, from the answers of its OpenAI-compatible door.

Behind ``generativelanguage.googleapis.com/v1beta/openai/chat/completions`` is Gemini 3, which signs the first function
call of each step; the door carries that signature on the tool call it came with, as ``extra_content: {"google":
{"thought_signature": …}}`` (https://ai.google.dev/gemini-api/docs/thought-signatures, "OpenAI compatibility"), and
wants it back there when the turn is replayed. A Vertex-backed gateway writes it under ``extra_content.vertex``
(8monkey-ai/hebo-gateway #226, earendil-works/pi #6733); both are read. A signature on the message's own
``extra_content`` (not on a call) is taken as the first call's when no call carries one.

Where it travels in an answer:

- a JSON answer: on ``choices[i].message.tool_calls[k]`` (or on the message);
- a stream: on the delta of the call (``choices[i].delta.tool_calls[k].extra_content``), or on a trailing delta right
  after it whose tool-call entry has no ``index`` and no ``id`` (HKUDS/OpenHarness PR #338): that one belongs to the
  call last begun in its choice. The door does not increment ``index`` for parallel calls
  (NousResearch/hermes-agent #62937), so a call is told by its ``id``, an entry naming no id by its ``index`` (the
  call that index last named), and an entry naming neither by its place: the call last begun.

One kind of :class:`~llmfix.memory.store.Reasoning` record, ``chat.thought_signature``: ``value`` the signature
exactly as issued, ``upstream`` the upstream that issued it, ``key`` :func:`signature_key` — the upstream, the call's
id and its declaration (name, kind, arguments compared by value: :mod:`llmfix.memory.fingerprint`), so the call is
recognised when its session sends it back and only there. The kind is single-valued
(:data:`llmfix.memory.store.SINGLE_VALUED`): a key noted again with another signature is ambiguous and gives nothing
back. A call whose answer carried no signature gets no record. Signatures an upstream refused (``Corrupted thought
signature.``) are kept as kind ``chat.refused_signature`` (:mod:`.signature_facts`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from llmfix.dialects.chat.learn_reasoning import ChoiceCalls, streamed_choices
from llmfix.memory.fingerprint import declaration, digest
from llmfix.memory.learn_base import Asked, Out, dicts
from llmfix.memory.store import Reasoning, ToolCall

KIND = "chat.thought_signature"
REFUSED = "chat.refused_signature"
"""Signatures an upstream refused: key :func:`refused_key`, and the upstream's :func:`marker`."""
NAMESPACES = ("google", "vertex")
"""Where in ``extra_content`` a signature may be (the door's own, then a Vertex-backed gateway's)."""
FIELD = "thought_signature"
NEEDLE = FIELD.encode()
"""What an event holding a signature holds (made once: `wants` asks it of every event of every Chat stream)."""


def signature_in(extra: Any) -> str | None:
    """The signature an ``extra_content`` value holds (``google`` first, then ``vertex``); None when none."""
    if not isinstance(extra, dict):
        return None
    for namespace in NAMESPACES:
        inner = extra.get(namespace)
        value = inner.get(FIELD) if isinstance(inner, dict) else None
        if isinstance(value, str) and value:
            return value
    return None


def signature_of(obj: Any) -> str | None:
    """The signature on a tool call, a message or a delta (its ``extra_content``); None when none."""
    return signature_in(obj.get("extra_content")) if isinstance(obj, dict) else None


def signature_key(upstream: str, call_id: str, name: str, kind: str, arguments: str) -> str:
    """The key of the signature issued with one tool call."""
    return "sig " + digest(upstream, call_id, declaration(name, kind, arguments))


def refused_key(upstream: str, signature: str) -> str:
    """The key of a signature ``upstream`` refused."""
    return "refused " + digest(upstream, signature)


def marker(upstream: str) -> str:
    """The key of an upstream's marker in :data:`REFUSED`: new with every refusal it taught, so that a request's
    certain check asks again once it refused something."""
    return "@" + upstream


def records(calls: Iterable[ToolCall], signed: dict[str, str], on_message: str | None,
            upstream: str) -> list[Reasoning]:
    """The records of one answered message: each call's signature (``signed``: by call id), the message's own
    (``on_message``) on its first call when no call carries one."""
    calls = list(calls)
    if calls and on_message is not None and not any(c.call_id in signed for c in calls):
        signed = {calls[0].call_id: on_message}
    return [Reasoning(KIND, signature_key(upstream, c.call_id, c.name, c.kind, c.arguments), value, upstream)
            for c in calls if (value := signed.get(c.call_id))]


def in_message(message: dict[str, Any], calls: list[tuple[dict[str, Any], ToolCall | None]],
               asked: Asked) -> list[Reasoning]:
    """The records of a JSON answer's message, given its ``tool_calls`` entries and the call each one is."""
    signed = {call.call_id: s for tc, call in calls if call is not None and (s := signature_of(tc))}
    return records([c for _, c in calls if c is not None], signed, signature_of(message), asked.upstream)


class SignatureAssembler(ChoiceCalls):
    """Which call of each choice every streamed signature belongs to; each choice's records at its
    ``finish_reason`` (or at the end of the stream), once the Chat assembler handed over the calls it completed."""

    def __init__(self, asked: Asked) -> None:
        super().__init__(asked)
        self._last: dict[Any, str] = {}  # choice → id of the call last begun
        self._by_index: dict[tuple[Any, Any], str] = {}  # (choice, index) → the id that index last named
        self._signed: dict[Any, dict[str, str]] = {}  # choice → call id → signature
        self._on_message: dict[Any, str] = {}  # choice → a signature on the delta itself

    def wants(self, event: bytes) -> bool:
        return NEEDLE in event or (bool(self._signed or self._on_message) and b"finish_reason" in event)

    def on_event(self, data: Any, out: Out) -> None:
        for ci, delta, ended in streamed_choices(data):
            if delta is not None:
                for tc in dicts(delta.get("tool_calls")):
                    self._entry(ci, tc)
                if (own := signature_of(delta)) is not None:
                    self._on_message[ci] = own
            if ended:
                self._end(ci, out)

    def _entry(self, ci: Any, tc: dict[str, Any]) -> None:
        call_id, index = tc.get("id"), tc.get("index")
        if isinstance(call_id, str) and call_id:
            self._last[ci] = call_id
            if index is not None:
                self._by_index[ci, index] = call_id
        elif index is not None and (ci, index) in self._by_index:
            call_id = self._by_index[ci, index]
        else:
            call_id = self._last.get(ci)
        if call_id is not None and (signature := signature_of(tc)) is not None:
            self._signed.setdefault(ci, {})[call_id] = signature

    def _end(self, ci: Any, out: Out) -> None:
        calls, signed = self._calls.pop(ci, []), self._signed.pop(ci, {})
        out.extend(records(calls, signed, self._on_message.pop(ci, None), self._asked.upstream))
        self._last.pop(ci, None)
        for key in [k for k in self._by_index if k[0] == ci]:
            del self._by_index[key]

    def finish(self, out: Out) -> None:
        for ci in list(self._calls):
            self._end(ci, out)
        self.forget_partial()

    def forget_partial(self) -> None:
        """An event was lost: a call may be missing a piece, and which call a signature belongs to is not sure."""
        self._last.clear()
        self._by_index.clear()
        self._signed.clear()
        self._on_message.clear()
        self._calls.clear()
