"""The real Qwen Code 0.24.4 (tests/e2e/door_cli.py) on Gemini's OpenAI-compatible door through a real mitmdump WITH
llmfix, against the strict door mock, run headless as a user would (an OpenAI-compatible provider at Gemini's base
URL). Bare, its first request is refused for its built-in tool schemas, and its second for the signature it dropped
(tests/e2e/test_gemini_door_clients.py).

- Through llmfix the two-call session runs to its answer: the tools are fitted to the door's Schema (names,
  descriptions, properties kept), and the second request gets back, byte for byte, the signature the door streamed
  with the first call; nothing else of what Qwen Code sent changes.
- A valid session leaves byte for byte: with the door's Schema let through (Qwen Code's tools are never valid at the
  real door, so fit-tool-schemas is switched off here) and a model that checks no signature (``gemini-2.5-flash``),
  every request reaches the door as Qwen Code sent it, and llmfix logs no change.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e import door_cli
from tests.e2e.codex_cli import changes
from tests.e2e.gemini_cli import client_sent, start_proxy
from tests.upstreams.gemini_canned import function_calls, text_answer
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(240)
DOOR = "/v1beta/openai/chat/completions"
DONE = "a.md says alpha, b.md says beta"


@pytest.fixture
def upstream() -> Iterator[MockUpstream]:
    with MockUpstream(rules="by-host") as up:
        yield up


def without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


def test_qwen_code_s_session_is_repaired_and_answered(upstream, tmp_path) -> None:
    door_cli.binary()
    session = door_cli.QwenSession(tmp_path / "home")
    upstream.gemini.queue(function_calls(*session.read_both()), text_answer(DONE))
    conf = tmp_path / "conf"
    with start_proxy(upstream, conf, llmfix=True, llmfix_memory=str(conf / "llmfix-memory.sqlite3")) as proxy:
        run = session.run(proxy)
        sent = [json.loads(body) for kind, body in client_sent(proxy) if kind == "http"]
        output = proxy.output()
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    assert DONE in json.dumps(door_cli.result_of(run))
    first, second = upstream.requests
    assert [(r.path, r.status) for r in (first, second)] == [(DOOR, 200), (DOOR, 200)]
    issued = upstream.gemini.sent[0].issued
    # its tools: fitted, each name and each property kept
    for got, own in zip(second.json["tools"], sent[1]["tools"], strict=True):
        assert got["function"]["name"] == own["function"]["name"]
        assert set(got["function"].get("parameters", {}).get("properties", {})) == set(
            own["function"].get("parameters", {}).get("properties", {}))
    assert first.json["messages"] == sent[0]["messages"] and without(first.json, "tools") == without(sent[0], "tools")
    # what it dropped: the first call's signature, byte for byte; nothing else
    [assistant] = [m for m in second.json["messages"] if m["role"] == "assistant"]
    [own] = [m for m in sent[1]["messages"] if m["role"] == "assistant"]
    assert not any("extra_content" in c for c in own["tool_calls"])
    assert assistant["tool_calls"] == [{**own["tool_calls"][0], "extra_content": issued[0]["extra_content"]},
                                       own["tool_calls"][1]]
    assert [m for m in second.json["messages"] if m["role"] != "assistant"] == [
        m for m in sent[1]["messages"] if m["role"] != "assistant"]
    assert without(second.json, "tools", "messages") == without(sent[1], "tools", "messages")
    repairs = [c["repair"] for c in changes(proxy)]
    assert "restore-tool-call-signatures" in repairs and "fit-tool-schemas" in repairs
    signature = issued[0]["extra_content"]["google"]["thought_signature"]
    assert signature not in output + json.dumps(changes(proxy)) and door_cli.KEY not in output


def test_qwen_code_s_valid_session_leaves_byte_for_byte(upstream, tmp_path) -> None:
    door_cli.binary()
    upstream.gemini.door_schemas = False
    session = door_cli.QwenSession(tmp_path / "home", model="gemini-2.5-flash")
    upstream.gemini.queue(function_calls(*session.read_both()), text_answer(DONE))
    with start_proxy(upstream, tmp_path / "conf", llmfix=True, llmfix_disable="fit-tool-schemas") as proxy:
        run = session.run(proxy)
        sent = [body for kind, body in client_sent(proxy) if kind == "http"]
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    assert DONE in json.dumps(door_cli.result_of(run))
    assert [r.status for r in upstream.requests] == [200, 200]
    assert [r.body for r in upstream.requests] == sent  # byte for byte
    assert changes(proxy) == []
