"""Which API dialect a request speaks, decided from its method, path and content type.

The dialect comes from the path's last segments, each dialect naming its own (``shape.suffixes``), so any
prefix works (``/v1/responses``, ``/api/v1/responses``, ``/openai/v1/responses``,
``/zen/go/v1/chat/completions``). The body's shape confirms it later (:func:`llmfix.body.conversation.parse`).
Everything else — other methods, other paths, non-JSON bodies — is not LLM traffic for llmfix and passes with
no further work.
"""

from __future__ import annotations

from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import DIALECTS


def _path(path: str) -> str:
    return path.split("?", 1)[0].split("#", 1)[0].rstrip("/").lower()


def dialect_for(method: str, path: str, content_type: str | None) -> Dialect | None:
    """The dialect of a request, or None when it is not an LLM request llmfix repairs."""
    if method != "POST":
        return None
    if content_type and "json" not in content_type.lower():
        return None
    p = _path(path)
    for dialect in DIALECTS:
        if p.endswith(dialect.shape.suffixes):
            return dialect
    return None


def upgrade_dialect(method: str, path: str, upgrade: str | None) -> Dialect | None:
    """The dialect of a WebSocket upgrade llmfix repairs the messages of (``GET …/responses`` with ``Upgrade:
    websocket``: the Responses API's WebSocket transport, any prefix); None for any other request."""
    if method != "GET" or not upgrade or upgrade.lower() != "websocket":
        return None
    p = _path(path)
    return next((d for d in DIALECTS if d.shape.websocket(p)), None)
