"""What Gemini's refusal of a thought signature teaches about the request llmfix sent (``Rule.facts``).

``Corrupted thought signature.`` names no part: a signature the upstream cannot verify came from another backend, an
account it does not know, or was edited, and a history holding one usually holds several (gemini-cli strips them all
when its authentication changes: google-gemini/gemini-cli ``packages/cli/src/config/config.ts``). So every signature
of the rejected request is taught as refused by this upstream, with a new marker for it; restore-thought-signatures
then takes them out of the older turns (Google allows clearing them there:
https://ai.google.dev/gemini-api/docs/thought-signatures) and puts its documented dummy where the current turn needs
one. A request holding no signature teaches nothing (``[]``: not resent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmfix.dialects.gemini.learn import REFUSED, marker, refused_key
from llmfix.memory.learn_base import dicts
from llmfix.memory.store import Reasoning
from llmfix.retry.rules import Match, lesson

DUMMIES = frozenset({"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"})
"""Google's documented stand-ins for a signature nobody has (the Gemini API's thought-signatures FAQ)."""


def signatures(body: dict[str, Any]) -> list[str]:
    """Every thought signature of a request body (either spelling, in contents or Code Assist's envelope)."""
    holder = body.get("request") if "contents" not in body and isinstance(body.get("request"), dict) else body
    out = []
    for content in dicts(holder.get("contents")):
        for part in dicts(content.get("parts")):
            value = part.get("thoughtSignature", part.get("thought_signature"))
            if isinstance(value, str) and value and value not in DUMMIES:
                out.append(value)
    return list(dict.fromkeys(out))


def taught(kind: str, key: Callable[[str, str], str], mark: Callable[[str], str], found: Match,
           refused_ones: list[str], upstream: str) -> list[Reasoning]:
    """Each refused signature as a fact of ``kind`` for ``upstream``, with a new marker; nothing when none was sent."""
    records = [Reasoning(kind, key(upstream, s), found.rule.name, upstream) for s in refused_ones]
    if not records:
        return []
    return [*records, Reasoning(kind, mark(upstream), lesson(records), upstream)]


def refused(found: Match, body: dict[str, Any], upstream: str) -> list[Reasoning]:
    return taught(REFUSED, refused_key, marker, found, signatures(body), upstream)
