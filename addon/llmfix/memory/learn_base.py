"""What the per-dialect learners share: the assembler protocol, what a learner knows of the request it answers,
two small JSON helpers, and the reading of the calls a request's assistant messages declare."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from llmfix.memory.store import Reasoning, ToolCall

Out = list[ToolCall | Reasoning]
"""What an assembler reports into: the calls it completed, and any reasoning records it has."""


_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(value, ensure_ascii=False)`` builds this encoder on every call (~1 µs of a call's ~3.5)."""


def json_text(value: Any) -> str:
    """The JSON text of an already-parsed value (Anthropic ``input``, or non-string arguments)."""
    return value if isinstance(value, str) else _ENCODER.encode(value)


def dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def assistant_calls(body: dict[str, Any], key: str, parse: Callable[[Any], ToolCall | None],
                    known: Callable[[Any], bool]) -> list[ToolCall]:
    """The calls the assistant messages of a request's ``messages`` declare in their list ``key``, each entry read by
    ``parse`` (None: malformed, skipped); an entry whose ``id`` is ``known`` is left out unread."""
    calls = [
        parse(entry)
        for msg in dicts(body.get("messages"))
        if msg.get("role") == "assistant"
        for entry in dicts(msg.get(key))
        if not known(entry.get("id"))
    ]
    return [c for c in calls if c is not None]


def _unknown() -> Any:
    return None


@dataclass(frozen=True, slots=True)
class Asked:
    """What a learner knows of the request whose answer it reads: the upstream that answers it (``host:port/dialect``)
    and ``body()``, the request's parsed JSON body (None when it cannot be read), read only by a learner that needs
    it and only when it does (a Chat turn that made no tool call is known by the message it answered)."""

    upstream: str = ""
    body: Callable[[], Any] = _unknown


class Assembler(Protocol):
    def wants(self, event: bytes) -> bool:
        """Cheap pre-check on the raw event bytes: may this event matter?"""
        ...

    def on_event(self, data: Any, out: Out) -> None: ...

    def finish(self, out: Out) -> None:
        """End of stream (or [DONE]): report whatever is pending and complete enough."""
        ...

    def forget_partial(self) -> None:
        """An event was lost: drop calls that may be missing a piece."""
        ...
