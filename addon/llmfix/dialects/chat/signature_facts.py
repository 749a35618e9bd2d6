"""What the refusal of a thought signature at Gemini's OpenAI-compatible door teaches about the request llmfix sent
(``Rule.facts``).

``Corrupted thought signature.`` names no call: a signature the upstream cannot verify came from another backend or
account, or was edited (google-gemini/gemini-cli #13467, after a switch from Google login to an API key), and a
history holding one usually holds several. So every signature on a tool call of the rejected request
(``extra_content.google`` or ``.vertex``) is taught as refused by this upstream, with a new marker for it;
restore-tool-call-signatures then takes them out of the older turns (Google allows clearing them there:
https://ai.google.dev/gemini-api/docs/thought-signatures) and gives the current turn's calls the remembered one or
Google's dummy. Google's documented dummies are never taught. A request holding no signature teaches nothing (``[]``:
not resent).
"""

from __future__ import annotations

from typing import Any

from llmfix.dialects.chat.learn_signatures import REFUSED, marker, refused_key, signature_of
from llmfix.dialects.gemini.signature_facts import DUMMIES, taught
from llmfix.memory.learn_base import dicts
from llmfix.memory.store import Reasoning
from llmfix.retry.rules import Match


def signatures(body: dict[str, Any]) -> list[str]:
    """Every thought signature on a tool call of a Chat request body, in order, each once, dummies left out."""
    out = [s for message in dicts(body.get("messages")) for call in dicts(message.get("tool_calls"))
           if (s := signature_of(call)) is not None and s not in DUMMIES]
    return list(dict.fromkeys(out))


def refused(found: Match, body: dict[str, Any], upstream: str) -> list[Reasoning]:
    return taught(REFUSED, refused_key, marker, found, signatures(body), upstream)
