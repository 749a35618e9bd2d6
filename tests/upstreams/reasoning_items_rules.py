"""OpenAI's checks of Responses reasoning items, as a strict mock must make them: they depend on what the
upstream issued, so a :class:`Ledger` (one per mock upstream) remembers it, per organization.

- Organizations. Each API key is its own organization (``org-`` + a hash of the bearer token): a key switch is
  an account switch. An organization seals the ``encrypted_content`` of the reasoning items it issues with its
  own key (an HMAC over its name and the item id); another organization cannot verify it:
  ``The encrypted content for item rs_… could not be verified. Reason: Encrypted content organization_id did
  not match the target organization.`` (the other reasons: ``… could not be decrypted or parsed.``, ``…
  item_id did not match the target item id.``); an item sent without its id gets the older form naming the
  content, ``The encrypted content gAAA...DQ== could not be verified.``. 400, ``param: null``, ``code:
  "invalid_encrypted_content"`` (session-killers.md §3.3).
- Not persisted (``store: false``): a reasoning item referenced by its id only (no ``encrypted_content``, no
  summary, no text), or an ``item_reference``: 404 ``Item with id 'rs_…' not found. Items are not persisted
  when `store` is set to false. Try again with `store` set to true, or remove this item from your input.``
  (session-killers §1.2: 404 in the one report).
- Order (session-killers §3.3, ``param: "input"``): an item sent with the id of an item this organization issued
  after a reasoning item needs that reasoning item in the input (or in the stored chain of
  ``previous_response_id``): ``Item 'fc_…' of type 'function_call' was provided without its required
  'reasoning' item: 'rs_…'.``; a reasoning item it issued must be directly followed by the item that followed it,
  with that item's id: ``Item 'rs_…' of type 'reasoning' was provided without its required following item.``.
  Ids it never issued (Codex mints ``msg_…`` and ``fco_…`` ids of its own) need nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.upstreams.access import as_dict, as_list, type_of
from tests.upstreams.errors import Rejection, openai_error

SEAL_PREFIX = "gAAAAB"
NOT_PERSISTED = ("Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again "
                 "with `store` set to true, or remove this item from your input.")
ORG_MISMATCH = "Encrypted content organization_id did not match the target organization."
UNREADABLE = "Encrypted content could not be decrypted or parsed."
ID_MISMATCH = "Encrypted content item_id did not match the target item id."


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Organization:
    """An organization of the mock; its key seals the reasoning it issues."""

    name: str

    @property
    def key(self) -> bytes:
        return hashlib.sha256(f"mock-openai-secret:{self.name}".encode()).digest()

    def seal(self, item_id: str, nonce: str = "") -> str:
        """The ``encrypted_content`` this organization issues for reasoning item ``item_id``."""
        payload = json.dumps({"org": self.name, "id": item_id, "n": nonce}, separators=(",", ":")).encode()
        tag = hmac.new(self.key, payload, hashlib.sha256).digest()
        return SEAL_PREFIX + _b64(payload) + "." + _b64(tag)

    def unseal(self, content: str) -> tuple[str | None, str | None]:
        """(the item id sealed in ``content``, None) when this organization can verify it, else (None, reason)."""
        try:
            body, _, tag = content.removeprefix(SEAL_PREFIX).partition(".")
            payload = _unb64(body)
            sealed = json.loads(payload)
            org, item = sealed["org"], sealed["id"]
        except (ValueError, KeyError, TypeError):
            return None, UNREADABLE
        if org != self.name:
            return None, ORG_MISMATCH
        try:
            good = hmac.compare_digest(_unb64(tag), hmac.new(self.key, payload, hashlib.sha256).digest())
        except ValueError:
            good = False
        return (item, None) if good and isinstance(item, str) else (None, UNREADABLE)


def organization_for(headers: dict[str, str]) -> Organization:
    """The organization of a request's API key (``authorization: Bearer …``; none: ``org-anonymous``)."""
    token = headers.get("authorization", "").removeprefix("Bearer ").strip()
    return Organization("org-" + hashlib.sha256(token.encode()).hexdigest()[:12] if token else "org-anonymous")


@dataclass
class _Issued:
    after: dict[str, str] = field(default_factory=dict)  # item id → the reasoning item it followed
    next: dict[str, str] = field(default_factory=dict)  # reasoning item id → the item right after it
    chains: dict[str, tuple[str | None, list[str]]] = field(default_factory=dict)  # response id → (previous, ids)


class Ledger:
    """What one mock upstream issued, per organization; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._orgs: dict[str, _Issued] = {}

    def issue(self, org: Organization, response: dict[str, Any], previous: str | None = None) -> None:
        """Remember the output of an answer this organization sent (its items in order)."""
        output = [as_dict(i) for i in as_list(response.get("output"))]
        with self._lock:
            issued = self._orgs.setdefault(org.name, _Issued())
            last: str | None = None
            for k, item in enumerate(output):
                item_id = item.get("id")
                if not isinstance(item_id, str):
                    continue
                if last is not None:
                    issued.after[item_id] = last
                if item.get("type") == "reasoning":
                    following = output[k + 1].get("id") if k + 1 < len(output) else None
                    if isinstance(following, str):
                        issued.next[item_id] = following
                    last = item_id
            if isinstance(response.get("id"), str):
                ids = [i["id"] for i in output if isinstance(i.get("id"), str)]
                issued.chains[response["id"]] = (previous, ids)

    def _chain(self, issued: _Issued, previous: Any) -> set[str]:
        held: set[str] = set()
        seen: set[str] = set()
        while isinstance(previous, str) and previous in issued.chains and previous not in seen:
            seen.add(previous)
            previous, ids = issued.chains[previous]
            held.update(ids)
        return held

    def check(self, org: Organization, body: dict[str, Any]) -> Rejection | None:
        """The first rejection OpenAI would give this organization for ``body``'s reasoning items, or None."""
        items = [as_dict(i) for i in as_list(body.get("input"))]
        names: dict[int, str] = {}
        for k, item in enumerate(items):
            rejection, name = _reasoning_item(org, body, item)
            if rejection is not None:
                return rejection
            if name is not None:
                names[k] = name
        with self._lock:
            issued = self._orgs.get(org.name, _Issued())
            after, nxt = dict(issued.after), dict(issued.next)
            held = self._chain(issued, body.get("previous_response_id"))
        present = set(names.values()) | held
        for item in items:
            item_id = item.get("id")
            if isinstance(item_id, str) and type_of(item) != "reasoning" and item_id in after \
                    and after[item_id] not in present:
                return openai_error(f"Item '{item_id}' of type '{type_of(item)}' was provided without its required "
                                    f"'reasoning' item: '{after[item_id]}'.", reason="reasoning-missing",
                                    param="input")
        for k, name in names.items():
            following = nxt.get(name)
            if following is not None and (k + 1 >= len(items) or items[k + 1].get("id") != following):
                return openai_error(f"Item '{name}' of type 'reasoning' was provided without its required following "
                                    "item.", reason="reasoning-alone", param="input")
        return None


def _reasoning_item(org: Organization, body: dict[str, Any], item: dict[str, Any]
                    ) -> tuple[Rejection | None, str | None]:
    """A rejection for this one item (its content, or what must be looked up), and the name of a reasoning item."""
    kind, item_id = type_of(item), item.get("id")
    if kind == "item_reference" and body.get("store") is False:
        return _not_persisted(item_id), None
    if kind != "reasoning":
        return None, None
    content = item.get("encrypted_content")
    if isinstance(content, str) and content:
        sealed, reason = org.unseal(content)
        if sealed is not None and isinstance(item_id, str) and sealed != item_id:
            sealed, reason = None, ID_MISMATCH
        if sealed is None:
            named = f"for item {item_id}" if isinstance(item_id, str) else f"{content[:4]}...{content[-4:]}"
            message = f"The encrypted content {named} could not be verified."
            if isinstance(item_id, str):
                message += f" Reason: {reason}"
            return openai_error(message, reason="encrypted-content", param=None,
                                code="invalid_encrypted_content"), None
        return None, sealed
    texts = [p for key in ("summary", "content") for p in as_list(item.get(key)) if as_dict(p).get("text")]
    if body.get("store") is False and not texts and isinstance(item_id, str):
        return _not_persisted(item_id), None
    return None, item_id if isinstance(item_id, str) else None


def _not_persisted(item_id: Any) -> Rejection:
    return openai_error(NOT_PERSISTED.format(id=item_id), reason="not-persisted", param="input", status=404)
