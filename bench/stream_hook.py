"""mitmproxy script for the bench: stream SSE answers (``flow.response.stream = True``), nothing else.

A second SSE baseline. ``stream_large_bodies=1`` (the first) also streams *request* bodies, which by
itself moves time to first event by about a millisecond; this one buffers requests as llmfix does.
"""

from mitmproxy import http


class StreamSSE:
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response and flow.response.headers.get("content-type", "").startswith("text/event-stream"):
            flow.response.stream = True


addons = [StreamSSE()]
