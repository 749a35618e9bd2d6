"""restore-tool-media: media a gateway dropped come back only from a correlated client request."""

from __future__ import annotations

import base64
import copy
import io
import json
from typing import Any

from PIL import Image

from llmfix import engine
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.memory.media_window import MediaWindow
from tests.conftest import fixture_json
from tests.images import b64, image_bytes

CODEX = fixture_json("codex/turn2_request.json")
CALL = CODEX["input"][-1]["call_id"]
IMAGE = CODEX["input"][-1]["output"][0]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def send(body: dict[str, Any], flow: str, window: MediaWindow, dialect: Dialect = RESPONSES,
         host: str = "api.openai.com") -> engine.Outcome:
    req = engine.Request(dialect, host, 443, json.dumps(body).encode(), flow_id=flow)
    return engine.process(req, engine.Settings(window=window))


def degraded(output: Any) -> dict[str, Any]:
    body = copy.deepcopy(CODEX)
    body["input"][-1]["output"] = output
    return body


def test_gateway_emptied_image_only_output_gets_the_clients_image_back() -> None:
    w = MediaWindow(0.0)
    assert send(CODEX, "client", w).status == "untouched"  # the client's own request is fine
    result = send(degraded(""), "gateway", w)
    got = json.loads(result.body)["input"][-1]
    assert got["output"] == [IMAGE]  # same bytes, detail "original" kept
    assert [c.repair for c in result.changes] == ["restore-tool-media"]
    assert "put back" in result.changes[0].summary


def test_text_kept_image_dropped_gets_the_image_back_in_place() -> None:
    w = MediaWindow(0.0)
    client = degraded([{"type": "input_text", "text": "x.png 32x32"}, IMAGE])
    send(client, "client", w)
    got = json.loads(send(degraded("x.png 32x32"), "gateway", w).body)["input"][-1]
    assert got["output"] == client["input"][-1]["output"]


def ended(window_s: float, ago_s: float) -> tuple[Clock, MediaWindow]:
    """A media window of ``window_s`` that saw the client's request, which ended ``ago_s`` seconds ago."""
    clock = Clock()
    w = MediaWindow(window_s, clock)
    send(CODEX, "client", w)
    w.finish("client")
    clock.t += ago_s
    return clock, w


def test_nothing_comes_back_once_the_client_request_has_ended() -> None:
    _, w = ended(0.0, 0.5)
    assert send(degraded(""), "gateway", w).status == "untouched"


def test_a_window_admits_a_request_that_ended_just_before() -> None:
    clock, w = ended(2.0, 1.0)
    assert send(degraded(""), "gateway", w).status == "repaired"
    w.finish("gateway")
    clock.t += 5.0
    assert send(degraded(""), "gateway-2", w).status == "untouched"


def test_a_client_that_dropped_the_image_itself_does_not_get_it_back() -> None:
    w = MediaWindow(0.0)
    send(CODEX, "turn-1", w)  # an earlier request still carried it
    send(degraded("[image omitted]"), "turn-2", w)  # the client now sends it without the image
    assert send(degraded("[image omitted]"), "turn-2-gateway", w).status == "untouched"
    assert send(degraded(""), "turn-2-gateway-b", w).status == "untouched"


def test_different_text_means_a_different_result_and_is_left_alone() -> None:
    w = MediaWindow(0.0)
    send(degraded([{"type": "input_text", "text": "one"}, IMAGE]), "client", w)
    assert send(degraded("something else entirely"), "gateway", w).status == "untouched"


def test_no_correlated_request_no_change() -> None:
    assert send(degraded(""), "gateway", MediaWindow(0.0)).status == "untouched"


def test_chat_gateway_leg_gets_the_image_and_it_lands_after_the_tool_run() -> None:
    w = MediaWindow(0.0)
    send(CODEX, "client", w)
    chat = {"model": "gpt-5.5", "messages": [
        {"role": "user", "content": "look at x.png"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": CALL, "type": "function", "function": {"name": "view_image", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": CALL, "content": ""}]}
    result = send(chat, "gateway", w, CHAT)
    got = json.loads(result.body)["messages"]
    assert [m["role"] for m in got] == ["user", "assistant", "tool", "user"]
    assert got[3]["content"][1] == {"type": "image_url", "image_url": {"url": IMAGE["image_url"]}}
    assert [c.repair for c in result.changes][:1] == ["restore-tool-media"]


def test_anthropic_tool_result_gets_its_image_block_back() -> None:
    w = MediaWindow(0.0)
    client = fixture_json("pi-ai/anthropic_messages.json")
    send(client, "client", w, MESSAGES, "api.anthropic.com")
    lost = copy.deepcopy(client)
    lost["messages"][2]["content"][0]["content"] = [lost["messages"][2]["content"][0]["content"][0]]
    got = json.loads(send(lost, "gateway", w, MESSAGES, "api.anthropic.com").body)
    assert got["messages"][2] == client["messages"][2]
    assert got["messages"][2]["content"][0]["content"][1]["source"]["type"] == "base64"


def test_responses_client_to_anthropic_upstream_converts_the_image() -> None:
    w = MediaWindow(0.0)
    send(CODEX, "client", w)
    msgs = {"model": "claude-x", "max_tokens": 10, "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": CALL, "name": "view_image", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": CALL, "content": ""}]}]}
    got = json.loads(send(msgs, "gateway", w, MESSAGES, "api.anthropic.com").body)
    block = got["messages"][1]["content"][0]["content"][0]
    assert block["type"] == "image" and block["source"]["media_type"] == "image/png"
    assert IMAGE["image_url"].endswith(block["source"]["data"])


def test_an_image_put_back_is_fitted_in_the_same_request() -> None:
    """The gateway's body holds no image, so fit-images' needles are not in it; the image restore-tool-media puts
    back is still over Anthropic's 8000 px limit and must be fitted before it is sent, not on the next turn."""
    w = MediaWindow(0.0)
    wide = b64(image_bytes("png", size=(8200, 2)))
    client = copy.deepcopy(CODEX)  # a Responses client behind an unknown gateway: llmfix sends it the image as is
    client["input"][-1]["output"] = [{"type": "input_image", "image_url": f"data:image/png;base64,{wide}"}]
    assert send(client, "client", w, host="gateway.example").status == "untouched"
    msgs = {"model": "claude-x", "max_tokens": 10, "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": CALL, "name": "view_image", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": CALL, "content": ""}]}]}
    assert b'"image"' not in json.dumps(msgs).encode()  # fit-images' needle for Messages
    result = send(msgs, "gateway", w, MESSAGES, "api.anthropic.com")
    assert [c.repair for c in result.changes] == ["restore-tool-media", "fit-images"]
    block = json.loads(result.body)["messages"][1]["content"][0]["content"][0]
    with Image.open(io.BytesIO(base64.b64decode(block["source"]["data"]))) as im:
        assert im.size == (8000, 2)
    again = send(json.loads(result.body), "gateway-again", w, MESSAGES, "api.anthropic.com")
    assert again.status == "untouched"
