"""The real Codex CLI through a real mitmdump with llmfix, one short tool-call session each (tests/e2e/codex_cli.py).

- Codex 0.171 with its defaults (the built-in ``openai`` provider): the Responses API over a WebSocket to the
  strict WebSocket mock. ``codex exec`` of a ``view_image`` session completes (exit 0); every message arrives at
  the mock byte for byte as Codex sent it (a probe loaded before llmfix records what Codex sent); the turn
  carrying the image chains on ``previous_response_id`` and holds the image; no HTTP request carries a turn.
- Codex 0.169 over HTTPS (a custom provider with ``wire_api = "responses"``, as the Codex captures were made):
  the same session over ``POST /v1/responses`` with SSE answers, byte-identical likewise.

Skipped when Codex is not installed (``.ci/install-codex``), failed instead under CI.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e import codex_cli
from tests.upstreams.ws_mock import ResponsesSocketMock, function_call, stream_events, text

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def upstream() -> Iterator[ResponsesSocketMock]:
    with ResponsesSocketMock() as up:
        yield up


def image_parts(item: dict[str, Any]) -> list[str]:
    return [p.get("image_url", "")[:22] for p in item.get("output", []) if isinstance(p, dict)]


def test_codex_0171_over_the_websocket_completes_and_its_messages_arrive_byte_identical(upstream, tmp_path) -> None:
    codex = codex_cli.binary("0.171.0")
    home = tmp_path / "home"
    upstream.queue(function_call("view_image", {"path": str(home / "project" / "x.png")}))
    upstream.queue(text("done"))
    with codex_cli.start_proxy(upstream.address, tmp_path / "conf") as proxy:
        done = codex_cli.run(codex, home, proxy)
        sent = codex_cli.client_sent(proxy)
        log = codex_cli.changes(proxy)
    assert done.returncode == 0, f"codex exited {done.returncode}: {done.stderr[-2000:]}"
    assert '"text":"done"' in done.stdout  # the mock's last answer reached Codex's output
    [sock] = upstream.sockets
    assert sock.path == "/v1/responses" and sock.headers["openai-beta"].startswith("responses_websockets=")
    got = sock.received
    assert [r.status for r in got] == [200] * len(got) and len(got) >= 3
    assert [data for kind, data in sent if kind == "websocket"] == [r.raw for r in got]  # byte for byte
    warmup, *turns = [r for r in got if r.json.get("type") == "response.create"]
    assert warmup.json.get("generate") is False and warmup.chained_on is None
    assert all(t.chained_on for t in turns)  # incremental input over the socket, chained on the last response
    carrying = [i for t in turns for i in t.json["input"] if i.get("type") == "function_call_output"]
    assert [image_parts(i) for i in carrying] == [["data:image/png;base64,"]]  # view_image's PNG, nothing lost
    assert not [r for r in upstream.requests if r.method == "POST"]  # no turn fell back to HTTPS
    assert log == []  # a valid session: llmfix changed nothing


def sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def test_codex_0169_over_https_completes_and_its_requests_arrive_byte_identical(upstream, tmp_path) -> None:
    codex = codex_cli.binary("0.169.0")
    home = tmp_path / "home"
    upstream.queue_sse(sse(stream_events("resp_mock_1", "gpt-5.5", [
        function_call("view_image", {"path": str(home / "project" / "x.png")})])))
    upstream.queue_sse(sse(stream_events("resp_mock_2", "gpt-5.5", [text("done")])))
    with codex_cli.start_proxy(upstream.address, tmp_path / "conf") as proxy:
        done = codex_cli.run(codex, home, proxy, config=codex_cli.HTTP_PROVIDER + codex_cli.CONFIG)
        sent = codex_cli.client_sent(proxy)
        log = codex_cli.changes(proxy)
    assert done.returncode == 0, f"codex exited {done.returncode}: {done.stderr[-2000:]}"
    posts = [r for r in upstream.requests if r.method == "POST"]
    assert [(r.path, r.status) for r in posts] == [("/v1/responses", 200)] * 2
    assert [data for kind, data in sent if kind == "http"] == [r.body for r in posts]
    assert not upstream.sockets  # this set-up never opens the WebSocket
    last = posts[-1].json["input"]
    assert last[-2]["type"] == "function_call" and image_parts(last[-1]) == ["data:image/png;base64,"]
    assert log == []
