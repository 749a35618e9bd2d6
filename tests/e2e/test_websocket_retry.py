"""Repair-and-retry over the Responses WebSocket, end to end (llmfix/websocket.py, retry/decide.py).

An xAI-like gateway llmfix has no profile for (so it starts from the public spec, which allows array tool
outputs) behind the strict WebSocket mock with xAI's rules: pi-ai's captured ``function_call_output`` of
``[input_text, input_image]`` is answered with xAI's 422 as an ``error`` event. A whole-history message is
resent once, repaired, on the same socket, and the client sees only the answer to the resend; the flag is
learned, so the next message is repaired up front. A message chained on ``previous_response_id`` is not
resent (its rejection reaches the client, nothing is learned); the client's next socket, whose first message
carries the whole history, is. A resend rejected again reaches the client and is not resent again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Mitmdump, loopback_proxy
from tests.e2e.ws_client import ask, open_socket
from tests.upstreams import codex_ws as cx
from tests.upstreams.captures import capture_json
from tests.upstreams.errors import XAI_DESERIALIZE, xai_error
from tests.upstreams.ws_mock import ResponsesSocketMock

pytestmark = pytest.mark.timeout(180)


def start(upstream: ResponsesSocketMock, confdir: Path) -> Mitmdump:
    confdir.mkdir(parents=True, exist_ok=True)
    return loopback_proxy(upstream, confdir, llmfix_log=str(confdir / "changes.jsonl"))


@pytest.fixture(scope="module")
def xai_like() -> Iterator[ResponsesSocketMock]:
    with ResponsesSocketMock("xai") as up:
        yield up


@pytest.fixture(scope="module")
def proxy(xai_like: ResponsesSocketMock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    with start(xai_like, tmp_path_factory.mktemp("conf")) as p:
        yield p


def tool_turn(call_id: str) -> list[dict[str, Any]]:
    """pi-ai's xAI capture: a call and its output ``[input_text, input_image]`` (xAI takes only a string)."""
    items = capture_json("pi-ai/xai_responses.json")["input"]
    call = next(i for i in items if i.get("type") == "function_call")
    output = next(i for i in items if i.get("type") == "function_call_output")
    return [call | {"call_id": call_id}, output | {"call_id": call_id}]


def retries(proxy: Mitmdump) -> list[dict[str, Any]]:
    path = proxy.confdir / "changes.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("event") == "retry"]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_a_rejected_whole_history_is_repaired_and_resent_on_the_same_socket(proxy, xai_like) -> None:
    first = cx.create([cx.prompt(), *tool_turn("call_retry_1")])
    before = len(xai_like.sockets)
    with open_socket(proxy, "grok.gateway.test") as ws:
        answer = ask(ws, cx.dumps(first))
        assert "error" not in types(answer) and answer[-1]["type"] == "response.completed"  # never saw the 422
        # learned: the next message (a continuation) is repaired before it leaves, one message upstream
        chained = cx.create(tool_turn("call_retry_2"), previous_response_id=answer[-1]["response"]["id"])
        assert ask(ws, cx.dumps(chained))[-1]["type"] == "response.completed"
    [sock] = xai_like.sockets[before:]
    got = sock.received
    assert [(r.status, r.reason) for r in got] == [(422, "tool-output-not-string"), (200, None), (200, None)]
    assert got[0].raw == cx.dumps(first)  # the first attempt went as the client sent it
    resent = got[1].json["input"]
    assert isinstance(resent[-2]["output"], str) and resent[-1]["role"] == "user"  # hoisted into a user message
    assert any(p.get("type") == "input_image" for p in resent[-1]["content"])  # the image is still there
    [record] = [r for r in retries(proxy) if r["host"] == "grok.gateway.test"]
    assert record["transport"] == "websocket" and record["status"] == 422 and record["resent"] is True
    assert record["learned"] == [{"flag": "responses_tool_output_array", "value": False, "new": True}]
    assert record["result"] == "resent once on the socket → completed"
    proxy.wait_for_output("retry: 422 xai-model-input")


def test_a_rejected_continuation_reaches_the_client_and_the_next_socket_is_retried(proxy, xai_like) -> None:
    host = "grok2.gateway.test"
    before = len(xai_like.sockets)
    with open_socket(proxy, host) as ws:
        opened = ask(ws, cx.dumps(cx.create([cx.prompt()])))[-1]["response"]["id"]
        chained = cx.create(tool_turn("call_retry_3"), previous_response_id=opened)
        rejected = ask(ws, cx.dumps(chained))
        assert types(rejected) == ["error"] and rejected[0]["status"] == 422  # the client gets it as it came
    [record] = [r for r in retries(proxy) if r["host"] == host]
    assert record["resent"] is False and record["learned"] == []
    assert record["result"].startswith("not resent: the message continues server-side state")
    # the client's next socket starts with the whole history: that one is repaired, resent and learned from
    with open_socket(proxy, host) as ws:
        whole = cx.create([cx.prompt(), *tool_turn("call_retry_3")])
        assert ask(ws, cx.dumps(whole))[-1]["type"] == "response.completed"
    assert [r.status for s in xai_like.sockets[before:] for r in s.received] == [200, 422, 422, 200]
    assert [r["resent"] for r in retries(proxy) if r["host"] == host] == [False, True]


def test_a_rejected_resend_reaches_the_client_and_is_not_resent_again(tmp_path) -> None:
    def always(body: dict[str, Any]) -> Any:
        return xai_error(f"{XAI_DESERIALIZE} at line 1 column 7", reason="always")

    message = cx.dumps(cx.create([cx.prompt(), *tool_turn("call_retry_4")]))
    with ResponsesSocketMock("xai", extra=always) as stubborn, start(stubborn, tmp_path / "conf") as p:
        with open_socket(p, "grok3.gateway.test") as ws:
            answer = ask(ws, message)
        assert types(answer) == ["error"] and answer[0]["status"] == 422
        assert [r.status for r in stubborn.received()] == [422, 422]  # the first attempt and one resend, no third
        [record] = retries(p)
        assert record["result"] == "resent once on the socket → error (xai-model-input again: the client gets it)"
        assert record["learned"][0]["new"] is True  # learned before the resend, un-learned after it failed
        with open_socket(p, "grok3.gateway.test") as ws:
            ask(ws, message)
        assert stubborn.received()[2].raw == message  # not repaired up front: the flag that did not help is gone
