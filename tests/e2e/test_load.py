"""Load through ONE llmfix (real mitmdump): 200 streamed answers and 200 requests needing repair, all at once.

- 200 concurrent Chat streams (plain HTTP to a loopback SSE server; llmfix routes them and attaches
  its stream learner): each carries its own id and numbered events; the client checks the full
  sequence (nothing lost, nothing reordered, nothing from another stream) and the final ``[DONE]``.
  Each stream ends by declaring a tool call, so llmfix learns 200 calls while streaming.
- 200 concurrent copies of pi-ai's xAI capture (HTTPS via CONNECT to api.x.ai, redirected to the
  strict mock): every one is answered 200, and every body the mock received is checked: string
  outputs, the image once in a user message right after the run, the client's own question last.
- Afterwards, a Chat request whose tool message lost its declaration gets it back from what the
  streams taught llmfix (memory under load works).

Zero errors anywhere, bounded timeouts; on this 2-core machine it takes about 15–30 s.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.upstreams.captures import capture_json
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(240)
FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
STREAMS = 200
REPAIRS = 200
EVENTS = 40
TIMEOUT = httpx.Timeout(90.0)
TROUBLE = re.compile(r"Traceback|Addon error|has crashed|left unchanged|internal error|stream learner failed")


class NumberedSSE:
    """A loopback HTTP/1.1 server answering each POST with ``EVENTS`` numbered Chat chunks of its ``stream_id``."""

    def __init__(self, events: int = EVENTS, delay: float = 0.005) -> None:
        self.events = events
        self.delay = delay
        self.served = 0
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="numbered-sse", daemon=True)

    def __enter__(self) -> NumberedSSE:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=512))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()
        server.close()

    def chunk(self, sid: int, seq: int) -> dict[str, Any]:
        delta: dict[str, Any] = {"content": f"{sid}:{seq} "}
        finish = None
        if seq == self.events - 1:
            delta = {"tool_calls": [{"index": 0, "id": f"call_load_{sid}", "type": "function",
                                     "function": {"name": "Read", "arguments": json.dumps({"n": sid})}}]}
            finish = "tool_calls"
        return {"id": f"chatcmpl-{sid}", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "seq": seq, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?im)^content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
                sid = json.loads(await reader.readexactly(length))["metadata"]["stream_id"]
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")
                for seq in range(self.events):
                    event = b"data: " + json.dumps(self.chunk(sid, seq)).encode() + b"\n\n"
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                    await writer.drain()
                    await asyncio.sleep(self.delay)
                done = b"data: [DONE]\n\n"
                writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
                await writer.drain()
                self.served += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture(scope="module")
def sse() -> Iterator[NumberedSSE]:
    with NumberedSSE() as server:
        yield server


@pytest.fixture(scope="module")
def proxy(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    options = {"loopback_upstream": upstream.address, "llmfix_memory": str(tmp_path_factory.mktemp("mem") / "m.db")}
    with Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options,
                  confdir=tmp_path_factory.mktemp("load-conf")) as p:
        yield p


def xai_body(k: int) -> dict[str, Any]:
    body = capture_json("pi-ai/xai_responses.json")
    body["input"][-1]["content"][0]["text"] = f"What colours do you see in it? (request {k})"
    for item in body["input"]:
        if item.get("call_id"):
            item["call_id"] = f"call_xai_{k}"
    return body


async def one_stream(client: httpx.AsyncClient, sse: NumberedSSE, sid: int) -> None:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}],
            "metadata": {"stream_id": sid}}
    seqs: list[int] = []
    tail: list[str] = []
    async with client.stream("POST", f"http://127.0.0.1:{sse.port}/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                tail.append(data)
                continue
            chunk = json.loads(data)
            assert chunk["id"] == f"chatcmpl-{sid}", f"stream {sid} got a chunk of {chunk['id']}"
            seqs.append(chunk["seq"])
    assert seqs == list(range(sse.events)), f"stream {sid}: {len(seqs)} events, out of order or lost"
    assert tail == ["[DONE]"]


async def one_repair(client: httpx.AsyncClient, k: int) -> None:
    response = await client.post("https://api.x.ai/v1/responses", json=xai_body(k))  # "stream": true
    assert response.status_code == 200, response.text
    assert "event: response.completed" in response.text


def check_repaired(seen: dict[str, Any], k: int, image: dict[str, Any]) -> None:
    items = seen["input"]
    assert [i.get("type") or i["role"] for i in items] == [
        "developer", "user", "function_call", "function_call_output", "message", "user"]
    assert isinstance(items[3]["output"], str) and items[3]["call_id"] == f"call_xai_{k}"
    assert items[4]["role"] == "user" and items[4]["content"][1] == image
    assert items[-1]["content"][0]["text"].endswith(f"(request {k})")


async def storm(proxy: Mitmdump, sse: NumberedSSE) -> list[BaseException | Any]:
    limits = httpx.Limits(max_connections=STREAMS + REPAIRS + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=TIMEOUT,
                                 limits=limits) as client:
        tasks = [one_stream(client, sse, sid) for sid in range(STREAMS)]
        tasks += [one_repair(client, k) for k in range(REPAIRS)]
        return await asyncio.gather(*tasks, return_exceptions=True)


def test_200_streams_and_200_repairs_at_once(proxy: Mitmdump, upstream: MockUpstream, sse: NumberedSSE) -> None:
    started = time.monotonic()
    results = asyncio.run(storm(proxy, sse))
    took = time.monotonic() - started
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"{len(errors)} of {len(results)} failed; first: {errors[0]!r}"
    assert sse.served == STREAMS

    image = capture_json("pi-ai/xai_responses.json")["input"][3]["output"][1]
    received = {}
    for r in upstream.requests:
        text = r.json["input"][-1]["content"][0]["text"]
        received[int(text.rsplit(" ", 1)[1].rstrip(")"))] = r
    assert sorted(received) == list(range(REPAIRS))
    for k, r in received.items():
        assert r.status == 200, (k, r.reason)
        check_repaired(r.json, k, image)
    print(f"{STREAMS} streams x {EVENTS} events + {REPAIRS} repairs through one llmfix: {took:.1f} s")

    output = proxy.output()
    assert proxy.running
    assert not TROUBLE.search(output), TROUBLE.search(output)
    assert len(re.findall(r"hoist-tool-media: input\[3\]\.output", output)) == REPAIRS


def test_calls_learned_from_the_streams_restore_a_trimmed_declaration(proxy: Mitmdump, upstream: MockUpstream) -> None:
    """After the storm: a Chat turn whose assistant lost call_load_123's declaration gets it back from memory."""
    body = {"model": "gpt-4.1", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "reading"},
        {"role": "tool", "tool_call_id": "call_load_123", "content": "done"},
    ]}
    before = len(upstream.requests)
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=30) as c:
        response = c.post("https://api.openai.com/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    [seen] = upstream.requests[before:]
    [call] = seen.json["messages"][1]["tool_calls"]
    assert call == {"id": "call_load_123", "type": "function", "function": {"name": "Read", "arguments": '{"n": 123}'}}
