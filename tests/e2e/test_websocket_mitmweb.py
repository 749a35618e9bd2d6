"""mitmweb shows a repaired Responses WebSocket message like a repaired request (a real mitmweb, its HTTP API).

The flow list has the socket's flow marked with a comment naming the repair and the message; the flow's messages,
rendered the way mitmweb's messages tab asks for them (``/flows/<id>/messages/content/auto``), show the
repaired message in the ``llmfix diff`` view and the others in their usual views. The browser itself is driven
for HTTP requests in tests/e2e/test_mitmweb.py; these views are the same content views.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx
import pytest

from tests.e2e.harness import LOOPBACK_SCRIPT
from tests.e2e.test_mitmweb import FIX_SCRIPT, Mitmweb
from tests.e2e.ws_client import ask, open_socket
from tests.upstreams import codex_ws as cx
from tests.upstreams.ws_mock import ResponsesSocketMock

pytestmark = pytest.mark.timeout(120)
GO_ON = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "never mind, go on"}]}


def test_mitmweb_marks_the_socket_and_shows_the_repaired_messages_diff(confdir: Path) -> None:
    password = secrets.token_hex(12)
    auth = {"authorization": f"Bearer {password}"}
    with ResponsesSocketMock() as upstream:
        options = {"loopback_upstream": upstream.address, "llmfix_memory": ":memory:", "web_password": password,
                   "web_open_browser": "false"}
        with Mitmweb.on_a_free_port(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options, confdir=confdir) as web:
            broken = cx.create([cx.developer(), cx.prompt(), cx.call() | {"call_id": "call_web_1"}, GO_ON])
            with open_socket(web, "api.openai.com") as ws:
                assert ask(ws, cx.dumps(broken))[-1]["type"] == "response.completed"
                assert ask(ws, cx.dumps(cx.create([cx.prompt()])))[-1]["type"] == "response.completed"
            flows = httpx.get(f"{web.web_url}/flows", headers=auth, timeout=10).json()
            [flow] = [f for f in flows if f.get("websocket")]
            assert flow["marked"] == "🔧"  # mitmweb sends the emoji for ":wrench:"
            assert flow["comment"] == "llmfix: pair-tool-calls (1 change) in message 0"
            shown = httpx.get(f"{web.web_url}/flows/{flow['id']}/messages/content/auto.json", headers=auth,
                              timeout=10).json()
    assert shown[0]["from_client"] and shown[0]["view_name"] == "llmfix diff"
    assert "# repaired by: pair-tool-calls  (profile openai, model gpt-5.5)" in shown[0]["text"]
    assert "call_web_1" in shown[0]["text"] and "data:image" not in str(shown)
    later = [m for m in shown[1:] if m["from_client"]]
    assert later and all(m["view_name"] != "llmfix diff" for m in later)  # the valid one: its usual view
