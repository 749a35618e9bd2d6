"""Which API dialect a request speaks, decided from its method, path and content type.

The dialect comes from the path's last segments, so any prefix works (``/v1/responses``,
``/api/v1/responses``, ``/openai/v1/responses``, ``/zen/go/v1/chat/completions``). The body's shape
confirms it later (:func:`llmfix.body.conversation.parse`). Everything else — other methods, other paths,
non-JSON bodies — is not LLM traffic for llmfix and passes with no further work.
"""

from __future__ import annotations

from enum import StrEnum


class Dialect(StrEnum):
    CHAT = "chat"
    RESPONSES = "responses"
    MESSAGES = "messages"


_SUFFIXES: tuple[tuple[str, Dialect], ...] = (
    ("/chat/completions", Dialect.CHAT),
    ("/responses", Dialect.RESPONSES),
    ("/messages", Dialect.MESSAGES),
)


def dialect_for(method: str, path: str, content_type: str | None) -> Dialect | None:
    """The dialect of a request, or None when it is not an LLM request llmfix repairs."""
    if method != "POST":
        return None
    if content_type and "json" not in content_type.lower():
        return None
    p = path.split("?", 1)[0].split("#", 1)[0].rstrip("/").lower()
    for suffix, dialect in _SUFFIXES:
        if p.endswith(suffix):
            return dialect
    return None


def upgrade_dialect(method: str, path: str, upgrade: str | None) -> Dialect | None:
    """The dialect of a WebSocket upgrade llmfix repairs the messages of: ``GET …/responses`` with ``Upgrade:
    websocket`` (the Responses API's WebSocket transport, any prefix); None for any other request."""
    if method != "GET" or not upgrade or upgrade.lower() != "websocket":
        return None
    p = path.split("?", 1)[0].split("#", 1)[0].rstrip("/").lower()
    return Dialect.RESPONSES if p.endswith("/responses") else None
