"""The Responses API over a WebSocket, end to end: a scripted client through a real mitmdump with llmfix.

The client opens ``wss://api.openai.com/v1/responses`` through mitmdump (CONNECT, TLS with mitmproxy's CA,
``permessage-deflate`` offered as Codex does) and sends Codex-shaped ``response.create`` messages built from
the capture of Codex 0.171 (tests/upstreams/codex_ws.py); the loopback redirect sends the socket to the strict
WebSocket mock (tests/upstreams/ws_mock.py), which checks every history with the HTTP mock's rules. Each broken
history is first sent straight to the mock (no llmfix): rejected with OpenAI's error event; through llmfix:
accepted, every item the client sent arrives, and the repair is in the JSONL log. Messages llmfix has no
reason to touch arrive byte-identical, a ``previous_response_id`` continuation among them.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.harness import FIX_SCRIPT, LOOPBACK_SCRIPT, Mitmdump, loopback_proxy
from tests.e2e.ws_client import ask, direct, open_socket, read_response
from tests.upstreams import codex_ws as cx
from tests.upstreams.ws_mock import ResponsesSocketMock, function_call, text

pytestmark = pytest.mark.timeout(180)
HOST = "api.openai.com"
GO_ON = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "never mind, go on"}]}


@pytest.fixture(scope="module")
def upstream() -> Iterator[ResponsesSocketMock]:
    with ResponsesSocketMock() as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream: ResponsesSocketMock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    conf = tmp_path_factory.mktemp("conf")
    with loopback_proxy(upstream, conf, llmfix_log=str(conf / "changes.jsonl")) as mitmdump:
        yield mitmdump


def log_records(proxy: Mitmdump) -> list[dict[str, Any]]:
    path = proxy.confdir / "changes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def completed(events: list[dict[str, Any]]) -> str:
    assert events[-1]["type"] == "response.completed", events[-1]
    return events[-1]["response"]["id"]


def rejected_directly(upstream: ResponsesSocketMock, message: dict[str, Any]) -> str:
    """What the strict upstream says of ``message`` with no llmfix in between: its error text."""
    with direct(upstream) as ws:
        events = ask(ws, cx.dumps(message))
    assert events[-1]["type"] == "error" and events[-1]["status"] == 400, events
    return events[-1]["error"]["message"]


def through_llmfix(proxy: Mitmdump, upstream: ResponsesSocketMock, *messages: dict[str, Any]
                   ) -> tuple[list[list[dict[str, Any]]], list[Any]]:
    """Send ``messages`` on one socket through llmfix: the answer to each, and what the mock received."""
    before = len(upstream.sockets)
    with open_socket(proxy, HOST) as ws:
        answers = [ask(ws, cx.dumps(m)) for m in messages]
    sockets = upstream.sockets[before:]
    assert len(sockets) == 1, "one client socket, one upstream socket"
    return answers, sockets[0].received


def items_of(raw: bytes) -> list[dict[str, Any]]:
    return json.loads(raw)["input"]


def test_an_interrupted_call_on_a_fresh_sockets_whole_history_is_answered(proxy, upstream) -> None:
    call = cx.call() | {"call_id": "call_interrupted_1"}
    message = cx.create([cx.developer(), cx.prompt(), call, GO_ON])
    assert rejected_directly(upstream, message) == "No tool output found for function call call_interrupted_1."
    (answer,), (got,) = through_llmfix(proxy, upstream, message)
    completed(answer)
    sent = items_of(got.raw)
    assert sent[:3] == message["input"][:3] and sent[-1] == GO_ON  # nothing lost, in order
    added = [i for i in sent if i.get("type") == "function_call_output"]
    assert [i["call_id"] for i in added] == ["call_interrupted_1"]
    assert "No result was recorded for tool call call_interrupted_1" in added[0]["output"]
    record = next(r for r in log_records(proxy) if "call_interrupted_1" in json.dumps(r))
    assert record["repair"] == "pair-tool-calls" and record["transport"] == "websocket"
    assert record["message"] == 0 and record["host"] == HOST and record["path"] == "/v1/responses"
    assert "data:image" not in json.dumps(log_records(proxy))  # no base64 in the log


def test_an_orphan_output_gets_back_the_call_streamed_earlier_on_the_same_socket(proxy, upstream) -> None:
    streamed = function_call("view_image", {"path": "/home/dev/project/x.png"}, "call_streamed_2")
    upstream.queue(streamed)
    first = cx.create([cx.developer(), cx.prompt()])
    orphan = cx.output() | {"call_id": "call_streamed_2"}
    second = cx.create([cx.developer(), cx.prompt(), orphan])  # a whole history again: the call item is gone
    assert rejected_directly(upstream, second) == (
        "No tool call found for function call output with call_id call_streamed_2.")
    answers, got = through_llmfix(proxy, upstream, first, second)
    completed(answers[0]), completed(answers[1])
    assert got[0].raw == cx.dumps(first)  # nothing to repair: byte-identical
    sent = items_of(got[1].raw)
    assert sent[-1] == orphan and sent[:2] == second["input"][:2]
    restored = sent[-2]
    assert restored["type"] == "function_call" and restored["call_id"] == "call_streamed_2"
    assert (restored["name"], restored["arguments"]) == (streamed["name"], streamed["arguments"])
    record = next(r for r in log_records(proxy) if "call_streamed_2" in json.dumps(r))
    assert record["repair"] == "pair-tool-calls" and record["transport"] == "websocket"
    assert record["message"] == 1 + len(answers[0])  # the socket's 2nd client message, after the 1st's events


def test_a_repaired_message_keeps_every_character(proxy, upstream) -> None:
    """Codex's messages hold non-ASCII text (its tool descriptions); a repaired one is longer than the original,
    and mitmproxy re-frames it: 15 KB of 3-byte characters cross every framing boundary it could choose."""
    ticks = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "✓" * 5000 + " é ü —"}]}
    call = cx.call() | {"call_id": "call_unicode_7"}
    message = cx.create([ticks, cx.prompt(), call, GO_ON])
    (answer,), (got,) = through_llmfix(proxy, upstream, message)
    completed(answer)
    sent = json.loads(got.raw)
    assert "\ufffd" not in got.raw.decode()
    assert sent["input"][0] == ticks and {**sent, "input": None} == {**message, "input": None}


def test_duplicate_call_ids_are_made_unique(proxy, upstream) -> None:
    one = cx.call() | {"call_id": "call_dup_3", "id": "fc_dup_a"}
    two = cx.call() | {"call_id": "call_dup_3", "id": "fc_dup_b", "arguments": '{"path": "/home/dev/project/y.png"}'}
    out = cx.output() | {"call_id": "call_dup_3"}
    message = cx.create([cx.developer(), cx.prompt(), one, two, out, out | {"id": "fco_second"}])
    assert rejected_directly(upstream, message) == "Duplicate 'call_id': call_dup_3"
    (answer,), (got,) = through_llmfix(proxy, upstream, message)
    completed(answer)
    sent = items_of(got.raw)
    calls = [i for i in sent if i.get("type") == "function_call"]
    outputs = [i for i in sent if i.get("type") == "function_call_output"]
    assert len(calls) == len(outputs) == 2 and len({c["call_id"] for c in calls}) == 2
    assert [c["arguments"] for c in calls] == [one["arguments"], two["arguments"]]
    assert [o["call_id"] for o in outputs] == [c["call_id"] for c in calls]


def test_a_previous_response_id_continuation_arrives_byte_identical(proxy, upstream) -> None:
    upstream.queue(function_call("view_image", {"path": "/home/dev/project/x.png"}, "call_chained_4"))
    warmup = cx.create([cx.developer()], generate=False)
    before = len(log_records(proxy))
    with open_socket(proxy, HOST) as ws:
        turn0 = completed(ask(ws, cx.dumps(warmup)))
        turn1 = cx.create([cx.prompt()], previous_response_id=turn0)
        turn1_id = completed(ask(ws, cx.dumps(turn1)))
        # only the output: its call lives in the socket's server state, which llmfix must not "repair"
        turn2 = cx.create([cx.output() | {"call_id": "call_chained_4"}], previous_response_id=turn1_id)
        completed(ask(ws, cx.dumps(turn2)))
    got = upstream.sockets[-1].received
    assert [r.raw for r in got] == [cx.dumps(warmup), cx.dumps(turn1), cx.dumps(turn2)]
    assert len(log_records(proxy)) == before


def test_a_message_llmfix_cannot_read_goes_through_with_one_warning(proxy, upstream) -> None:
    bad = b'{"type":"response.create","model":"gpt-5.5","input":[{"type":"message","role":"user"'
    with open_socket(proxy, HOST) as ws:
        assert ask(ws, bad)[-1]["type"] == "error"  # the upstream's answer to it: llmfix forwarded it as it was
        completed(ask(ws, cx.create([cx.prompt()])))
    assert [r.raw for r in upstream.sockets[-1].received] == [bad, cx.dumps(cx.create([cx.prompt()]))]
    found = proxy.wait_for_output(re.compile(r"llmfix: (\w+) WebSocket api\.openai\.com/v1/responses message 0 left "
                                             r"unchanged: body is not a JSON object \(does not end with '}'"))
    assert proxy.output().count(f"llmfix: {found.group(1)} WebSocket") == 1  # one warning, naming flow and message


def test_the_media_window_is_fed_by_socket_messages(proxy, upstream) -> None:
    """A gateway leg after a client socket (restore-tool-media): the client's WebSocket message carried the
    image; the gateway's HTTP request for the same call a moment later dropped it (``output: ""``)."""
    call = cx.call() | {"call_id": "call_window_5"}
    out = cx.output() | {"call_id": "call_window_5"}
    message = cx.create([cx.developer(), cx.prompt(), call, out])
    hold = threading.Event()
    gateway = {"model": "gpt-5.5", "input": [cx.prompt(), call, out | {"output": ""}]}
    with open_socket(proxy, HOST) as ws, httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(),
                                                     trust_env=False, timeout=30) as http:
        upstream.queue(text("looking"), hold=hold)  # its answer streams, and does not end yet: in flight
        ws.send_text(cx.dumps(message))
        assert json.loads(ws.recv())["type"] == "response.created"
        assert http.post("https://gateway.test/v1/responses", json=gateway).status_code == 200
        hold.set()
        completed(read_response(ws))
        # once the socket's answer has ended, the window is closed (llmfix_restore_window=0s by default)
        assert http.post("https://gateway.test/v1/responses", json=gateway).status_code == 200
    restored, later = (r.json["input"][-1]["output"] for r in upstream.requests[-2:])
    assert restored == out["output"]  # the very image the client sent on the socket
    assert later == ""


def test_with_permessage_deflate_on_both_legs_a_repaired_message_arrives_whole(confdir) -> None:
    """Codex offers ``permessage-deflate``; an upstream that takes it gets compressed frames from mitmproxy."""
    ticks = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "✓ é —" * 3000}]}
    message = cx.create([ticks, cx.prompt(), cx.call() | {"call_id": "call_deflate_8"}, GO_ON])
    with ResponsesSocketMock(deflate=True) as up, Mitmdump(
            scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options={"loopback_upstream": up.address,
                                                            "llmfix_memory": ":memory:"}, confdir=confdir) as p:
        with open_socket(p, HOST) as ws:
            assert ws.extensions == ["permessage-deflate"]  # the client's leg
            completed(ask(ws, cx.dumps(message)))
        [sock] = up.sockets
    assert sock.extensions == ["permessage-deflate"]  # the upstream's leg
    sent = json.loads(sock.received[0].raw)
    assert sent["input"][0] == ticks and {**sent, "input": None} == {**message, "input": None}
    assert [i.get("type") for i in sent["input"]].count("function_call_output") == 1
