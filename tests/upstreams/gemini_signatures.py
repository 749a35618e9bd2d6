"""Thought signatures the Gemini mock issues, and the checks that need them.

A signature is opaque base64, as Google's (a protobuf-looking envelope, field 2 first: ``\\x12`` + length, as
CLIProxyAPI's heuristics see Gemini 3's): a random nonce and an HMAC over the nonce and what the signature is for —
a function call's name and arguments (canonical JSON), or nothing for a text part — keyed per *signer*. A signer is
a backend: ``"gemini"`` (the Gemini API and its OpenAI-compatible door), ``"vertex"``, ``"code-assist"``; any other
name plays another mock or account. "Vertex and Genai have incompatible encryption" (gemini-cli, ``config.ts
refreshAuth``): a signature is valid only on the backend that issued it.

The checks (https://ai.google.dev/gemini-api/docs/thought-signatures,
https://docs.cloud.google.com/vertex-ai/generative-ai/docs/thought-signatures), for Gemini 3 models (``gemini-3*``
and later, not the image models):

- every signature present — on any part, of any turn unless ``verify_history`` is off — is one this backend issued
  (or one a test declared issued with `SignatureLedger.trust`, e.g. a real capture's), or one of Google's two
  documented dummies, raw or base64-encoded: else ``Corrupted thought signature.`` (Vertex, Code Assist: ``Thought
  signature is not valid``);
- in the current turn (from the last user content with standard content and no ``functionResponse``), the first
  ``functionCall`` part of each model content carries one: else the missing-signature text naming the call and the
  content's position. Sibling calls and older turns need none.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
import threading
from typing import Any

from tests.upstreams.gemini_errors import Backend, GeminiError, invalid_signature, missing_signature
from tests.upstreams.gemini_rules import calls_in, current_turn, member, parts_of, role_of

DUMMIES = ("skip_thought_signature_validator", "context_engineering_is_the_way_to_go")
DUMMY_FORMS = frozenset(DUMMIES) | {base64.b64encode(d.encode()).decode() for d in DUMMIES}
NONCE = 12
MAC = 32
_GEMINI_MAJOR = re.compile(r"gemini-(\d+)")


def requires_signatures(model: str | None) -> bool:
    """Gemini 3 and later validate signatures; "Gemini 3 Pro Image doesn't enforce this validation"."""
    match = _GEMINI_MAJOR.search(model or "")
    return bool(match) and int(match.group(1)) >= 3 and "image" not in (model or "")


def signer_of(backend: Backend) -> str:
    """Whose key a backend signs with: the door is the Gemini API's."""
    return "gemini" if backend == "door" else backend


def call_binding(name: Any, args: Any) -> bytes:
    """What a function call's signature covers: its name and arguments (canonical JSON)."""
    canonical = json.dumps(args if args is not None else {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return b"call\0" + str(name).encode() + b"\0" + canonical.encode()


TEXT_BINDING = b"text\0"


def _decode(signature: str) -> bytes | None:
    text = signature.strip()
    try:
        alt = b"-_" if ("-" in text or "_" in text) else b"+/"
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=alt, validate=True)
    except (binascii.Error, ValueError):
        return None


class SignatureLedger:
    """Signing keys per signer, and the signatures tests declared issued."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[str, bytes] = {}
        self._trusted: dict[str, set[str]] = {}
        self.verify_history = True  # False: only the current turn's signatures are decoded

    def _key(self, signer: str) -> bytes:
        with self._lock:
            return self._keys.setdefault(signer, secrets.token_bytes(32))

    def _sign(self, binding: bytes, signer: str) -> str:
        nonce = secrets.token_bytes(NONCE)
        mac = hmac.new(self._key(signer), nonce + binding, hashlib.sha256).digest()
        return base64.b64encode(b"\x12" + bytes([NONCE + MAC]) + nonce + mac).decode()

    def sign_call(self, name: str, args: Any, signer: str = "gemini") -> str:
        """A signature ``signer`` issues with the call ``name(args)``."""
        return self._sign(call_binding(name, args), signer)

    def sign_text(self, signer: str = "gemini") -> str:
        """A signature ``signer`` issues on a text part (the last part of an answer without calls)."""
        return self._sign(TEXT_BINDING, signer)

    def trust(self, *signatures: str, signer: str = "gemini") -> None:
        """Treat ``signatures`` as issued by ``signer`` (a real answer's, e.g. the Gemini CLI capture's)."""
        with self._lock:
            self._trusted.setdefault(signer, set()).update(signatures)

    def valid(self, signature: str, part: dict[str, Any], signer: str) -> bool:
        """Whether ``signer`` issued ``signature`` for this part (or it is a dummy or trusted)."""
        if signature in DUMMY_FORMS:
            return True
        with self._lock:
            if signature in self._trusted.get(signer, ()):
                return True
        raw = _decode(signature)
        if raw is None or len(raw) != 2 + NONCE + MAC or raw[:2] != b"\x12" + bytes([NONCE + MAC]):
            return False
        call = member(part, "functionCall")
        binding = call_binding(member(call, "name"), member(call, "args")) if isinstance(call, dict) else TEXT_BINDING
        nonce, mac = raw[2:2 + NONCE], raw[2 + NONCE:]
        return hmac.compare_digest(mac, hmac.new(self._key(signer), nonce + binding, hashlib.sha256).digest())

    def check(self, contents: list[Any], *, backend: Backend, model: str | None) -> GeminiError | None:
        """The signature 400 for ``contents`` sent to ``backend`` with ``model``, or None."""
        if not requires_signatures(model):
            return None
        signer = signer_of(backend)
        start = current_turn(contents)
        for i, content in enumerate(contents):
            if i < start and not self.verify_history:
                continue
            for part in parts_of(content):
                signature = member(part, "thoughtSignature")
                if isinstance(signature, str) and signature and not self.valid(signature, part, signer):
                    return GeminiError(invalid_signature(backend), "signature-invalid")
        for i, content in enumerate(contents[start:], start):
            calls = calls_in(content)
            if role_of(content) == "model" and calls and not member(calls[0], "thoughtSignature"):
                name = member(member(calls[0], "functionCall"), "name")
                return GeminiError(missing_signature(backend, str(name), i + 1), "signature-missing")
        return None
