"""Which flow and message a content view is asked about, and what llmfix recorded on it."""

from __future__ import annotations

from mitmproxy import contentviews, http

from llmfix import route
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import NAMES, named

META = "llmfix"
DIALECT = "llmfix_dialect"  # the same key as llmfix.proxy.ROUTE (proxy imports this module)
MESSAGE_INFO = "llmfix_messages"
"""flow.metadata key of a WebSocket flow: {index in flow.websocket.messages, as a str: what llmfix did to it}."""
SOCKET = "llmfix_socket"
"""flow.metadata key of a WebSocket flow llmfix watches: the dialect its client messages carry."""

def flow_name(flow: http.HTTPFlow) -> str:
    """How logs name a flow: its short id, method and URL without the query (never a header, never a key)."""
    r = flow.request
    method = "WebSocket" if flow.websocket is not None else r.method
    return f"{flow.id[:8]} {method} {r.pretty_host}{r.path.split('?', 1)[0]}"


def http_of(metadata: contentviews.Metadata) -> tuple[http.HTTPFlow, http.Message] | None:
    flow, message = metadata.flow, metadata.http_message
    if not isinstance(flow, http.HTTPFlow) or message is None:
        return None
    return (flow, message) if message is flow.request or message is flow.response else None


def message_index(metadata: contentviews.Metadata) -> int | None:
    """The index in ``flow.websocket.messages`` of the WebSocket message ``metadata`` is about, when llmfix recorded
    something on it (found by identity among the recorded ones only: a long socket holds thousands of events)."""
    flow, message = metadata.flow, metadata.websocket_message
    if message is None or not isinstance(flow, http.HTTPFlow) or flow.websocket is None:
        return None
    records = flow.metadata.get(MESSAGE_INFO)
    messages = flow.websocket.messages
    for key in records if isinstance(records, dict) else ():
        if str(key).isdigit() and int(key) < len(messages) and messages[int(key)] is message:
            return int(key)
    return None


def info_of(metadata: contentviews.Metadata) -> dict | None:
    """llmfix's record of a request it changed, when ``metadata`` is that request (an HTTP request, or the
    WebSocket message that carried it)."""
    if (index := message_index(metadata)) is not None:
        info = metadata.flow.metadata[MESSAGE_INFO][str(index)]  # type: ignore[union-attr]
        return info if isinstance(info, dict) and info.get("changes") else None
    found = http_of(metadata)
    if found is None or found[1] is not found[0].request:
        return None
    info = found[0].metadata.get(META)
    return info if isinstance(info, dict) and info.get("changes") else None


def dialect_of(flow: http.HTTPFlow) -> Dialect | None:
    """The API dialect of an LLM flow: as llmfix routed it, or from the request line of a flow it never saw."""
    seen = flow.metadata.get(DIALECT)
    if isinstance(seen, str) and seen in NAMES:
        return named(seen)
    r = flow.request
    return route.dialect_for(r.method, r.path, r.headers.get("content-type"))


def is_sse(message: http.Message) -> bool:
    return message.headers.get("content-type", "").lower().startswith("text/event-stream")


def socket_request(metadata: contentviews.Metadata) -> Dialect | None:
    """The dialect of a client message on a WebSocket llmfix watches (the Responses API's), else None."""
    flow, message = metadata.flow, metadata.websocket_message
    if message is None or not message.from_client or not isinstance(flow, http.HTTPFlow):
        return None
    seen = flow.metadata.get(SOCKET)
    return named(seen) if isinstance(seen, str) and seen in NAMES else None
