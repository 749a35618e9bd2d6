"""End to end: a long Droid-like Chat session through a real mitmdump, turn after turn, where
llmfix parses only what each turn appends (``body/prefix.py``) and runs such turns on the event loop
(``engine.light``): valid turns still reach the strict OpenAI mock byte-identical, a turn whose new tool
message carries an image is still repaired (the mock answers OpenAI's 400 to it otherwise), and a turn
whose new item is malformed still gets its one warning, naming the flow and the item, and goes through
unchanged.

The client is the real openai SDK (it serialises the same history the same way each turn, as Droid does);
the history is the Droid 0.225.2 capture padded with Execute round trips to ~400 KB, over the size llmfix
would otherwise send to a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.upstreams.captures import capture_json
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(180)
FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJR"
       "U5ErkJggg==")


@pytest.fixture(scope="module")
def upstream() -> Iterator[MockUpstream]:
    with MockUpstream(rules="openai") as up:
        yield up


def round_trip(k: int, content: Any = None) -> list[dict[str, Any]]:
    cid = f"call_e2e_{k:04d}"
    out = "\n".join(f"src/mod_{k}_{j}.rs: fn handler_{j}() {{ ... }}" for j in range(40))
    return [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "Execute", "arguments": json.dumps({"k": k})}}]},
        {"role": "tool", "tool_call_id": cid, "content": out if content is None else content},
    ]


def history() -> dict[str, Any]:
    body = capture_json("droid/0.225.2__single_image__turn2.json")
    body["stream"] = False
    body.pop("stream_options", None)
    pad = [m for k in range(200) for m in round_trip(k)]
    body["messages"] = body["messages"][:3] + pad + body["messages"][3:]
    return body


def send(p: Mitmdump, body: dict[str, Any]) -> None:
    with httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=30) as http:
        sdk = openai.OpenAI(base_url="https://api.openai.com/v1", api_key="sk-test-session", http_client=http,
                            max_retries=0)
        with contextlib.suppress(openai.BadRequestError):  # the caller checks what the upstream saw and answered
            sdk.chat.completions.create(**body)


def test_a_long_session_turn_after_turn(upstream: MockUpstream, tmp_path: Path) -> None:
    body = history()
    options = {"loopback_upstream": upstream.address, "connection_strategy": "lazy", "llmfix_memory": ":memory:"}
    with Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options, confdir=tmp_path / "conf") as p:
        seen: list[Any] = []

        def turn(new: list[dict[str, Any]]) -> Any:
            body["messages"] = body["messages"] + new
            before = len(upstream.requests)
            send(p, body)
            [got] = upstream.requests[before:]
            seen.append(got)
            return got

        first = turn([])
        assert len(first.body) > 256 * 1024
        assert first.status == 200, first.reason
        for k in range(3):  # valid turns: untouched, byte for byte
            got = turn(round_trip(1000 + k))
            assert got.status == 200, got.reason
            assert got.json == body  # the SDK's own bytes: llmfix left them alone (content-length kept)
            assert got.headers["content-length"] == str(len(got.body))

        # a new tool message with an image (a gateway's B4): OpenAI's 400 without llmfix; hoisted with it
        image = [{"type": "text", "text": "screen.png"}, {"type": "image_url", "image_url": {"url": PNG}}]
        got = turn(round_trip(2000, image))
        assert got.status == 200, got.reason
        n = len(body["messages"])
        tool, hoisted = got.json["messages"][n - 1], got.json["messages"][n]
        assert tool["role"] == "tool" and tool["tool_call_id"] == "call_e2e_2000"
        assert hoisted["role"] == "user" and PNG in json.dumps(hoisted)
        p.wait_for_output("hoist-tool-media")

        # a malformed new item: one warning naming the flow and the item; forwarded unchanged
        bad = {"role": "user", "content": 42}
        got = turn([bad])
        assert got.json == body
        warning = p.wait_for_output(re.compile(r"llmfix: .* left unchanged: unexpected shape at messages\[(\d+)\]"))
        assert int(warning.group(1)) == len(body["messages"]) - 1
        assert p.output().count("left unchanged: unexpected shape") == 1
        assert "Traceback" not in p.output()
