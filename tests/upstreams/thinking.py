"""What a mock upstream signed and issued, and the checks that need it: Anthropic's signatures, thinking replay.

Each :class:`~tests.upstreams.mock.MockUpstream` has one :class:`Ledger`. A test signs the thinking of the answers
it queues with :meth:`Ledger.sign` (an HMAC over the thinking text, with a key the ledger draws per signer: the
``anthropic`` rules' key is the mock's own, another name plays another provider, whose blocks Anthropic cannot
verify); the mock reads every streamed answer it sends (:meth:`Ledger.observe`) and remembers what it issued.

The checks (session-killers §3.2, exact texts, Anthropic's error shape), for the ``anthropic`` rules:

- every thinking block of every assistant message carries a signature this mock made for exactly that text:
  ``messages.N.content.M.thinking.signature: Field required`` (opencode #25005) when there is none, else
  ``messages.N.content.M: Invalid `signature` in `thinking` block`` (another provider's, an edited block, an empty
  or a truncated signature); a ``redacted_thinking`` block's ``data`` likewise (inferred text:
  ``Invalid `data` in `redacted_thinking` block``);
- a message holding thinking blocks starts with one: ``messages.N.content.0: If an assistant message contains any
  thinking blocks, the first block must be thinking or redacted_thinking. Found text.`` (session-killers §3.2);
- no message is empty except a final assistant one: ``messages.N: all messages must have non-empty content except
  for the optional final assistant message`` (Anthropic's text for an empty ``content``);
- the latest assistant message, when the mock issued it (recognised by its tool_use ids, else its text), carries
  exactly the thinking blocks it issued, in order: ``messages.N.content.M: `thinking` or `redacted_thinking` blocks
  in the latest assistant message cannot be modified. These blocks must remain as they were in the original
  response.``

For the ``deepseek`` rules: an assistant message whose ``reasoning_content`` is not what the mock issued for that
turn gets DeepSeek's thinking-mode 400 (a placeholder ``"."`` was rejected with that text, can1357/oh-my-pi #897;
how DeepSeek tells is not known). Presence is the pure rule's (tests/upstreams/reasoning_rules.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
from typing import Any

from tests.upstreams.access import as_dict, as_list, type_of
from tests.upstreams.errors import Rejection, anthropic_error, deepseek_error
from tests.upstreams.reasoning_rules import DEEPSEEK_TEXT
from tests.upstreams.sse import split_events

ANTHROPIC = "anthropic"
THINKING = ("thinking", "redacted_thinking")
LATEST = ("`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified. These "
          "blocks must remain as they were in the original response.")


def _events(text: str) -> list[dict[str, Any]]:
    out = []
    for raw in split_events(text):
        for line in raw.decode().splitlines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                try:
                    data = json.loads(line[5:])
                except ValueError:
                    continue
                if isinstance(data, dict):
                    out.append(data)
    return out


def _turn_key(blocks: list[Any]) -> tuple[str, ...]:
    ids = tuple(str(as_dict(b).get("id")) for b in blocks if type_of(b) == "tool_use")
    if ids:
        return ("tool_use", *ids)
    text = next((as_dict(b).get("text") for b in blocks if type_of(b) == "text"), None)
    return ("text", str(text)) if text is not None else ()


def _thinking_of(blocks: list[Any]) -> list[dict[str, Any]]:
    """The thinking blocks of a message as the signature covers them (type, text, signature / data)."""
    keep = ("type", "thinking", "signature", "data")
    return [{k: v for k, v in as_dict(b).items() if k in keep} for b in blocks if type_of(b) in THINKING]


class Ledger:
    """Signing keys per signer, and what the mock issued: thinking blocks per Anthropic turn, reasoning per Chat
    turn."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[str, bytes] = {}
        self._blocks: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        self._reasoning: dict[str, str] = {}

    # -- signing ---------------------------------------------------------------------------------------------
    def _key(self, signer: str) -> bytes:
        with self._lock:
            return self._keys.setdefault(signer, secrets.token_bytes(32))

    def sign(self, thinking: str, signer: str = ANTHROPIC) -> str:
        """A signature of ``thinking`` by ``signer`` (an opaque base64 token, like Anthropic's)."""
        mac = hmac.new(self._key(signer), b"thinking\0" + thinking.encode(), hashlib.sha256).digest()
        return base64.b64encode(b"\x12\x08" + mac + hashlib.sha256(mac).digest()).decode()

    def redacted(self, signer: str = ANTHROPIC) -> str:
        """A ``redacted_thinking`` block's ``data``, made by ``signer``."""
        nonce = secrets.token_bytes(24)
        mac = hmac.new(self._key(signer), b"redacted\0" + nonce, hashlib.sha256).digest()
        return base64.b64encode(nonce + mac).decode()

    def _valid(self, block: dict[str, Any], signer: str) -> bool:
        if block.get("type") == "thinking":
            text, signature = block.get("thinking"), block.get("signature")
            return isinstance(text, str) and isinstance(signature, str) and hmac.compare_digest(
                signature, self.sign(text, signer))
        try:
            raw = base64.b64decode(str(block.get("data")), validate=True)
        except ValueError:
            return False
        mac = hmac.new(self._key(signer), b"redacted\0" + raw[:24], hashlib.sha256).digest()
        return len(raw) == 56 and hmac.compare_digest(raw[24:], mac)

    # -- what was issued ---------------------------------------------------------------------------------------
    def observe(self, rules: str, dialect: str | None, text: str) -> None:
        """Remember what a streamed answer the mock sends issued."""
        if dialect == "messages":
            self._observe_messages(text)
        elif dialect == "chat":
            self._observe_chat(text)

    def _observe_messages(self, text: str) -> None:
        blocks: dict[Any, dict[str, Any]] = {}
        for e in _events(text):
            kind, index = e.get("type"), e.get("index")
            if kind == "content_block_start":
                blocks[index] = dict(as_dict(e.get("content_block")))
            elif kind == "content_block_delta" and index in blocks:
                delta = as_dict(e.get("delta"))
                field = {"thinking_delta": "thinking", "signature_delta": "signature", "text_delta": "text"}.get(
                    str(delta.get("type")))
                if field:
                    blocks[index][field] = str(blocks[index].get(field, "")) + str(delta.get(field, ""))
        ordered = [blocks[k] for k in sorted(blocks, key=lambda k: k if isinstance(k, int) else 0)]
        key = _turn_key(ordered)
        if key:
            with self._lock:
                self._blocks[key] = _thinking_of(ordered)

    def _observe_chat(self, text: str) -> None:
        turns: dict[Any, tuple[list[str], list[str], list[str]]] = {}
        for e in _events(text):
            for choice in as_list(e.get("choices")):
                delta = as_dict(as_dict(choice).get("delta"))
                reasoning, content, ids = turns.setdefault(as_dict(choice).get("index", 0), ([], [], []))
                if isinstance(delta.get("reasoning_content"), str):
                    reasoning.append(delta["reasoning_content"])
                if isinstance(delta.get("content"), str):
                    content.append(delta["content"])
                ids += [str(as_dict(tc).get("id")) for tc in as_list(delta.get("tool_calls")) if as_dict(tc).get("id")]
        with self._lock:
            for reasoning, content, ids in turns.values():
                if reasoning:
                    for key in ids or ["text:" + "".join(content)]:
                        self._reasoning[key] = "".join(reasoning)

    # -- checks ------------------------------------------------------------------------------------------------
    def check(self, rules: str, dialect: str | None, body: Any) -> Rejection | None:
        if not isinstance(body, dict):
            return None
        if dialect == "messages" and rules == ANTHROPIC:
            return self._check_anthropic(as_list(body.get("messages")))
        if dialect == "chat" and rules == "deepseek":
            return self._check_deepseek(as_list(body.get("messages")))
        return None

    def _check_anthropic(self, messages: list[Any]) -> Rejection | None:
        latest = max((i for i, m in enumerate(messages) if as_dict(m).get("role") == "assistant"), default=-1)
        for i, m in enumerate(messages):
            content = as_dict(m).get("content")
            if content in ([], "") and not (i == len(messages) - 1 and as_dict(m).get("role") == "assistant"):
                return anthropic_error(f"messages.{i}: all messages must have non-empty content except for the "
                                       "optional final assistant message", reason="empty-content")
            if as_dict(m).get("role") != "assistant":
                continue
            blocks = as_list(content)
            if any(type_of(b) in THINKING for b in blocks) and type_of(blocks[0]) not in THINKING:
                return anthropic_error(f"messages.{i}.content.0: If an assistant message contains any thinking "
                                       "blocks, the first block must be thinking or redacted_thinking. Found "
                                       f"{type_of(blocks[0])}.", reason="thinking-not-first")
            for j, b in enumerate(blocks):
                if type_of(b) == "thinking" and "signature" not in as_dict(b):
                    return anthropic_error(f"messages.{i}.content.{j}.thinking.signature: Field required",
                                           reason="thinking-unsigned")
                if type_of(b) in THINKING and not self._valid(as_dict(b), ANTHROPIC):
                    what = "`signature` in `thinking`" if type_of(b) == "thinking" else "`data` in `redacted_thinking`"
                    return anthropic_error(f"messages.{i}.content.{j}: Invalid {what} block",
                                           reason="thinking-signature-invalid")
        return self._check_latest(messages, latest)

    def _check_latest(self, messages: list[Any], latest: int) -> Rejection | None:
        if latest < 0:
            return None
        blocks = as_list(as_dict(messages[latest]).get("content"))
        with self._lock:
            issued = self._blocks.get(_turn_key(blocks))
        if issued is None or _thinking_of(blocks) == issued:
            return None
        at = next((j for j, b in enumerate(blocks) if type_of(b) in THINKING), 0)
        return anthropic_error(f"messages.{latest}.content.{at}: {LATEST}", reason="latest-thinking-modified")

    def _check_deepseek(self, messages: list[Any]) -> Rejection | None:
        with self._lock:
            issued = dict(self._reasoning)
        for m in messages:
            m = as_dict(m)
            given = m.get("reasoning_content")
            if m.get("role") != "assistant" or not isinstance(given, str) or not given:
                continue
            ids = [str(as_dict(tc).get("id")) for tc in as_list(m.get("tool_calls"))]
            keys = ids or [f"text:{m.get('content')}"]
            if any(k in issued and issued[k] != given for k in keys):
                return deepseek_error(DEEPSEEK_TEXT, reason="reasoning-content-not-issued")
        return None
