"""Learning which upstream signed which Anthropic thinking block, from the answers that issued them.

A ``thinking`` block carries a ``signature`` (a ``redacted_thinking`` block its encrypted ``data``) that only the
upstream (and model) that issued it accepts back; a block from another provider, an unsigned or an edited one is
rejected with ``messages.N.content.M: Invalid `signature` in `thinking` block`` on every later turn
(anthropics/anthropic-sdk-python #1598; docs/evidence.md, "Reasoning and thinking replay"). drop-foreign-thinking
judges the blocks of a request by what this records: a block this upstream issued stays, whatever its form
(DeepSeek's ``/anthropic`` signs with the message's UUID, NousResearch/hermes-agent #21048).

Streamed: ``content_block_start`` with a ``thinking`` block (its ``thinking`` and ``signature`` fill in through
``thinking_delta`` / ``signature_delta`` pieces) or a ``redacted_thinking`` block, ended by its
``content_block_stop``; the model from ``message_start``. JSON: the answer's ``content`` blocks and ``model``.

Kinds of :class:`~llmfix.memory.store.Reasoning` records (the second is taught by rejections, retry/rejections.py):

- ``messages.signature``: ``key`` is :func:`block_key` of a block as issued (a hash of its type, text and
  signature, or of its data), ``value`` the model that issued it, ``upstream`` the upstream that answered.
- ``messages.foreign_thinking``: ``key`` is ``<block_key>@<upstream>``: that upstream rejected the block (named
  by ``messages.N.content.M``); ``value`` says by which rule and where. Beside them one marker per upstream,
  ``key`` ``@<upstream>``, ``value`` new with every block taught (``retry/rules.lesson``: when, a count,
  a digest of the block): a request to an upstream that never rejected a block asks one key, not one per block,
  and a continued session sees from its value whether a rejection came since its older blocks were judged — also
  when a block taught before is taught again after another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from llmfix.memory.learn_base import Asked, Out, dicts
from llmfix.memory.store import Reasoning

SIGNED = "messages.signature"
FOREIGN = "messages.foreign_thinking"
TYPES = ("thinking", "redacted_thinking")


def block_key(block: Mapping[str, Any]) -> str | None:
    """The hash a thinking (or redacted_thinking) block is known by; None for any other block. Every field
    that the signature covers is in it, so an edited block is not the block that was issued."""
    kind = block.get("type")
    if kind == "thinking":
        parts = (kind, _text(block.get("thinking")), _text(block.get("signature")))
    elif kind == "redacted_thinking":
        parts = (kind, _text(block.get("data")))
    else:
        return None
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def fact_key(key: str, upstream: str) -> str:
    return f"{key}@{upstream}"


def marker_key(upstream: str) -> str:
    return f"@{upstream}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _record(block: Mapping[str, Any], model: str) -> list[Reasoning]:
    key = block_key(block)
    return [Reasoning(SIGNED, key, model)] if key is not None else []


def reasoning_in_response(obj: dict[str, Any], asked: Asked | None = None) -> list[Reasoning]:
    model = _text(obj.get("model"))
    return [r for block in dicts(obj.get("content")) for r in _record(block, model)]


class ThinkingAssembler:
    """Thinking blocks by content-block index, reported at their ``content_block_stop``."""

    def __init__(self) -> None:
        self._model = ""
        self._pending: dict[Any, tuple[str, list[str], list[str]]] = {}  # index → (type, thinking|data, signature)

    def wants(self, event: bytes) -> bool:
        return (b"thinking" in event or b"signature_delta" in event or b"message_start" in event
                or (bool(self._pending) and b"content_block_stop" in event))

    def on_event(self, data: Any, out: Out) -> None:
        if not isinstance(data, dict):
            return
        kind, index = data.get("type"), data.get("index")
        if kind == "message_start" and isinstance(message := data.get("message"), dict):
            self._model = _text(message.get("model"))
        elif kind == "content_block_start" and isinstance(block := data.get("content_block"), dict):
            if block.get("type") == "thinking":
                self._pending[index] = ("thinking", [_text(block.get("thinking"))], [_text(block.get("signature"))])
            elif block.get("type") == "redacted_thinking":
                self._pending[index] = ("redacted_thinking", [_text(block.get("data"))], [])
        elif kind == "content_block_delta" and index in self._pending and isinstance(delta := data.get("delta"), dict):
            if delta.get("type") == "thinking_delta":
                self._pending[index][1].append(_text(delta.get("thinking")))
            elif delta.get("type") == "signature_delta":
                self._pending[index][2].append(_text(delta.get("signature")))
        elif kind == "content_block_stop" and index in self._pending:
            self._emit(index, out)

    def _emit(self, index: Any, out: Out) -> None:
        kind, text, signature = self._pending.pop(index)
        if kind == "thinking":
            block = {"type": kind, "thinking": "".join(text), "signature": "".join(signature)}
        else:
            block = {"type": kind, "data": "".join(text)}
        out.extend(_record(block, self._model))

    def finish(self, out: Out) -> None:
        """A block never stopped was cut off: its signature may be incomplete, so it is not reported."""
        self._pending.clear()

    def forget_partial(self) -> None:
        self._pending.clear()
