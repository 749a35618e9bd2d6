"""End to end: broken tool histories through a real mitmdump, with the openai and anthropic SDKs.

Each history is a real capture (Codex, Claude Code, Droid, opencode, pi-ai) broken the way an
interruption, a compaction or opencode's id cut breaks it: items removed, ids collapsed, text put
first. Without llmfix the strict mock (real status and text, tests/upstreams) answers 400; with it 200,
and every text, image and result the client sent arrives exactly as often as it was sent.
Orphans are shown both ways: with the call remembered from the streamed turn-1 answer that issued it,
and without any memory of it (a fresh llmfix process per such test, so nothing learned leaks in).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from tests.e2e.harness import Mitmdump, loopback_proxy
from tests.e2e.harness import sdk_kwargs as _split
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import MockUpstream

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")]
CODEX_CALL = "call_mock883ae17f536f41f8a10f_0"
CC_CALL = "toolu_mock_003_0"
CONTENT_KEYS = frozenset({"text", "content", "output", "url", "image_url", "data"})


def start(upstream: MockUpstream, confdir: Path, *, llmfix: bool = True, **options: str) -> Mitmdump:
    return loopback_proxy(upstream, confdir, llmfix=llmfix, connection_strategy="lazy", **options)


@pytest.fixture(scope="module")
def fixed(upstream: MockUpstream, tmp_path_factory) -> Iterator[Mitmdump]:
    with start(upstream, tmp_path_factory.mktemp("conf")) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def bare(upstream: MockUpstream, tmp_path_factory) -> Iterator[Mitmdump]:
    with start(upstream, tmp_path_factory.mktemp("conf"), llmfix=False) as proxy:
        yield proxy


@pytest.fixture
def fresh(upstream: MockUpstream, tmp_path_factory) -> Iterator[Mitmdump]:
    """A llmfix process of its own: its memory holds only what this test sends through it."""
    with start(upstream, tmp_path_factory.mktemp("conf")) as proxy:
        yield proxy


def _client(proxy: Mitmdump, dialect: str) -> Any:
    """anthropic >= 2 is built on httpx2 and refuses an httpx.Client; openai takes httpx."""
    kind = httpx2.Client if dialect == "messages" else httpx.Client
    return kind(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=30)


def send(proxy: Mitmdump, dialect: str, body: dict[str, Any]) -> Any:
    """Send ``body`` with the real SDK of its dialect (non-streamed); the SDK's answer or its APIStatusError."""
    with _client(proxy, dialect) as http:
        try:
            if dialect == "messages":
                sdk = anthropic.Anthropic(api_key="sk-ant-test-not-a-key", http_client=http, max_retries=0)
                return sdk.messages.create(**_split(sdk.messages.create, body))
            sdk = openai.OpenAI(api_key="sk-test-not-a-key", http_client=http, max_retries=0)
            method = sdk.chat.completions.create if dialect == "chat" else sdk.responses.create
            return method(**_split(method, body))
        except (openai.APIStatusError, anthropic.APIStatusError) as e:
            return e


def stream_turn1(proxy: Mitmdump, upstream: MockUpstream, dialect: str, body: dict[str, Any], sse: str) -> None:
    """Turn 1 with the captured streamed answer that declared the call: what llmfix learns from."""
    upstream.queue_sse(capture_bytes(sse).decode(), chunk_delay=0.005)
    with _client(proxy, dialect) as http:
        if dialect == "messages":
            sdk = anthropic.Anthropic(api_key="sk-ant-test-not-a-key", http_client=http, max_retries=0)
            with sdk.messages.stream(**_split(sdk.messages.create, body)) as events:
                kinds = [e.type for e in events]  # read to the end: llmfix learns the call on its way through
            assert "content_block_stop" in kinds and kinds[-1] == "message_stop"
        else:
            sdk = openai.OpenAI(api_key="sk-test-not-a-key", http_client=http, max_retries=0)
            kinds = [e.type for e in sdk.responses.create(**_split(sdk.responses.create, body), stream=True)]
            assert kinds[-1] == "response.completed"


def strings(value: Any, key: str = "content") -> list[str]:
    if isinstance(value, str):
        return [value] if key in CONTENT_KEYS and len(value) > 3 else []
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings(v, k)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v, key)]
    return []


def received(upstream: MockUpstream, before: int) -> dict[str, Any]:
    [seen] = upstream.requests[before:]
    assert seen.status == 200, seen.reason
    return seen.json


def assert_everything_once(sent: dict[str, Any], got: dict[str, Any], key: str) -> None:
    """Every text, image and result string sent arrives as many times as it was sent (not lost, not doubled)."""
    sent_blob = "\0".join(strings(sent[key]))
    got_blob = "\0".join(_without_notes(s) for s in strings(got[key]))
    for s in dict.fromkeys(strings(sent[key])):
        assert got_blob.count(s) == sent_blob.count(s), s[:80]


def _without_notes(text: str) -> str:
    """A received string without the notes llmfix wrote (a missing result's text, an orphan's label line)."""
    if text.startswith("[No result was recorded for tool call "):
        return ""
    if text.startswith("[Result of tool call "):
        return text.partition("]")[2].removeprefix("\n")
    return text


def through_both(bare: Mitmdump, fixed: Mitmdump, upstream: MockUpstream, dialect: str, body: dict[str, Any],
                 rejection: str) -> dict[str, Any]:
    """400 with ``rejection`` in its text without llmfix; 200 with it. What the upstream received with llmfix."""
    error = send(bare, dialect, body)
    assert isinstance(error, (openai.APIStatusError, anthropic.APIStatusError)), error
    assert error.status_code == 400 and rejection in json.dumps(error.body), error.body
    return repaired_through(fixed, upstream, dialect, body)


def repaired_through(proxy: Mitmdump, upstream: MockUpstream, dialect: str, body: dict[str, Any]) -> dict[str, Any]:
    before = len(upstream.requests)
    answer = send(proxy, dialect, body)
    assert not isinstance(answer, Exception), answer
    proxy.wait_for_output("pair-tool-calls")
    got = received(upstream, before)
    assert_everything_once(body, got, "input" if dialect == "responses" else "messages")
    return got


# --- Chat Completions (openai SDK) ------------------------------------------------------------------------------


def test_chat_interrupted_single_call(bare, fixed, upstream) -> None:
    body = capture_json("pi-ai/chat_completions.json")
    del body["messages"][3:5]
    got = through_both(bare, fixed, upstream, "chat", body, "did not have response messages: call_mock_17")
    assert got["messages"][3]["role"] == "tool" and "No result was recorded" in got["messages"][3]["content"]


def test_chat_interrupted_parallel_call(bare, fixed, upstream) -> None:
    body = capture_json("droid/0.225.2__two_images_noimg__turn2.json")
    del body["messages"][5]
    body["messages"].append({"role": "user", "content": "What happened to b.png?"})
    got = through_both(bare, fixed, upstream, "chat", body, "did not have response messages: call_mock_b")
    assert [m.get("tool_call_id") for m in got["messages"][4:6]] == ["call_mock_a", "call_mock_b"]


def test_chat_opencode_mistral_duplicate_ids(bare, fixed, upstream) -> None:
    body = capture_json("opencode/chat__mistral-medium-latest__two_png__turn2.json")
    got = through_both(bare, fixed, upstream, "chat", body, "Duplicate value for 'tool_call_id' of 'callmock0'")
    ids = [c["id"] for c in got["messages"][2]["tool_calls"]]
    assert len(set(ids)) == 2 and all(len(i) == 9 and i.isalnum() for i in ids)


# --- Responses (openai SDK) -------------------------------------------------------------------------------------------


def _codex_call_at(body: dict[str, Any]) -> int:
    return next(i for i, it in enumerate(body["input"]) if it.get("type") == "function_call")


def test_responses_codex_interrupted_call(bare, fixed, upstream) -> None:
    body = capture_json("codex/turn2_request.json")
    del body["input"][_codex_call_at(body) + 1]
    body["input"].append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]})
    got = through_both(bare, fixed, upstream, "responses", body, f"No tool output found for function call {CODEX_CALL}")
    assert got["input"][_codex_call_at(body) + 1]["call_id"] == CODEX_CALL


def test_responses_interrupted_parallel_call(bare, fixed, upstream) -> None:
    body = capture_json("pi-ai/xai_responses_parallel_tools.json")
    del body["input"][5]
    through_both(bare, fixed, upstream, "responses", body, "No tool output found for function call call_mock_13_1")


def test_responses_empty_call_ids(bare, fixed, upstream) -> None:
    body = capture_json("pi-ai/openai_responses.json")
    for item in body["input"]:
        if "call_id" in item:
            item["call_id"] = ""
    got = through_both(bare, fixed, upstream, "responses", body, "empty string")
    assert len({it["call_id"] for it in got["input"] if "call_id" in it}) == 1


def test_responses_orphan_output_with_memory_of_the_streamed_call(bare, fresh, upstream) -> None:
    stream_turn1(fresh, upstream, "responses", capture_json("codex/turn1_request.json"), "codex/turn1_response.sse.txt")
    body = capture_json("codex/turn2_request.json")
    call = body["input"].pop(_codex_call_at(body))
    got = through_both(bare, fresh, upstream, "responses", body,
                       f"No tool call found for function call output with call_id {CODEX_CALL}")
    restored = got["input"][_codex_call_at(got)]
    assert (restored["call_id"], restored["name"], json.loads(restored["arguments"])) == (
        call["call_id"], call["name"], json.loads(call["arguments"]))


def test_responses_orphan_output_without_memory(bare, fresh, upstream) -> None:
    body = capture_json("codex/turn2_request.json")
    at = _codex_call_at(body)
    del body["input"][at]
    got = through_both(bare, fresh, upstream, "responses", body, "No tool call found for function call output")
    assert got["input"][at]["role"] == "user" and CODEX_CALL in got["input"][at]["content"][0]["text"]


def test_responses_previous_response_id_passes_byte_identical(fixed, upstream) -> None:
    body = capture_json("codex/turn2_request.json")
    del body["input"][_codex_call_at(body)]
    body["previous_response_id"] = "resp_mock_1"
    raw = json.dumps(body).encode()
    before = len(upstream.requests)
    with httpx.Client(proxy=fixed.url, verify=fixed.ssl_context(), trust_env=False, timeout=30) as c:
        response = c.post("https://api.openai.com/v1/responses", content=raw,
                          headers={"content-type": "application/json"})
    assert response.status_code == 200
    [seen] = upstream.requests[before:]
    assert seen.body == raw


# --- Anthropic Messages (anthropic SDK) -------------------------------------------------------------------------------


def test_messages_claude_code_esc_then_new_prompt(bare, fixed, upstream) -> None:
    body = capture_json("claude-code/single_png__turn2.json")
    body["messages"][3] = {"role": "user", "content": [{"type": "text", "text": "never mind, what now?"}]}
    got = through_both(bare, fixed, upstream, "messages", body,
                       f"`tool_use` ids were found without `tool_result` blocks immediately after: {CC_CALL}")
    first = got["messages"][3]["content"][0]
    assert (first["type"], first["tool_use_id"], first["is_error"]) == ("tool_result", CC_CALL, True)


def test_messages_interrupted_parallel_call(bare, fixed, upstream) -> None:
    body = capture_json("claude-code/single_png__turn2.json")
    second = {"type": "tool_use", "id": "toolu_mock_003_1", "name": "Read", "input": {"file_path": "/b.png"}}
    body["messages"][2]["content"].append(second)
    got = through_both(bare, fixed, upstream, "messages", body, "toolu_mock_003_1")
    assert [b["tool_use_id"] for b in got["messages"][3]["content"]] == [CC_CALL, "toolu_mock_003_1"]


def test_messages_text_before_tool_result(bare, fixed, upstream) -> None:
    body = capture_json("pi-ai/anthropic_messages.json")
    body["messages"][2]["content"].insert(0, {"type": "text", "text": "Here is what the tool said:"})
    got = through_both(bare, fixed, upstream, "messages", body, "toolu_mock_21")
    assert [b["type"] for b in got["messages"][2]["content"]] == ["tool_result", "text"]


def test_messages_duplicate_tool_use_ids(bare, fixed, upstream) -> None:
    body = capture_json("pi-ai/anthropic_messages.json")
    body["messages"][3:3] = [copy.deepcopy(body["messages"][1]), copy.deepcopy(body["messages"][2])]
    got = through_both(bare, fixed, upstream, "messages", body, "`tool_use` ids must be unique")
    assert got["messages"][3]["content"][0]["id"] == got["messages"][4]["content"][0]["tool_use_id"] != "toolu_mock_21"


def _cc_turn1() -> dict[str, Any]:
    body = capture_json("claude-code/single_png__turn2.json")
    body["messages"] = body["messages"][:2]
    return body


def test_messages_orphan_result_with_memory_of_the_streamed_call(bare, fresh, upstream) -> None:
    stream_turn1(fresh, upstream, "messages", _cc_turn1(), "claude-code/single_png__turn1_response.sse.txt")
    body = capture_json("claude-code/single_png__turn2.json")
    use = body["messages"][2]["content"][0]
    body["messages"][2]["content"] = [{"type": "text", "text": "Let me read it."}]
    got = through_both(bare, fresh, upstream, "messages", body, "unexpected `tool_use_id` found in `tool_result`")
    assert got["messages"][2]["content"][1] == use


def test_messages_orphan_result_without_memory(bare, fresh, upstream) -> None:
    body = capture_json("claude-code/single_png__turn2.json")
    body["messages"][2]["content"] = [{"type": "text", "text": "Let me read it."}]
    got = through_both(bare, fresh, upstream, "messages", body, "unexpected `tool_use_id` found in `tool_result`")
    blocks = got["messages"][3]["content"]
    assert blocks[0]["type"] == "text" and CC_CALL in blocks[0]["text"] and blocks[1]["type"] == "image"


@pytest.mark.parametrize(("dialect", "name", "url"), [
    ("chat", "pi-ai/chat_completions.json", "https://api.openai.com/v1/chat/completions"),
    ("responses", "codex/turn2_request.json", "https://api.openai.com/v1/responses"),
    ("messages", "claude-code/single_png__turn2.json", "https://api.anthropic.com/v1/messages"),
    ("messages", "pi-ai/anthropic_messages.json", "https://api.anthropic.com/v1/messages"),
])
def test_valid_captures_pass_byte_identical(fixed, upstream, dialect: str, name: str, url: str) -> None:
    raw = capture_bytes(name)
    before = len(upstream.requests)
    body = json.loads(raw)
    if body.get("stream"):
        upstream.queue_sse("data: [DONE]\n\n" if dialect == "chat" else "event: ping\ndata: {}\n\n")
    with httpx.Client(proxy=fixed.url, verify=fixed.ssl_context(), trust_env=False, timeout=30) as c:
        c.post(url, content=raw, headers={"content-type": "application/json"})
    [seen] = upstream.requests[before:]
    assert seen.status == 200 and seen.body == raw
