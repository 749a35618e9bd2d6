"""End to end: two real mitmdump instances with llmfix share one real redis-server.

- Droid's turn 1 streams through instance A, its broken turn 2 reaches instance B: the strict upstream
  answers 200 with the declarations as A saw them streamed.
- Codex behind a gateway: the client's leg through A, the gateway's leg through B: the image comes back.
- Codex's Responses turn 1 (a reasoning item, then the call) streams through A; turn 2, replayed without the
  reasoning item but with the call's fc_ id, reaches B: the strict upstream answers 200, the id removed.
- Redis killed mid-run: requests keep flowing through both, the no-memory repair still valid, one warning
  per instance; Redis back: each instance says so once and sharing resumes without a restart.
- Redis hung: the request that waits for it waits at most ``llmfix_memory_timeout``; an unrelated request
  on the same instance is answered meanwhile.
- Every key and value left in Redis: under ``llmfix:``, no Authorization value, no API key.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from llmfix.dialects.responses import learn as lr
from llmfix.memory.redis_store import reasoning_key
from tests.e2e.gateway import Gateway
from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.redis_server import BACK, UNREACHABLE, RedisServer, needs_redis, until
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import MockUpstream
from tests.upstreams.reasoned import codex_answer, codex_turn2, responses_sse
from tests.upstreams.reasoning_items_rules import organization_for

pytestmark = [needs_redis, pytest.mark.timeout(240)]
FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
CHAT = "https://api.openai.com/v1/chat/completions"
RESPONSES = "https://api.openai.com/v1/responses"
TURN1_SSE = "droid/two_images__turn1_response.sse.txt"
STREAMED = {  # what the captured turn-1 stream declared
    "call_mock_a": ("Read", '{"file_path": "/home/dev/project/a.png"}'),
    "call_mock_b": ("Read", '{"file_path": "/home/dev/project/b.png"}'),
}
API_KEY = "sk-test-fleet-4f9c2a7d0e1b83c6a5d4"
ANTHROPIC_KEY = "sk-ant-api03-fleet-9b1d7e3c5a2f8064"
HEADERS = {"content-type": "application/json", "authorization": f"Bearer {API_KEY}", "x-api-key": ANTHROPIC_KEY}
CODEX = capture_json("codex/turn2_request.json")
IMAGE = CODEX["input"][-1]["output"][0]
TIMEOUT_S = 5  # llmfix_memory_timeout of the instances: the most a request waits for a hung Redis


@pytest.fixture(scope="module")
def fleet(redis_server: RedisServer, upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[Mitmdump, Mitmdump]]:
    options = {"loopback_upstream": upstream.address, "connection_strategy": "lazy",
               "llmfix_memory": redis_server.url, "llmfix_memory_timeout": f"{TIMEOUT_S}s"}
    a = Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options, confdir=tmp_path_factory.mktemp("conf-a"))
    try:
        b = Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options, confdir=tmp_path_factory.mktemp("conf-b"))
    except BaseException:
        a.stop()
        raise
    with a, b:
        yield a, b


@pytest.fixture
def clean(redis_server: RedisServer) -> RedisServer:
    """The module's Redis, as the run left it (not flushed: an instance that wrote a call a moment ago does
    not write it again, and a flush behind its back is no outage it could notice)."""
    return redis_server


def post(p: Mitmdump, url: str, raw: bytes) -> httpx.Response:
    with httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=60) as c:
        return c.post(url, content=raw, headers=HEADERS)


def droid_turn1(p: Mitmdump, upstream: MockUpstream, version: str = "0.225.2") -> list[str]:
    upstream.queue_sse(capture_bytes(TURN1_SSE).decode(), chunk_delay=0.01)
    body = capture_json(f"droid/{version}__two_images__turn1.json")
    with httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=60) as http:
        sdk = openai.OpenAI(base_url="https://api.openai.com/v1", api_key=API_KEY, http_client=http, max_retries=0)
        chunks = list(sdk.chat.completions.create(**body))
    return [tc.id for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]


def assert_declared_as_streamed(upstream: MockUpstream, before: int, sent: dict[str, Any]) -> None:
    """The strict upstream took turn 2, whose assistant message declares both calls; call_mock_b, which
    Droid trimmed, with its arguments exactly as turn 1 streamed them (from the shared memory)."""
    [seen] = upstream.requests[before:]
    assert seen.status == 200, seen.reason
    calls = seen.json["messages"][len(sent["messages"]) - 5]["tool_calls"]
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        (i, name, json.loads(args)) for i, (name, args) in STREAMED.items()]
    assert calls[1]["function"]["arguments"] == STREAMED["call_mock_b"][1]


def shared(server: RedisServer, call_id: str) -> Callable[[], bool]:
    def check() -> bool:
        with server.client() as c:
            return bool(c.exists(b"llmfix:call:" + call_id.encode()))
    return check


def assert_no_secrets(server: RedisServer) -> None:
    dump = server.dump()
    assert dump  # the run did write to Redis
    for key, value in dump.items():
        assert key.startswith(b"llmfix:")
        for secret in (API_KEY, ANTHROPIC_KEY, "Bearer"):
            assert secret.encode() not in key and secret.encode() not in value, key


@pytest.mark.parametrize("version", ["0.215.0", "0.225.2"])
def test_droid_turn2_on_instance_b_gets_the_declarations_streamed_through_a(fleet, upstream, clean, version) -> None:
    a, b = fleet
    assert droid_turn1(a, upstream, version) == list(STREAMED)
    assert until(shared(clean, "call_mock_b"), 2.0)  # what a streamed answer taught is shared within 2 s
    raw = capture_bytes(f"droid/{version}__two_images__turn2.json")
    before = len(upstream.requests)
    response = post(b, CHAT, raw)
    assert response.status_code == 200, response.text
    assert_declared_as_streamed(upstream, before, json.loads(raw))
    b.wait_for_output("untangle-tool-run")
    assert_no_secrets(clean)


def test_gateway_legs_on_different_instances_get_the_image_back(fleet, upstream, clean) -> None:
    a, b = fleet
    with Gateway(mode="drop-media", proxy_url=b.url, verify=b.ssl_context(), upstream=RESPONSES) as gw:
        before = len(upstream.requests)
        response = post(a, f"{gw.url}/v1/responses", capture_bytes("codex/turn2_request.json"))  # client leg: A
    assert response.status_code == 200, response.text
    assert gw.forwarded[-1]["input"][-1]["output"] == ""  # the gateway really dropped it
    [seen] = upstream.requests[before:]  # the gateway's leg went through B
    assert seen.json["input"][-1]["output"] == [IMAGE]  # same bytes, detail kept
    b.wait_for_output("restore-tool-media")
    assert "restore-tool-media" not in a.output()
    with clean.client() as c:  # the client's request has ended: its media leave Redis (window 0s)
        assert until(lambda: not list(c.scan_iter(match=b"llmfix:media:*")), 1.0)
    assert_no_secrets(clean)


def test_reasoning_streamed_through_a_repairs_the_lost_reasoning_item_on_b(fleet, upstream, clean) -> None:
    a, b = fleet
    answer = codex_answer(1, organization_for(HEADERS), "fleet")
    upstream.queue_sse(responses_sse(answer), chunk_delay=0.002)
    with httpx.Client(proxy=a.url, verify=a.ssl_context(), trust_env=False, timeout=60) as http:
        sdk = openai.OpenAI(base_url="https://api.openai.com/v1", api_key=API_KEY, http_client=http, max_retries=0)
        body = capture_json("codex/turn1_request.json")
        del body["stream"]
        extra = {"client_metadata": body.pop("client_metadata")}
        assert list(sdk.responses.create(**body, extra_body=extra, stream=True))[-1].type == "response.completed"
    call = answer["output"][1]

    def learned() -> bool:
        with clean.client() as c:
            return bool(c.exists(reasoning_key(lr.ORDER, call["id"])))

    assert until(learned, 2.0)
    turn2 = codex_turn2(answer)
    del turn2["input"][4]  # the reasoning item lost, the call's fc_ id kept
    before = len(upstream.requests)
    response = post(b, RESPONSES, json.dumps(turn2).encode())
    assert response.status_code == 200, response.text
    [seen] = upstream.requests[before:]
    assert seen.status == 200
    assert seen.json["input"][4] == {k: v for k, v in call.items() if k != "id"} | {"status": "completed"}
    assert seen.json["input"][:4] == turn2["input"][:4] and seen.json["input"][5:] == turn2["input"][5:]
    b.wait_for_output("pair-reasoning-items")
    assert_no_secrets(clean)


def test_redis_killed_mid_run_then_back(fleet, upstream, redis_server: RedisServer) -> None:
    a, b = fleet
    raw = capture_bytes("droid/0.225.2__two_images__turn2.json")
    sent = json.loads(raw)
    redis_server.kill()
    for p in (a, b, a, b):  # requests keep flowing; without memory the orphan keeps its content, valid
        before = len(upstream.requests)
        response = post(p, CHAT, raw)
        assert response.status_code == 200, response.text
        [seen] = upstream.requests[before:]
        assert sent["messages"][-2]["tool_call_id"] in json.dumps(seen.json["messages"][-5:])
    for p in (a, b):
        p.wait_for_output(UNREACHABLE, timeout=TIMEOUT_S * 2)
    redis_server.start()  # same port, empty
    for p in (a, b):
        p.wait_for_output(BACK, timeout=10)  # reconnected by itself, no restart
    assert droid_turn1(a, upstream) == list(STREAMED)
    assert until(shared(redis_server, "call_mock_b"), 2.0)
    before = len(upstream.requests)
    assert post(b, CHAT, raw).status_code == 200
    assert_declared_as_streamed(upstream, before, sent)
    for p in (a, b):  # one warning when it went away, one when it came back: not one per request
        assert p.output().count(UNREACHABLE) == 1, p.output()
        assert p.output().count(BACK) == 1


def test_a_hung_redis_never_holds_up_an_unrelated_request(fleet, upstream, redis_server: RedisServer) -> None:
    _a, b = fleet
    backs = b.output().count(BACK)
    raw = capture_bytes("droid/0.225.2__two_images__turn2.json")
    hello = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}).encode()
    assert post(b, CHAT, hello).status_code == 200  # B has just used Redis: it believes it is up
    redis_server.pause()
    try:
        done = threading.Event()
        waited: list[httpx.Response] = []

        def needs_memory() -> None:
            waited.append(post(b, CHAT, raw))  # looks up the orphan's declaration: waits for Redis
            done.set()

        worker = threading.Thread(target=needs_memory, daemon=True)
        worker.start()
        time.sleep(0.3)  # let it reach Redis (ordering, not timing: a hung command waits TIMEOUT_S)
        assert post(b, CHAT, hello).status_code == 200
        assert not done.is_set()  # answered while the other request was still waiting for Redis
        worker.join(TIMEOUT_S * 4)
        assert done.is_set() and waited[0].status_code == 200  # bounded, and valid without memory
    finally:
        redis_server.resume()
    assert until(lambda: b.output().count(BACK) == backs + 1, TIMEOUT_S * 3)  # and back by itself


def test_the_instances_still_run_and_their_output_has_no_password_or_key(fleet) -> None:
    for p in fleet:
        assert p.running
        out = p.output()
        assert API_KEY not in out and ANTHROPIC_KEY not in out
        assert "shared through redis://127.0.0.1:" in out


def test_a_password_in_the_url_is_never_printed(redis_server: RedisServer, upstream, tmp_path: Path) -> None:
    url = f"redis://:hunter2-{API_KEY[-6:]}@127.0.0.1:{redis_server.port}/0"  # this Redis has no password
    options = {"loopback_upstream": upstream.address, "connection_strategy": "lazy", "llmfix_memory": url,
               "llmfix_memory_timeout": "1s"}
    with Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options, confdir=tmp_path / "conf") as p:
        response = post(p, CHAT, capture_bytes("droid/0.225.2__two_images__turn2.json"))
        assert response.status_code == 200
        p.wait_for_output("shared through redis://***@127.0.0.1")
        assert "hunter2" not in p.output()
