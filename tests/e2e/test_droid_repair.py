"""End to end: Droid's broken turn 2 reaches a strict Chat upstream valid, across a restart.

Turn 1 goes through llmfix and the mock streams the captured answer that declared both calls;
mitmdump is restarted; turn 2 (declaration of call_mock_b trimmed, image messages interleaved) goes
through and the mock — which answers 400 with OpenAI's texts on orphans, user messages inside a tool
run, missing results and images in tool messages — answers 200.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.e2e.loopback_http import LoopbackHTTP
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(180)
FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
URL = "https://api.openai.com/v1/chat/completions"
TURN1_SSE = "droid/two_images__turn1_response.sse.txt"
STREAMED = {  # what the captured turn-1 stream declared
    "call_mock_a": ("Read", '{"file_path": "/home/dev/project/a.png"}'),
    "call_mock_b": ("Read", '{"file_path": "/home/dev/project/b.png"}'),
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[MockUpstream]:
    with MockUpstream(rules="openai") as up:
        yield up


def proxy(upstream_address: str, confdir: Path, memory: str, llmfix: bool = True) -> Mitmdump:
    scripts = [FIX_SCRIPT, LOOPBACK_SCRIPT] if llmfix else [LOOPBACK_SCRIPT]
    options = {"loopback_upstream": upstream_address, "connection_strategy": "lazy"}
    if llmfix:
        options["llmfix_memory"] = memory
    return Mitmdump(scripts=scripts, options=options, confdir=confdir)


def post(p: Mitmdump, raw: bytes) -> httpx.Response:
    with httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=30) as c:
        return c.post(URL, content=raw, headers={"content-type": "application/json"})


def run_turn1(p: Mitmdump, upstream: MockUpstream, version: str) -> list[Any]:
    upstream.queue_sse(capture_bytes(TURN1_SSE).decode(), chunk_delay=0.01)
    body = capture_json(f"droid/{version}__two_images__turn1.json")
    with httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=30) as http:
        sdk = openai.OpenAI(base_url="https://api.openai.com/v1", api_key="sk-test-droid", http_client=http,
                            max_retries=0)
        return list(sdk.chat.completions.create(**body))


@pytest.mark.parametrize("version", ["0.215.0", "0.225.2"])
def test_turn2_is_valid_after_a_restart(upstream: MockUpstream, tmp_path: Path, version: str) -> None:
    memory = str(tmp_path / "memory.sqlite3")
    with proxy(upstream.address, tmp_path / "conf", memory) as p:
        chunks = run_turn1(p, upstream, version)
    assert [tc.id for c in chunks for tc in (c.choices[0].delta.tool_calls or []) if c.choices] == list(STREAMED)

    raw = capture_bytes(f"droid/{version}__two_images__turn2.json")
    sent = json.loads(raw)
    with proxy(upstream.address, tmp_path / "conf", memory) as p:  # a fresh process: only the file remembers
        before = len(upstream.requests)
        response = post(p, raw)
        p.wait_for_output("untangle-tool-run")
    assert response.status_code == 200, response.text
    [seen] = upstream.requests[before:]
    got = seen.json["messages"]
    n = len(sent["messages"])
    assistant, tool_a, tool_b, image_a, image_b = got[n - 5:]
    declared = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in assistant["tool_calls"]]
    assert declared == [(cid, name, json.loads(args)) for cid, (name, args) in STREAMED.items()]
    assert assistant["tool_calls"][1]["function"]["arguments"] == STREAMED["call_mock_b"][1]  # as streamed
    assert (tool_a["tool_call_id"], tool_b["tool_call_id"]) == ("call_mock_a", "call_mock_b")
    assert [image_a, image_b] == [sent["messages"][n - 3], sent["messages"][n - 1]]  # both after, in order


@pytest.mark.parametrize("version", ["0.215.0", "0.225.2"])
def test_without_llmfix_turn2_gets_the_sticky_400(upstream: MockUpstream, tmp_path: Path, version: str) -> None:
    with proxy(upstream.address, tmp_path / "conf", "", llmfix=False) as p:
        response = post(p, capture_bytes(f"droid/{version}__two_images__turn2.json"))
    assert response.status_code == 400
    assert "must be a response to a preceeding message with 'tool_calls'" in response.json()["error"]["message"]


def test_without_memory_of_turn1_nothing_is_lost(upstream: MockUpstream, tmp_path: Path) -> None:
    raw = capture_bytes("droid/0.225.2__two_images__turn2.json")
    sent = json.loads(raw)
    with proxy(upstream.address, tmp_path / "conf", ":memory:") as p:
        before = len(upstream.requests)
        response = post(p, raw)
    assert response.status_code == 200, response.text
    [seen] = upstream.requests[before:]
    text = json.dumps(seen.json)
    orphan = sent["messages"][-2]
    assert orphan["role"] == "tool" and orphan["tool_call_id"] == "call_mock_b"
    assert json.dumps(orphan["content"])[1:-1] in text  # the orphan's text is there
    for m in sent["messages"]:
        for part in m["content"] if isinstance(m["content"], list) else []:
            if part.get("type") == "image_url":
                assert text.count(part["image_url"]["url"]) >= 1  # every image is there


@pytest.mark.parametrize("scenario", ["single_image", "text_then_image", "two_images_noimg"])
@pytest.mark.parametrize("version", ["0.215.0", "0.225.2"])
def test_valid_droid_turns_pass_byte_identical(upstream: MockUpstream, tmp_path_factory, scenario, version) -> None:
    conf = tmp_path_factory.getbasetemp() / "droid-valid-conf"
    with proxy(upstream.address, conf, ":memory:") as p:
        for turn in (1, 2):
            raw = capture_bytes(f"droid/{version}__{scenario}__turn{turn}.json")
            before = len(upstream.requests)
            assert post(p, raw).status_code == 200
            [seen] = upstream.requests[before:]
            assert seen.body == raw


class GatedSSE(LoopbackHTTP):
    """An SSE upstream that sends its first event, then waits until the client says it has it."""

    def __init__(self) -> None:
        self.client_got_first = threading.Event()
        self.released_by_client: bool | None = None
        gate = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                chunk = b'data: {"choices":[{"index":0,"delta":{"content":"first"}}]}\n\n'
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                gate.released_by_client = gate.client_got_first.wait(timeout=15)
                for chunk in (b'data: {"choices":[{"index":0,"delta":{"content":"second"}}]}\n\n', b"data: [DONE]\n\n"):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)

    def __exit__(self, *exc: Any) -> None:
        self.client_got_first.set()
        super().__exit__(*exc)


def test_streamed_chunks_reach_the_client_before_the_stream_ends(tmp_path: Path) -> None:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with GatedSSE() as gated, proxy(gated.address, tmp_path / "conf", ":memory:") as p:
        client = httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=30)
        with client, client.stream("POST", URL, json=body) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            first = next(line for line in lines if line.startswith("data:"))
            gated.client_got_first.set()  # only now may the upstream finish the stream
            rest = [line for line in lines if line.startswith("data:")]
    assert "first" in first
    assert gated.released_by_client is True  # the first event arrived while the upstream held the stream open
    assert rest[-1] == "data: [DONE]" and "second" in rest[0]
