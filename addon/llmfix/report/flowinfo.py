"""Which flow and message a content view is asked about, and what llmfix recorded on it."""

from __future__ import annotations

from mitmproxy import contentviews, http

from llmfix import route
from llmfix.route import Dialect

META = "llmfix"
DIALECT = "llmfix_dialect"  # the same key as llmfix.proxy.ROUTE (proxy imports this module)

def http_of(metadata: contentviews.Metadata) -> tuple[http.HTTPFlow, http.Message] | None:
    flow, message = metadata.flow, metadata.http_message
    if not isinstance(flow, http.HTTPFlow) or message is None:
        return None
    return (flow, message) if message is flow.request or message is flow.response else None


def info_of(metadata: contentviews.Metadata) -> dict | None:
    """llmfix's record of a request it changed, when ``metadata`` is that request."""
    found = http_of(metadata)
    if found is None or found[1] is not found[0].request:
        return None
    info = found[0].metadata.get(META)
    return info if isinstance(info, dict) and info.get("changes") else None


def dialect_of(flow: http.HTTPFlow) -> Dialect | None:
    """The API dialect of an LLM flow: as llmfix routed it, or from the request line of a flow it never saw."""
    seen = flow.metadata.get(DIALECT)
    if isinstance(seen, str) and seen in Dialect.__members__.values():
        return Dialect(seen)
    r = flow.request
    return route.dialect_for(r.method, r.path, r.headers.get("content-type"))


def is_sse(message: http.Message) -> bool:
    return message.headers.get("content-type", "").lower().startswith("text/event-stream")
