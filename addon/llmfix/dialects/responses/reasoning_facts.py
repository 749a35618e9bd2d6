"""What a Responses rejection about reasoning items teaches about the body llmfix sent (``Rule.facts``).

Each function reads the rejection's text again (the rule's pattern names the ids) and the body as sent, and
returns :class:`~llmfix.memory.store.Reasoning` records (kinds in ``dialects/responses/learn.py``) for the
repairs to act on: ``pair-reasoning-items`` for the order texts, ``drop-unverifiable-reasoning`` for the
encrypted-content and not-persisted texts. Every answer that teaches something also carries a new marker for
the upstream, so that the fast path of a long session looks at its older items again. An id the body does not
hold teaches nothing (``[]``: the rejection is not resent).

What is inferred beyond the text, and why:

- ``invalid_encrypted_content`` names one item (or a few characters of one content), but encrypted content is
  bound to the organization that produced it: one the upstream cannot verify means the history comes from
  another account or channel, and the server reports only the first it meets. So every reasoning item of the
  body that carries ``encrypted_content`` is taught as refused, or the resend would fail on the next one
  (bifrost strips them all likewise). A named item that is not a reasoning item (a compaction item, ``cmp_…``)
  teaches nothing: its content is the compacted history itself, which llmfix will not drop.
- ``Item with id … not found. Items are not persisted when `store` is set to false``: with ``store: false`` the
  server holds none of the items it would have to look up, so when the named one is such an item, every item
  the server could only look up by its id (an ``item_reference``; a reasoning item with neither
  ``encrypted_content`` nor text) is taught as absent too.
"""

from __future__ import annotations

from typing import Any

from llmfix.dialects.responses import learn as lr
from llmfix.memory.learn_base import dicts
from llmfix.memory.store import Reasoning
from llmfix.retry.rules import Match, lesson


def _marked(kind: str, records: list[Reasoning], upstream: str) -> list[Reasoning]:
    """``records`` and the upstream's new marker in ``kind`` (:func:`lesson`), or [] when nothing was taught."""
    if not records:
        return []
    return [*records, Reasoning(kind, lr.marker(upstream), lesson(records), upstream)]


def _groups(found: Match) -> dict[str, str]:
    m = found.rule.pattern.search(found.text)
    return {k: v for k, v in m.groupdict().items() if v} if m else {}


def _items(body: dict[str, Any]) -> list[dict[str, Any]]:
    return dicts(body.get("input"))


def _ids(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in _items(body) if isinstance(item.get("id"), str)}


def missing_reasoning(found: Match, body: dict[str, Any], upstream: str) -> list[Reasoning]:
    """``Item 'fc_…' of type 'function_call' was provided without its required 'reasoning' item: 'rs_…'.``"""
    g = _groups(found)
    item, reasoning = g.get("item"), g.get("reasoning")
    if not item or not reasoning or item not in _ids(body):
        return []
    return _marked(lr.ORDER, [lr.taught_order(item, reasoning, upstream)], upstream)


def reasoning_alone(found: Match, body: dict[str, Any], upstream: str) -> list[Reasoning]:
    """``Item 'rs_…' of type 'reasoning' was provided without its required following item.``"""
    reasoning = _groups(found).get("reasoning")
    if not reasoning or _ids(body).get(reasoning, {}).get("type") != "reasoning":
        return []
    return _marked(lr.ORDER, [lr.taught_order(reasoning, None, upstream)], upstream)


def _sealed(item: dict[str, Any]) -> str | None:
    content = item.get("encrypted_content")
    return content if item.get("type") == "reasoning" and isinstance(content, str) and content else None


def unverifiable(found: Match, body: dict[str, Any], upstream: str) -> list[Reasoning]:
    """``The encrypted content for item rs_… could not be verified.`` (and the older ``The encrypted content
    gAAA...DQ== could not be verified.``): every encrypted reasoning item of the body, as refused."""
    g = _groups(found)
    contents = [c for item in _items(body) if (c := _sealed(item)) is not None]
    if "item" in g:
        named = _ids(body).get(g["item"].rstrip(".:"))
        if named is None or _sealed(named) is None:
            return []
    elif "content" in g:
        head, _, tail = g["content"].partition("...")
        if not any(c.startswith(head) and c.endswith(tail) for c in contents):
            return []
    records = [Reasoning(lr.REFUSED, lr.refused_content(upstream, c), "encrypted", upstream)
               for c in dict.fromkeys(contents)]
    return _marked(lr.REFUSED, records, upstream)


def _by_id_only(item: dict[str, Any]) -> bool:
    """An item the server can only look up by its id: an ``item_reference``, or a reasoning item with neither
    ``encrypted_content`` nor any summary or reasoning text."""
    if item.get("type") == "item_reference":
        return True
    texts = [p for key in ("summary", "content") for p in dicts(item.get(key)) if p.get("text")]
    return item.get("type") == "reasoning" and _sealed(item) is None and not texts


def not_persisted(found: Match, body: dict[str, Any], upstream: str) -> list[Reasoning]:
    """``Item with id 'rs_…' not found. Items are not persisted when `store` is set to false.``"""
    named = _ids(body).get(_groups(found).get("item") or "")
    if named is None:
        return []
    alike = [named]
    if body.get("store") is False and _by_id_only(named):
        alike += [i for i in _items(body) if _by_id_only(i)]
    kinds = {i["id"]: str(i.get("type") or "item") for i in alike if isinstance(i.get("id"), str)}
    records = [Reasoning(lr.REFUSED, lr.refused_item(upstream, x), kind, upstream) for x, kind in kinds.items()]
    return _marked(lr.REFUSED, records, upstream)
