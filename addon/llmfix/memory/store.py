"""What the rest of llmfix asks of its memory: the interface every backend implements.

Repairs, learners and the proxy see memory only through these protocols, so a backend (the embedded
SQLite file today, a shared store later) plugs in without touching them:

- :class:`CallStore` — tool calls by call id (``remember`` / ``lookup``), bounded by age and count. An id
  remembered with two different declarations (:func:`llmfix.memory.fingerprint.declaration`: two sessions of a
  vendor that numbers its ids per conversation, Kimi's ``functions.bash:0``) is ambiguous: ``lookup`` never
  gives it back, until it expires. Repairs read it through :class:`llmfix.repairs.base.CallMemory` (``lookup``
  only); the learners and the proxy write to it through :class:`llmfix.memory.recall.Recall`.
- :class:`MediaStore` — the tool-result media of requests in flight (``observe`` / ``finish`` /
  ``correlated``), what restore-tool-media puts back; :class:`llmfix.memory.media_window.MediaWindow`
  is the in-process implementation.

- :class:`QuirkStore` — upstream quirks learned from rejections (host, port, dialect → a profile flag's
  value, with the rejection that taught it and when), so the next request is repaired up front.
- :class:`ReasoningStore` — what the answers said about the model's reasoning (:class:`Reasoning` records:
  the reasoning text of a turn, which upstream signed a thinking block, which reasoning item preceded an
  output item), so a later request that lost, moved or carried it over can be judged and repaired.

Learning: a learner (``memory/learn.py``) reads an upstream's answer, whatever carried it (SSE, a JSON body,
a WebSocket message: each event is the same JSON object), and reports :class:`ToolCall` and
:class:`Reasoning` records; the proxy writes them to these stores. Both transports build their learners in
one place (``LLMFix.learner``), so what one learns the other does too.

Contract for every backend: runtime failures never reach the caller (``remember`` returns 0,
``lookup`` returns ``{}``, with a warning); only construction raises, :class:`MemoryStoreError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from llmfix.wire.toolresults import Result


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model issued it."""

    call_id: str
    name: str
    arguments: str  # JSON string as issued (Chat/Responses); JSON text of `input` (Anthropic); custom input
    dialect: str  # "chat" | "responses" | "messages"
    kind: str = "function"  # "function" | "custom"


class MemoryStoreError(ValueError):
    """The store cannot be opened with the given location (a directory, no permission, …)."""


class CallStore(Protocol):
    """Tool calls by call id, with expiry and a size bound. Safe to call from the event loop and worker threads."""

    def remember(self, calls: Iterable[ToolCall]) -> int:
        """Store (or refresh) these calls; the number written."""
        ...

    def lookup(self, call_ids: Iterable[str]) -> dict[str, ToolCall]:
        """The calls known for these ids (unknown and expired ids are absent)."""
        ...

    def close(self) -> None: ...


class Observation(Protocol):
    """One request's observation of one call id's tool result."""

    flow_id: str
    result: Result


class MediaStore(Protocol):
    """What each tool result carried in the requests in flight (or just ended), by call id."""

    def knows(self, call_id: str | None) -> bool: ...

    def held_among(self, ids: Any, flow_id: str) -> list[str]:
        """The members of ``ids`` (an :class:`llmfix.idset.Ids`) an observation may be held of."""
        ...

    def worth_keeping(self, results: list[Result]) -> list[Result]: ...

    def observe(self, flow_id: str, results: list[Result]) -> None: ...

    def finish(self, flow_id: str) -> None: ...

    def correlated(self, call_id: str, flow_id: str) -> Observation | None: ...


@dataclass(frozen=True, slots=True)
class Quirk:
    """A profile flag learned for one upstream (host, port and dialect) from a rejection it answered."""

    host: str
    port: int
    dialect: str  # "chat" | "responses" | "messages"
    flag: str  # a Profile field, e.g. "responses_tool_output_array", or a refused request field: "strip:<field>"
    value: bool
    reason: str  # what taught it: status and a short, redacted excerpt of the error text (never a header or key)
    learned_at: float  # unix time


@dataclass(frozen=True, slots=True)
class Reasoning:
    """One fact an upstream's answer gave about a model's reasoning, kept to judge or restore a later request.

    ``kind`` says what it is and how ``key`` and ``value`` read, one kind per fact the reasoning repairs need
    (the learners and repairs that use a kind define it, e.g. the reasoning text of a Chat turn keyed by a digest
    of its upstream and tool calls, the model that signed an Anthropic thinking block keyed by a hash of its
    signature, the Responses reasoning item an output item followed). One record per (kind, key): a later one
    replaces it, except in a :data:`SINGLE_VALUED` kind. ``upstream`` names who issued it, ``"host:port/dialect"``
    (the same on every transport), so a verdict for one upstream is never taken for another's. Never a header or a
    key: only what the model produced."""

    kind: str
    key: str
    value: str
    upstream: str = ""


SINGLE_VALUED = frozenset({"chat.reasoning_content", "chat.thought_signature", "gemini.thought_signature"})
"""Kinds whose key must name one value: what is given back from them goes into a request as it is (the reasoning of
a Chat turn, a thought signature), so a key noted again with another value or upstream — two sessions that made the
same key — is ambiguous and never recalled again (until it expires), instead of handing one session's record to the
other. Other kinds are replaced by a later record (a marker is meant to change)."""


def upstream_id(host: str, port: int | None, dialect: str) -> str:
    """How a :class:`Reasoning` record names an upstream: ``host:port/dialect`` (host lower-cased)."""
    return f"{host.lower()}:{port or 0}/{dialect}"


class ReasoningStore(Protocol):
    """:class:`Reasoning` records by (kind, key), bounded by the memory's age and size like the tool calls."""

    def note(self, records: Iterable[Reasoning]) -> int:
        """Store (or refresh) these records (a key of a :data:`SINGLE_VALUED` kind noted with another value turns
        ambiguous); the number written."""
        ...

    def recall(self, kind: str, keys: Iterable[str]) -> dict[str, Reasoning]:
        """The records of ``kind`` known for these keys (unknown, ambiguous and expired keys are absent)."""
        ...

    def close(self) -> None: ...


class QuirkStore(Protocol):
    """Learned upstream quirks, expiring with the rest of the memory. A profiles-file setting always wins over them."""

    def learn(self, quirk: Quirk) -> None:
        """Store (or refresh) ``quirk``, replacing one with the same host, port, dialect and flag."""
        ...

    def quirks(self) -> list[Quirk]:
        """Every unexpired quirk, oldest first."""
        ...

    def forget(self, host: str | None = None) -> int:
        """Forget the quirks of ``host`` (every host when None); how many were forgotten."""
        ...


class RecallOnce:
    """A reasoning memory as one request sees it: each (kind, key) asked of ``base`` once, its answer (found or
    not) given again to the request's later asks.

    Why: the certain checks of a session's next turn run at each of the body's marks (``engine._settle``), and
    each asks the same marker keys (an upstream's last rejection, ``repairs/drop_foreign_thinking.py``,
    ``drop_unverifiable_reasoning.py``, ``pair_reasoning_items.py``): a query (SQLite) or a round trip (Redis)
    per mark and check. The answers are those of the moment the key was first asked, as if the request had read
    every key then; the next request asks again. Bounded by the keys one request asks; not shared between
    threads."""

    __slots__ = ("_got", "base")

    def __init__(self, base: ReasoningStore) -> None:
        self.base = base
        self._got: dict[str, dict[str, Reasoning | None]] = {}  # kind → key → its record (None: not held)

    def note(self, records: Iterable[Reasoning]) -> int:
        self._got.clear()  # what is noted is read again
        return self.base.note(records)

    def recall(self, kind: str, keys: Iterable[str]) -> dict[str, Reasoning]:
        got = self._got.get(kind)
        if got is None:
            got = self._got[kind] = {}
        keys = list(keys)
        missing = [k for k in keys if k not in got and isinstance(k, str)]  # no store holds another key
        if missing:
            found = self.base.recall(kind, missing)
            for k in missing:
                got[k] = found.get(k)
        return {k: r for k in keys if (r := got.get(k)) is not None}

    def close(self) -> None:
        """Nothing of its own: ``base`` is the addon's."""
