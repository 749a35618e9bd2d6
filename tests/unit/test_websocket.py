"""The Responses WebSocket adapter in mitmproxy's test harness: which sockets and messages it takes, the engine's
answer per message, the server events it learns from, the media window, the views of a repaired message.

End to end (a real mitmdump, the strict socket mock, the real Codex): tests/e2e/test_websocket_repair.py,
test_websocket_retry.py, test_live_codex.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from mitmproxy import contentviews
from mitmproxy.proxy.layers.websocket import Fragmentizer
from mitmproxy.test import tflow
from mitmproxy.websocket import WebSocketData, WebSocketMessage
from wsproto.frame_protocol import Opcode

from llmfix import proxy as proxy_module
from llmfix.proxy import UPSTREAM
from llmfix.report.flowinfo import MESSAGE_INFO, SOCKET
from llmfix.runinfo import Tally
from llmfix.websocket import ONE_FRAME, ResponsesWebSocket, message_type
from tests.conftest import llmfix_with
from tests.upstreams import codex_ws as cx
from tests.upstreams.ws_mock import function_call, stream_events

GO_ON = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]}


@pytest.fixture
def addons():
    with llmfix_with(ResponsesWebSocket) as got:
        yield got


def socket_flow(path: str = "/v1/responses", host: str = "api.openai.com") -> Any:
    f = tflow.twebsocketflow(messages=False)
    f.websocket = WebSocketData()
    f.request.host, f.request.port, f.request.path = host, 443, path
    f.metadata[UPSTREAM] = ("https", host, 443)  # as LLMFix.request notes it for an upgrade
    return f


async def client(ws: ResponsesWebSocket, f: Any, content: bytes | dict[str, Any], **kw: Any) -> WebSocketMessage:
    data = content if isinstance(content, bytes) else cx.dumps(content)
    message = WebSocketMessage(kw.pop("type", Opcode.TEXT), True, data, **kw)
    f.websocket.messages.append(message)
    await ws.websocket_message(f)
    return message


async def server(ws: ResponsesWebSocket, f: Any, events: list[dict[str, Any]]) -> list[WebSocketMessage]:
    out = []
    for event in events:
        message = WebSocketMessage(Opcode.TEXT, False, json.dumps(event).encode())
        f.websocket.messages.append(message)
        await ws.websocket_message(f)
        out.append(message)
    return out


def broken() -> dict[str, Any]:
    return cx.create([cx.developer(), cx.prompt(), cx.call() | {"call_id": "call_unit_1"}, GO_ON])


def answered(call_id: str) -> dict[str, Any]:
    """A whole history in which the captured ``view_image`` call, as ``call_id``, is answered with its image."""
    return cx.create([cx.prompt(), cx.call() | {"call_id": call_id}, cx.output() | {"call_id": call_id}])


def test_only_responses_upgrades_are_watched(addons) -> None:
    _, ws, _ = addons
    for path, watched in (("/v1/responses", True), ("/openai/v1/responses/", True), ("/v1/realtime", False),
                          ("/ws", False)):
        f = socket_flow(path)
        ws.websocket_start(f)
        assert (SOCKET in f.metadata) is watched, path


def test_the_upgrade_remembers_the_host_it_was_sent_to(addons) -> None:
    fix, _, _ = addons
    f = tflow.twebsocketflow(messages=False)
    f.request.path = "/v1/responses"
    f.response = None  # the upgrade request, before its 101
    asyncio.run(fix.request(f))
    assert f.metadata[UPSTREAM] == ("http", "example.com", 80)  # before the loopback redirect re-points it


def test_message_type_is_read_from_the_head_or_the_whole_object() -> None:
    assert message_type(b'{"type":"response.create","input":[]}') == "response.create"
    assert message_type(b'{"input":[],"type":"response.processed"}') == "response.processed"
    assert message_type(b"[1, 2]") is None and message_type(b"{broken") is None


async def test_a_broken_whole_history_is_repaired_and_reported_like_a_request(addons, caplog) -> None:
    _, ws, _ = addons
    f = socket_flow()
    ws.websocket_start(f)
    with caplog.at_level(logging.INFO, logger="llmfix"):
        message = await client(ws, f, broken())
    sent = json.loads(message.content)
    assert [i.get("type") for i in sent["input"]][-2:] == ["function_call_output", "message"]
    assert f.marked and "llmfix: pair-tool-calls (1 change) in message 0" in f.comment
    assert f"{f.id[:8]} WebSocket api.openai.com/v1/responses message 0 pair-tool-calls" in caplog.text
    info = f.metadata[MESSAGE_INFO]["0"]
    assert info["repairs"] == ["pair-tool-calls"] and info["original"] == cx.dumps(broken())
    diff = contentviews.prettify_message(message, f)
    assert diff.view_name == "llmfix diff" and "# repaired by: pair-tool-calls" in diff.text
    original = contentviews.prettify_message(message, f, "llmfix original")
    assert "the message as the client sent it" in original.text and "call_unit_1" in original.text
    readable = contentviews.prettify_message(message, f, "llmfix conversation")
    assert "# responses request to api.openai.com" in readable.text and "as sent upstream" in readable.text


async def test_valid_messages_keep_their_bytes_and_views(addons) -> None:
    _, ws, _ = addons
    f = socket_flow()
    ws.websocket_start(f)
    for m in cx.messages():
        message = await client(ws, f, m)
        assert message.content == cx.dumps(m)
    assert not f.marked and MESSAGE_INFO not in f.metadata
    assert contentviews.prettify_message(message, f).view_name != "llmfix diff"


async def test_a_continuation_keeps_its_output_even_when_llmfix_knows_the_call(addons) -> None:
    """``previous_response_id``: the call lives in the server's state; declaring it again would duplicate it."""
    fix, ws, _ = addons
    f = socket_flow()
    ws.websocket_start(f)
    await client(ws, f, cx.create([cx.prompt()]))
    await server(ws, f, stream_events("resp_1", "gpt-5.5", [function_call("view_image", "{}", "call_unit_2")]))
    assert fix.recall.lookup(["call_unit_2"])  # learned from the socket's events
    chained = cx.create([cx.output() | {"call_id": "call_unit_2"}], previous_response_id="resp_1")
    message = await client(ws, f, chained)
    assert message.content == cx.dumps(chained) and not f.marked
    # the same output in a whole history (no previous_response_id) gets its call back from memory
    orphan = cx.create([cx.prompt(), cx.output() | {"call_id": "call_unit_2"}])
    repaired = await client(ws, f, orphan)
    assert json.loads(repaired.content)["input"][1]["call_id"] == "call_unit_2"


async def test_acknowledgements_injected_and_binary_messages_are_left_alone(addons, caplog) -> None:
    _, ws, _ = addons
    f = socket_flow()
    ws.websocket_start(f)
    ack = await client(ws, f, b'{"type":"response.processed","response_id":"resp_1"}')
    injected = await client(ws, f, broken(), injected=True)  # llmfix's own resend, or another addon's
    with caplog.at_level(logging.WARNING, logger="llmfix"):
        binary = await client(ws, f, b"\x00\x01", type=Opcode.BINARY)
        await client(ws, f, b"\x00\x02", type=Opcode.BINARY)
        odd = await client(ws, f, b'{"type":"response.cancel"}')
    assert injected.content == cx.dumps(broken()) and not f.marked
    assert ack.content.startswith(b'{"type":"response.processed"') and binary.content == b"\x00\x01"
    assert odd.content == b'{"type":"response.cancel"}'
    assert caplog.text.count("a binary message") == 1  # one warning per reason and socket
    assert "message 4 left unchanged: client message type 'response.cancel'" in caplog.text


async def test_bad_json_goes_through_with_one_warning_naming_flow_and_message(addons, caplog) -> None:
    _, ws, _ = addons
    f = socket_flow()
    ws.websocket_start(f)
    with caplog.at_level(logging.WARNING, logger="llmfix"):
        message = await client(ws, f, b'{"type":"response.create","input":[')
    assert message.content == b'{"type":"response.create","input":['
    assert caplog.text.count("left unchanged") == 1
    assert f"{f.id[:8]} WebSocket api.openai.com/v1/responses message 0 left unchanged: body is not" in caplog.text


async def test_report_mode_annotates_and_sends_the_message_as_it_came(addons) -> None:
    fix, ws, tctx = addons
    tctx.configure(fix, llmfix_mode="report")
    f = socket_flow()
    ws.websocket_start(f)
    message = await client(ws, f, broken())
    assert message.content == cx.dumps(broken()) and f.marked == ":mag:"
    assert "would pair-tool-calls" in f.comment


def test_off_mode_watches_no_socket(addons) -> None:
    fix, ws, tctx = addons
    tctx.configure(fix, llmfix_mode="off")
    f = socket_flow()
    ws.websocket_start(f)
    assert SOCKET not in f.metadata


async def test_a_message_stays_in_the_media_window_until_its_answer_ends(addons) -> None:
    fix, ws, _ = addons
    f = socket_flow()
    ws.websocket_start(f)
    await client(ws, f, answered("call_unit_3"))
    key = f"{f.id}/0"
    assert fix.window.knows("call_unit_3")
    events = stream_events("resp_2", "gpt-5.5", [])
    await server(ws, f, events[:-1])
    assert fix.window._ended[key] is None  # still in flight
    await server(ws, f, events[-1:])
    assert fix.window._ended[key] is not None


async def test_the_socket_end_ends_the_learner_and_whats_in_flight(addons) -> None:
    fix, ws, _ = addons
    f = socket_flow()
    ws.websocket_start(f)
    await client(ws, f, answered("call_unit_4"))
    added = stream_events("resp_3", "gpt-5.5", [function_call("view_image", "{}", "call_unit_5")])[:3]
    await server(ws, f, added)  # the call was announced, the socket ends before its done event
    ws.websocket_end(f)
    assert fix.window._ended[f"{f.id}/0"] is not None
    assert fix.recall.lookup(["call_unit_5"])  # what was pending is reported at the end


async def test_a_large_message_is_repaired_off_the_event_loop(addons, monkeypatch) -> None:
    _, ws, _ = addons
    threads: list[Any] = []
    real = asyncio.to_thread

    async def spy(func: Any, *args: Any) -> Any:
        threads.append(func)
        return await real(func, *args)

    monkeypatch.setattr(asyncio, "to_thread", spy)
    f = socket_flow()
    ws.websocket_start(f)
    big = broken()
    big["input"].insert(0, {"type": "message", "role": "user", "content": "x" * proxy_module.OFFLOAD_BYTES})
    message = await client(ws, f, big)
    assert threads and b"No result was recorded" in message.content


def test_changed_messages_are_sent_in_one_frame(addons) -> None:
    assert Fragmentizer.FRAGMENT_SIZE == ONE_FRAME
    pieces = list(Fragmentizer([b"x" * 4000], True)(("a" * 3999 + "é" + "b" * 10).encode()))
    assert [p.data for p in pieces] == ["a" * 3999 + "é" + "b" * 10]


async def test_the_launchers_summary_counts_socket_requests_like_http_ones(addons) -> None:
    _, ws, _ = addons
    tally = Tally()
    f = socket_flow()
    ws.websocket_start(f)
    for content in (cx.messages()[0], broken(), b'{"type":"response.processed","response_id":"r"}'):
        await client(ws, f, content)
        tally.count_message(f)
    await server(ws, f, stream_events("resp_4", "gpt-5.5", []))
    tally.count_message(f)  # a server event is no request
    assert tally.summary() == {"http_requests": 2, "llm_requests": 2, "repaired": 1, "mode": "repair",
                               "by_repair": {"pair-tool-calls": 1}}


async def test_answers_are_paired_with_their_requests_by_response_id_not_by_order(addons) -> None:
    """Another addon's injected request is answered in turn too: its answer must not end Codex's request (which
    stays in the media window until its own answer ends), and an error refusing a request before any response
    exists goes to the oldest request the server has not begun to answer."""
    fix, ws, _ = addons
    f = socket_flow()
    ws.websocket_start(f)
    await client(ws, f, answered("call_unit_9"))
    await client(ws, f, cx.create([cx.prompt()]), injected=True)  # another addon's request on the socket
    ours, theirs = stream_events("resp_ours", "gpt-5.5", []), stream_events("resp_theirs", "gpt-5.5", [])
    await server(ws, f, ours[:1] + theirs[:1])  # both created: ours first, as sent
    await server(ws, f, theirs[1:])  # the other addon's request is answered first
    assert fix.window._ended[f"{f.id}/0"] is None  # ours is still in flight
    await server(ws, f, ours[1:])
    assert fix.window._ended[f"{f.id}/0"] is not None
    assert not ws._sockets[f.id].in_flight
