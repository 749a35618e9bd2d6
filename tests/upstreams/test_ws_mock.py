"""The strict Responses WebSocket mock answers like the real socket: the captured Codex session is accepted,
broken histories get OpenAI's error event (over the union of the chain), and the server state behaves."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.ws_client import ask, direct
from tests.upstreams import codex_ws as cx
from tests.upstreams.ws_mock import ResponsesSocketMock, function_call, text

pytestmark = pytest.mark.timeout(60)
CALL = cx.call()["call_id"]  # the view_image call of the captured session


@pytest.fixture
def mock() -> Iterator[ResponsesSocketMock]:
    with ResponsesSocketMock() as up:
        yield up


def completed_id(events: list[dict]) -> str:
    assert events[-1]["type"] == "response.completed", events[-1]
    return events[-1]["response"]["id"]


def error_of(events: list[dict]) -> dict:
    assert [e["type"] for e in events] == ["error"], events
    return events[0]


def test_the_captured_codex_session_is_accepted_and_answered_like_the_capture(mock) -> None:
    warmup, turn1, turn2 = cx.messages()
    mock.queue(cx.call() | {"status": "completed"})
    with direct(mock) as ws:
        first = ask(ws, cx.dumps(warmup))
        assert [e["type"] for e in first] == [e["type"] for e in cx.server_events(0)]
        second = ask(ws, cx.dumps(turn1 | {"previous_response_id": completed_id(first)}))
        assert [e["type"] for e in second] == [e["type"] for e in cx.server_events(1)]
        third = ask(ws, cx.dumps(turn2 | {"previous_response_id": completed_id(second)}))
        assert [e["type"] for e in third] == [e["type"] for e in cx.server_events(2)]
    got = mock.sockets[-1]
    assert [r.status for r in got.received] == [200, 200, 200]
    assert got.received[2].chained_on == completed_id(second)
    assert got.extensions == []  # permessage-deflate offered by nobody here, accepted by default by nobody


@pytest.mark.parametrize(("items", "text_"), [
    ([cx.developer(), cx.prompt(), cx.call()], f"No tool output found for function call {CALL}."),
    ([cx.developer(), cx.prompt(), cx.output()],
     f"No tool call found for function call output with call_id {CALL}."),
    ([cx.prompt(), cx.call(), cx.call() | {"id": "fc_2"}, cx.output(), cx.output()],
     f"Duplicate 'call_id': {CALL}"),
], ids=["interrupted-call", "orphan-output", "duplicate-ids"])
def test_a_broken_history_gets_openais_error_event_and_the_socket_stays_open(mock, items, text_) -> None:
    with direct(mock) as ws:
        event = error_of(ask(ws, cx.create(items)))
        assert event["status"] == 400 and event["error"]["message"] == text_
        assert event["error"]["type"] == "invalid_request_error"
        completed_id(ask(ws, cx.create([cx.prompt()])))
    assert [r.status for r in mock.sockets[-1].received] == [400, 200]


def test_the_union_of_the_chain_is_checked(mock) -> None:
    call = function_call("view_image", {"path": "x.png"}, "call_A")
    mock.queue(call)
    with direct(mock) as ws:
        first = completed_id(ask(ws, cx.create([cx.prompt()])))
        missing = error_of(ask(ws, cx.create([{"type": "message", "role": "user", "content": "go on"}],
                                             previous_response_id=first)))
        assert missing["error"]["message"] == "No tool output found for function call call_A."
        # the failed turn evicted what it chained on: the same continuation is now refused for the id
        gone = error_of(ask(ws, cx.create([cx.output() | {"call_id": "call_A"}], previous_response_id=first)))
        assert gone["error"]["code"] == "previous_response_not_found"
        assert gone["error"]["message"] == f"Previous response with id '{first}' not found."


def test_an_output_for_a_call_in_the_chain_is_accepted(mock) -> None:
    mock.queue(function_call("view_image", {"path": "x.png"}, "call_A"))
    with direct(mock) as ws:
        first = completed_id(ask(ws, cx.create([cx.prompt()])))
        completed_id(ask(ws, cx.create([cx.output() | {"call_id": "call_A"}], previous_response_id=first)))


def test_with_store_false_only_the_latest_response_of_the_socket_can_be_chained_on(mock) -> None:
    with direct(mock) as ws:
        first = completed_id(ask(ws, cx.create([cx.prompt()])))
        second = completed_id(ask(ws, cx.create([cx.prompt()], previous_response_id=first)))
        old = error_of(ask(ws, cx.create([cx.prompt()], previous_response_id=first)))
        assert old["error"]["code"] == "previous_response_not_found"
        completed_id(ask(ws, cx.create([cx.prompt()], previous_response_id=second)))
    with direct(mock) as fresh:  # another socket knows nothing of it
        assert error_of(ask(fresh, cx.create([cx.prompt()], previous_response_id=second)))["status"] == 400


def test_a_stored_response_can_be_chained_on_from_any_socket(mock) -> None:
    with direct(mock) as ws:
        first = completed_id(ask(ws, cx.create([cx.prompt()]) | {"store": True}))
    with direct(mock) as other:
        completed_id(ask(other, cx.create([cx.prompt()], previous_response_id=first)))


def test_warm_up_gets_an_empty_response_and_acknowledgements_no_answer(mock) -> None:
    mock.queue(text("for the generating turn"))
    with direct(mock) as ws:
        warm = ask(ws, cx.create([cx.developer()], generate=False))
        assert warm[-1]["response"]["output"] == []
        ws.send_text(json.dumps({"type": "response.processed", "response_id": completed_id(warm)}))
        turn = ask(ws, cx.create([cx.prompt()], previous_response_id=completed_id(warm)))
        assert turn[-1]["response"]["output"][0]["content"][0]["text"] == "for the generating turn"
    assert [r.json["type"] for r in mock.sockets[-1].received] == ["response.create", "response.processed",
                                                                   "response.create"]


def test_not_json_and_unknown_types_get_an_error_event(mock) -> None:
    with direct(mock) as ws:
        assert error_of(ask(ws, b"{not json"))["status"] == 400
        assert error_of(ask(ws, {"type": "response.cancel"}))["status"] == 400
    assert [r.reason for r in mock.sockets[-1].received] == ["invalid-json", "unknown-type"]


def test_the_messages_bytes_are_recorded_as_sent(mock) -> None:
    body = cx.dumps(cx.create([cx.prompt() | {"content": [{"type": "input_text", "text": "héllo ✓"}]}]))
    with direct(mock) as ws:
        ask(ws, body)
    assert mock.sockets[-1].received[0].raw == body


def test_permessage_deflate_only_when_asked_and_http_still_served() -> None:
    with ResponsesSocketMock(deflate=True) as up:
        import socket

        from tests.upstreams import wsframes
        sock = socket.create_connection(("127.0.0.1", up.port), timeout=10)
        peer = wsframes.connect(sock, "api.openai.com", "/v1/responses", deflate=True)
        assert peer.extensions == ["permessage-deflate"]
        peer.send_text(cx.dumps(cx.create([cx.prompt()])))
        assert json.loads(peer.recv())["type"] == "response.created"
        sock.close()
        answer = httpx.post(f"{up.url}/v1/responses", json={"model": "m", "input": "hi"},
                            headers={"host": "api.openai.com"})
        assert answer.status_code == 200 and answer.json()["object"] == "response"
