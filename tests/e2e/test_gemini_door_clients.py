"""Clients of Gemini's OpenAI-compatible door through a real, BARE mitmdump against the strict door mock
(tests/e2e/door_cli.py; the lead's tests load llmfix with the same helpers).

- The ``openai`` SDK: turn 1 streamed (each call whole, the signature on a trailing delta), turn 2 replayed without
  ``extra_content`` → the missing-signature 400 in Google's list-wrapped envelope; kept → 200.
- Qwen Code 0.24.4 with an OpenAI-compatible provider at Gemini's base URL: its built-in tool schemas (``oneOf``,
  ``type`` lists, ``additionalProperties``) are refused by the door's Schema on its first request, and it cannot read
  the list-wrapped error ("400 status code (no body)"); with the Schema let through, its second request drops
  ``extra_content`` from both calls → the missing-signature 400 (tests/fixtures/qwen-code/).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from tests.e2e import door_cli
from tests.e2e.gemini_cli import client_sent, start_proxy
from tests.upstreams import gemini_door
from tests.upstreams.gemini_canned import function_calls, text_answer
from tests.upstreams.gemini_errors import missing_signature
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(240)
DOOR = "/v1beta/openai/chat/completions"
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
MISSING = missing_signature("door", "read_file", 2)


@pytest.fixture
def upstream() -> Iterator[MockUpstream]:
    with MockUpstream(rules="by-host") as up:
        yield up


def test_openai_sdk_turn2_without_extra_content_is_the_list_wrapped_400(upstream, tmp_path) -> None:
    upstream.gemini.queue(function_calls(("read_file", {"path": "a.md"}), ("read_file", {"path": "b.md"})),
                          text_answer("alpha and beta"))
    messages = [{"role": "user", "content": "Read a.md and b.md."}]
    with start_proxy(upstream, tmp_path / "conf") as proxy:
        client = door_cli.openai_client(proxy)
        calls = door_cli.stream_calls(client, model=door_cli.MODEL, messages=messages, tools=TOOLS)
        issued = upstream.gemini.sent[0].issued
        assert [c["id"] for c in calls] == [c["id"] for c in issued] and len(calls) == 2
        assert calls[0]["extra_content"] == issued[0]["extra_content"] and "extra_content" not in calls[1]

        def turn2(replayed: list[dict]) -> list[dict]:
            return [*messages, {"role": "assistant", "content": None, "tool_calls": replayed},
                    *({"role": "tool", "tool_call_id": c["id"], "content": "text"} for c in replayed)]

        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model=door_cli.MODEL, messages=turn2(door_cli.without_extra_content(
                calls)), tools=TOOLS)
        kept = client.chat.completions.create(model=door_cli.MODEL, messages=turn2(calls), tools=TOOLS)
    assert refused.value.status_code == 400
    assert refused.value.body == [{"error": {"code": 400, "message": MISSING, "status": "INVALID_ARGUMENT"}}]
    assert kept.choices[0].message.content == "alpha and beta"
    assert [(r.path, r.status, r.reason) for r in upstream.requests] == [
        (DOOR, 200, None), (DOOR, 400, "signature-missing"), (DOOR, 200, None)]


def test_qwen_code_built_in_tools_are_refused_by_the_doors_schema(upstream, tmp_path) -> None:
    session = door_cli.QwenSession(tmp_path / "home")
    door_cli.binary()
    with start_proxy(upstream, tmp_path / "conf") as proxy:
        run = session.run(proxy)
    assert run.returncode != 0
    assert door_cli.result_of(run)["error"]["message"] == "[API Error: 400 status code (no body)]"
    [seen] = upstream.requests  # one request, no retry
    assert (seen.path, seen.status, seen.reason) == (DOOR, 400, "schema-unknown-field")
    assert seen.json["stream"] is True and seen.json["model"] == door_cli.MODEL
    refused = gemini_door.check(seen.json, upstream.gemini.ledger)  # what the door answered it, list-wrapped
    assert refused is not None
    for keyword in ('"oneOf"', '"additionalProperties"', 'Unknown name "type"'):
        assert keyword in refused.message


def test_qwen_code_drops_extra_content_and_its_second_request_is_rejected(upstream, tmp_path) -> None:
    upstream.gemini.door_schemas = False  # let its tools through, to see the tool turn
    session = door_cli.QwenSession(tmp_path / "home")
    door_cli.binary()
    upstream.gemini.queue(function_calls(*session.read_both()), text_answer("a.md says alpha, b.md says beta"))
    with start_proxy(upstream, tmp_path / "conf") as proxy:
        run = session.run(proxy)
        sent = client_sent(proxy)
    assert run.returncode != 0
    assert door_cli.result_of(run)["error"]["message"] == "[API Error: 400 status code (no body)]"
    first, second = upstream.requests
    assert (first.status, second.status, second.reason) == (200, 400, "signature-missing")
    assert [body for kind, body in sent if kind == "http"] == [first.body, second.body]  # byte for byte
    issued = upstream.gemini.sent[0].issued
    assert issued[0]["extra_content"]["google"]["thought_signature"]  # the mock did send it
    [assistant] = [m for m in second.json["messages"] if m["role"] == "assistant"]
    assert [c["id"] for c in assistant["tool_calls"]] == [c["id"] for c in issued]
    assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        args for _, args in session.read_both()]
    assert not any("extra_content" in c for c in assistant["tool_calls"])  # dropped by the client
    tools = [m for m in second.json["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == [c["id"] for c in issued]
    assert [m["content"] for m in tools] == [[{"type": "text", "text": f"{word}\n"}] for word in ("alpha", "beta")]
