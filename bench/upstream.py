"""A lean upstream for the bench, run as its own process so it never competes for the bench's GIL.

    python bench/upstream.py            # prints "PORT <n>" on stdout, serves until stdin closes

HTTP/1.1 keep-alive, Nagle off (see mitmproxy-notes §7: without it every small answer waits ~40 ms
for a delayed ACK). Every request body is drained into a reusable buffer (no JSON parsing: the
upstream's own cost must not vary with the body), and answered, with ``x-bench-received: <body
bytes>`` so the bench can tell a repaired body, by:

- ``?sse=<n>&gap_ms=<g>``: a Responses-style SSE stream (chunked, one event per chunk): the first
  event at once, then ``n`` ``response.output_text.delta`` events ``g`` ms apart, then
  ``response.completed``;
- a path ending in ``/responses``, ``/chat/completions`` or ``/messages``: a small JSON answer of
  that dialect with no tool calls;
- a Gemini path (``…:generateContent``: JSON; ``…:streamGenerateContent``: one SSE event, ``data: …``, with a
  content-length): a small Gemini answer, one text part, no function call;
- anything else: ``{"ok":true}``.
"""

from __future__ import annotations

import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import orjson

_JSON = {
    "responses": orjson.dumps({"id": "resp_bench", "object": "response", "status": "completed", "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]}),
    "chat": orjson.dumps({"id": "chatcmpl-bench", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}),
    "messages": orjson.dumps({"id": "msg_bench", "type": "message", "role": "assistant",
                              "content": [{"type": "text", "text": "ok"}]}),
    "gemini": orjson.dumps({"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                                            "finishReason": "STOP", "index": 0}],
                            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
                            "modelVersion": "gemini-3.1-pro-preview", "responseId": "bench"}),
    "other": b'{"ok":true}',
}


def _event(obj: dict) -> bytes:
    return b"event: " + obj["type"].encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    _buf = threading.local()

    def log_message(self, *args: object) -> None:
        pass

    def _drain(self) -> int:
        n = total = int(self.headers.get("content-length") or 0)
        buf = getattr(self._buf, "b", None)
        if buf is None:
            buf = self._buf.b = memoryview(bytearray(1 << 20))
        while n > 0:
            got = self.rfile.readinto(buf[: min(n, len(buf))])
            if not got:
                raise ConnectionError("client went away")
            n -= got
        return total

    def do_GET(self) -> None:
        self._answer(0)

    def do_POST(self) -> None:
        self._answer(self._drain())

    def _answer(self, received: int) -> None:
        url = urlsplit(self.path)
        q = parse_qs(url.query)
        if "sse" in q:
            self._sse(int(q["sse"][0]), float(q.get("gap_ms", ["10"])[0]) / 1000)
            return
        p = url.path.rstrip("/")
        if p.endswith(":streamGenerateContent"):
            body = b"data: " + _JSON["gemini"] + b"\r\n\r\n"
            self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-bench-received: %d\r\n"
                             b"content-length: %d\r\n\r\n%s" % (received, len(body), body))
            return
        if p.endswith(":generateContent"):
            p = "/gemini"
        kind = next((k for k, s in (("responses", "/responses"), ("chat", "/chat/completions"),
                                    ("messages", "/messages"), ("gemini", "/gemini")) if p.endswith(s)), "other")
        body = _JSON[kind]
        self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-bench-received: %d\r\n"
                         b"content-length: %d\r\n\r\n%s" % (received, len(body), body))

    def _sse(self, n: int, gap: float) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                         b"transfer-encoding: chunked\r\n\r\n"
                         + _chunk(_event({"type": "response.created", "sequence_number": 0,
                                          "response": {"id": "resp_bench", "status": "in_progress"}})))
        next_at = time.perf_counter()
        for i in range(n):
            next_at += gap
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            ev = {"type": "response.output_text.delta", "sequence_number": i + 1, "item_id": "msg_bench",
                  "output_index": 0, "content_index": 0, "delta": f"token{i} "}
            self.wfile.write(_chunk(_event(ev)))
        done = {"type": "response.completed", "sequence_number": n + 1,
                "response": {"id": "resp_bench", "status": "completed", "output": []}}
        self.wfile.write(_chunk(_event(done)) + b"0\r\n\r\n")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def main() -> None:
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    sys.stdin.read()  # the bench closes our stdin (or dies) → we exit
    server.shutdown()


if __name__ == "__main__":
    main()
