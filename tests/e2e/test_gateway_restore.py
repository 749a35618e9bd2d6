"""End to end: llmfix on both legs of a gateway that drops tool-result images (bug B1).

Client (Codex's real turn-2 request) → llmfix → gateway double → llmfix → strict mock upstream. The
upstream must receive the function_call_output with the input_image, same bytes, and the change log
must name the restore; a degraded request with no correlated client request is left as it is.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.gateway import Gateway
from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(180)
FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
CODEX = capture_json("codex/turn2_request.json")
OUTPUT = CODEX["input"][-1]
IMAGE = OUTPUT["output"][0]


@pytest.fixture(scope="module")
def llmfix(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    log = tmp_path_factory.mktemp("log") / "changes.jsonl"
    options = {"loopback_upstream": upstream.address, "connection_strategy": "lazy", "llmfix_memory": ":memory:",
               "llmfix_log": str(log)}
    with Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options,
                  confdir=tmp_path_factory.mktemp("conf")) as proxy:
        proxy.log_path = log  # type: ignore[attr-defined]
        yield proxy


def gateway(llmfix: Mitmdump, mode: str, upstream_url: str) -> Gateway:
    return Gateway(mode=mode, proxy_url=llmfix.url, verify=llmfix.ssl_context(), upstream=upstream_url)


def client_post(llmfix: Mitmdump, url: str, body: dict[str, Any] | bytes) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with httpx.Client(proxy=llmfix.url, verify=llmfix.ssl_context(), trust_env=False, timeout=60) as c:
        return c.post(url, content=raw, headers={"content-type": "application/json"})


def received(upstream: MockUpstream, before: int) -> Any:
    [seen] = upstream.requests[before:]
    return seen


def restore_records(llmfix: Mitmdump) -> list[dict[str, Any]]:
    lines = llmfix.log_path.read_text().splitlines()  # type: ignore[attr-defined]
    return [r for r in map(json.loads, lines) if r["repair"] == "restore-tool-media"]


def test_image_only_output_emptied_by_the_gateway_reaches_the_upstream(llmfix: Mitmdump, upstream: MockUpstream):
    with gateway(llmfix, "drop-media", "https://api.openai.com/v1/responses") as gw:
        before, logged = len(upstream.requests), len(restore_records(llmfix))
        response = client_post(llmfix, f"{gw.url}/v1/responses", capture_bytes("codex/turn2_request.json"))
    assert response.status_code == 200, response.text
    assert gw.forwarded[-1]["input"][-1]["output"] == ""  # the gateway really dropped it
    got = received(upstream, before).json["input"][-1]
    assert got["call_id"] == OUTPUT["call_id"]
    assert got["output"] == [IMAGE]  # same bytes, detail kept
    records = restore_records(llmfix)[logged:]
    assert [r["location"] for r in records] == [f"input[{len(CODEX['input']) - 1}].output"]
    llmfix.wait_for_output("restore-tool-media")


def test_text_plus_image_reduced_to_text_gets_the_image_back(llmfix: Mitmdump, upstream: MockUpstream) -> None:
    body = copy.deepcopy(CODEX)
    body["input"][-1]["output"] = [{"type": "input_text", "text": "Viewed x.png (32x32)"}, IMAGE]
    with gateway(llmfix, "drop-media", "https://api.openai.com/v1/responses") as gw:
        before = len(upstream.requests)
        assert client_post(llmfix, f"{gw.url}/v1/responses", body).status_code == 200
    assert gw.forwarded[-1]["input"][-1]["output"] == "Viewed x.png (32x32)"
    assert received(upstream, before).json["input"][-1]["output"] == body["input"][-1]["output"]


def test_gateway_converting_to_chat_with_the_image_in_the_tool_message(llmfix: Mitmdump, upstream: MockUpstream):
    with gateway(llmfix, "to-chat", "https://api.openai.com/v1/chat/completions") as gw:
        before = len(upstream.requests)
        response = client_post(llmfix, f"{gw.url}/v1/responses", capture_bytes("codex/turn2_request.json"))
    assert response.status_code == 200, response.text
    sent_by_gateway = gw.forwarded[-1]["messages"]
    assert sent_by_gateway[-1]["role"] == "tool" and sent_by_gateway[-1]["content"][0]["type"] == "image_url"
    seen = received(upstream, before)
    assert seen.status == 200  # the strict upstream found it valid
    messages = seen.json["messages"]
    assert [m["role"] for m in messages[-3:]] == ["assistant", "tool", "user"]
    urls = [p["image_url"]["url"] for p in messages[-1]["content"] if p["type"] == "image_url"]
    assert urls == [IMAGE["image_url"]]


def test_degraded_request_without_a_correlated_client_request_is_left_alone(llmfix, upstream) -> None:
    body = copy.deepcopy(CODEX)
    body["input"][-1]["output"] = ""
    raw = json.dumps(body).encode()
    before = len(upstream.requests)
    client_post(llmfix, "https://api.openai.com/v1/responses", raw)
    assert received(upstream, before).body == raw


def test_after_the_client_request_ended_nothing_comes_back(llmfix: Mitmdump, upstream: MockUpstream) -> None:
    client_post(llmfix, "https://api.openai.com/v1/responses", capture_bytes("codex/turn2_request.json"))
    body = copy.deepcopy(CODEX)
    body["input"][-1]["output"] = ""
    raw = json.dumps(body).encode()
    before = len(upstream.requests)
    client_post(llmfix, "https://api.openai.com/v1/responses", raw)  # the client request above has ended
    assert received(upstream, before).body == raw


def test_a_client_that_stripped_the_image_itself_does_not_get_it_back(llmfix, upstream) -> None:
    client_post(llmfix, "https://api.openai.com/v1/responses", capture_bytes("codex/turn2_request.json"))
    stripped = copy.deepcopy(CODEX)
    stripped["input"][-1]["output"] = ""
    with gateway(llmfix, "drop-media", "https://api.openai.com/v1/responses") as gw:
        before = len(upstream.requests)
        client_post(llmfix, f"{gw.url}/v1/responses", stripped)
    assert received(upstream, before).json["input"][-1]["output"] == ""


def test_anthropic_tool_result_that_lost_its_image_gets_a_base64_block_back(llmfix, upstream) -> None:
    body = capture_json("claude-code/single_png__turn2.json")
    with gateway(llmfix, "drop-media", "https://api.anthropic.com/v1/messages") as gw:
        before = len(upstream.requests)
        response = client_post(llmfix, f"{gw.url}/v1/messages", capture_bytes("claude-code/single_png__turn2.json"))
    assert response.status_code == 200, response.text
    sent = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
            if b.get("type") == "tool_result"]
    forwarded = [b for m in gw.forwarded[-1]["messages"] if isinstance(m["content"], list) for b in m["content"]
                 if b.get("type") == "tool_result"]
    assert not any(b.get("type") == "image" for b in forwarded[0]["content"])  # the gateway dropped it
    got = [b for m in received(upstream, before).json["messages"] if isinstance(m["content"], list)
           for b in m["content"] if b.get("type") == "tool_result"]
    images = [b for b in got[0]["content"] if b["type"] == "image"]
    assert images and images[0]["source"]["type"] == "base64"
    assert images == [b for b in sent[0]["content"] if b["type"] == "image"]

