"""llmfix's content views: the diff, the client's original request, and any conversation (DESIGN promise 7)."""

from __future__ import annotations

import gzip
import io as stdio
import json
from typing import Any

import pytest
from mitmproxy import contentviews, http, io
from mitmproxy.test import taddons, tutils

from llmfix.proxy import LLMFix
from llmfix.report import views
from tests.conftest import fixture_bytes, make_flow

XAI = fixture_bytes("pi-ai/xai_responses.json")
KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
DIFF, ORIGINAL, CONVERSATION = "llmfix diff", "llmfix original", "llmfix conversation"


@pytest.fixture
def fix():
    a = LLMFix()
    with taddons.context(a) as tctx:
        tctx.configure(a, llmfix_memory=":memory:")
        yield a


def show(message: http.Message, f: http.HTTPFlow, view: str = "auto") -> contentviews.ContentviewResult:
    return contentviews.prettify_message(message, f, view_name=view)


def sse_response(fixture: str) -> http.Response:
    return tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=fixture_bytes(fixture))


def json_response(body: Any, status: int = 200) -> http.Response:
    return tutils.tresp(status_code=status, headers=http.Headers(content_type="application/json"),
                        content=json.dumps(body).encode())


def test_the_views_are_registered_once(fix) -> None:
    views.register()
    names = contentviews.registry.available_views()
    assert {DIFF, ORIGINAL, CONVERSATION} <= set(names)


# -- llmfix diff ----------------------------------------------------------------------------------------------


async def test_the_diff_is_chosen_for_a_repaired_request(fix) -> None:
    f = make_flow(XAI)
    await fix.request(f)
    result = show(f.request, f)
    assert result.view_name == DIFF
    assert "# repaired by: hoist-tool-media  (profile xai, model grok-4.3)" in result.text
    assert "+[4] message user" in result.text and "-    input_text 'Read image file" in result.text
    assert "+    input_image <image/png 82 B sha256:b76e3010>" not in result.text  # unchanged lines are context
    assert "iVBOR" not in result.text


async def test_the_diff_is_not_offered_for_an_untouched_request(fix) -> None:
    f = make_flow(fixture_bytes("pi-ai/openai_responses.json"), host="api.openai.com")
    await fix.request(f)
    assert show(f.request, f).view_name != DIFF
    assert show(f.request, f, DIFF).text == "(llmfix changed nothing in this message)\n"


async def test_the_views_survive_saving_and_loading_the_flow(fix) -> None:
    f = make_flow(XAI, headers={"content-encoding": "gzip"})
    f.request.raw_content = gzip.compress(XAI)
    await fix.request(f)
    buf = stdio.BytesIO()
    io.FlowWriter(buf).add(f)
    buf.seek(0)
    [loaded] = list(io.FlowReader(buf).stream())
    assert isinstance(loaded, http.HTTPFlow)
    assert show(loaded.request, loaded).text == show(f.request, f).text
    assert '"type": "input_image"' in show(loaded.request, loaded, ORIGINAL).text


# -- llmfix original ------------------------------------------------------------------------------------------


async def test_original_shows_the_clients_request_redacted(fix) -> None:
    body = json.loads(XAI)
    body["input"][1]["content"][0]["text"] = f"my key is {KEY}"
    f = make_flow(json.dumps(body).encode(), headers={"content-encoding": "gzip"})
    f.request.raw_content = gzip.compress(json.dumps(body).encode())  # the original is still gzip-encoded
    await fix.request(f)
    result = show(f.request, f, ORIGINAL)
    assert result.view_name == ORIGINAL and result.syntax_highlight == "yaml"
    head, _, pretty = result.text.partition("\n{")
    assert "llmfix changed it (hoist-tool-media)" in head
    sent = json.loads("{" + pretty)
    assert isinstance(sent["input"][3]["output"], list)  # as the client sent it: the array llmfix hoisted
    assert sent["input"][3]["output"][1]["image_url"] == "<image/png 82 B sha256:b76e3010>"
    assert sent["input"][1]["content"][0]["text"] == "my key is <secret 38 chars>"
    assert KEY not in result.text and "iVBOR" not in result.text
    assert show(f.request, f).view_name == DIFF  # never chosen by itself


async def test_original_in_report_mode_says_what_llmfix_would_apply() -> None:
    a = LLMFix()
    with taddons.context(a) as tctx:
        tctx.configure(a, llmfix_memory=":memory:", llmfix_mode="report")
        f = make_flow(XAI)
        await a.request(f)
    assert f.request.content == XAI
    text = show(f.request, f, ORIGINAL).text
    assert text.startswith("# the request as the client sent it, and as it went upstream (report mode: llmfix "
                           "would apply hoist-tool-media)\n")
    assert "report mode, llmfix would apply: hoist-tool-media" in show(f.request, f).text


def test_original_of_an_unchanged_message_is_that_message(fix) -> None:
    f = make_flow({"model": "m", "input": "hi", "api_key": KEY})
    f.response = json_response({"output": [], "note": "data:image/png;base64," + "A" * 200})
    req = show(f.request, f, ORIGINAL).text
    assert "did not change it" in req and '"api_key": "<redacted>"' in req and KEY not in req
    resp = show(f.response, f, ORIGINAL).text
    assert "the answer as the upstream sent it" in resp and "<image/png" in resp and "AAAA" not in resp


# -- llmfix conversation: requests ----------------------------------------------------------------------------


@pytest.mark.parametrize(("fixture", "host", "path", "expected"), [
    ("droid/0.225.2__two_images__turn2.json", "api.deepseek.com", "/v1/chat/completions",
     ["# chat request to api.deepseek.com · model mock-model · stream\n# tools: ", "    → call call_mock_a Read(",
      "[6] tool (tool_call_id=call_mock_b)", "    image_url <image/png 100 B sha256:87dd6153>"]),
    ("claude-code/single_png__turn2.json", "api.anthropic.com", "/v1/messages",
     ["# messages request to api.anthropic.com · model claude-opus-5-5 · stream", "# system: 'x-anthropic-",
      "    tool_use toolu_mock_003_0 Read(", "    tool_result toolu_mock_003_0:",
      "        image <image/png 82 B sha256:b76e3010>"]),
    ("codex/turn2_request.json", "api.openai.com", "/v1/responses",
     ["# responses request to api.openai.com · model gpt-5.5 · stream\n# tools: exec_command, ",
      "[5] function_call_output call_mock883ae17f536f41f8a10f_0:\n    input_image <image/png 99 B sha256:863e72bb>"]),
])
def test_conversation_of_a_request_in_each_dialect(fix, fixture: str, host: str, path: str,
                                                   expected: list[str]) -> None:
    f = make_flow(fixture_bytes(fixture), host=host, path=path)
    result = show(f.request, f, CONVERSATION)
    for line in expected:
        assert line in result.text, result.text
    assert "base64" not in result.text
    assert show(f.request, f).view_name != CONVERSATION  # JSON stays the default for requests


async def test_conversation_of_a_repaired_request_says_what_went_upstream(fix) -> None:
    f = make_flow(XAI)
    await fix.request(f)
    text = show(f.request, f, CONVERSATION).text
    assert "# as sent upstream, after llmfix's hoist-tool-media" in text
    assert "[4] message user\n    input_text 'Attached from tool result call_mock_1:'" in text


def test_conversation_of_a_string_input_and_of_a_bad_body(fix) -> None:
    f = make_flow({"model": "m", "input": "hello", "instructions": "be brief"})
    assert show(f.request, f, CONVERSATION).text.endswith("# instructions: 'be brief'\n[0] message user\n"
                                                          "    'hello'\n")
    bad = make_flow(b'{"model": "m", "input": [{"type": "message"}]}')
    assert "# cannot read the conversation: unexpected shape at input[0]" in show(bad.request, bad,
                                                                                  CONVERSATION).text


def test_conversation_is_not_offered_for_other_traffic(fix) -> None:
    f = make_flow({"a": 1}, path="/v1/models")
    f.response = json_response({"data": []})
    assert show(f.response, f).view_name != CONVERSATION
    assert "not an LLM API request" in show(f.request, f, CONVERSATION).text


# -- llmfix conversation: answers -------------------------------------------------------------------------------


@pytest.mark.parametrize(("fixture", "path", "expected"), [
    ("codex/turn1_response.sse.txt", "/v1/responses",
     ["# HTTP 200 · streamed responses answer, 7 events reassembled\n# model gpt-5.5 · status completed",
      '[0] function_call call_mock883ae17f536f41f8a10f_0 view_image({"path": "/home/dev/project/x.png"})']),
    ("droid/two_images__turn1_response.sse.txt", "/v1/chat/completions",
     ["stopped: tool_calls", "[0] assistant", "    → call call_mock_a Read(", "    → call call_mock_b Read("]),
    ("claude-code/single_png__turn1_response.sse.txt", "/v1/messages",
     ["streamed messages answer, 9 events reassembled\n"
      "# model claude-opus-5-5 · stopped: tool_use · tokens in 100 / out 12",
      "    tool_use toolu_mock_003_0 Read({'file_path': '/home/dev/project/a.png'})"]),
])
def test_a_streamed_answer_is_reassembled_and_chosen_by_default(fix, fixture: str, path: str,
                                                                 expected: list[str]) -> None:
    f = make_flow({"model": "m", "messages": [], "input": []}, path=path)
    f.response = sse_response(fixture)
    result = show(f.response, f)
    assert result.view_name == CONVERSATION
    for line in expected:
        assert line in result.text, result.text


def _sse(*events: tuple[str | None, Any]) -> bytes:
    return "".join((f"event: {n}\r\n" if n else "") + f"data: {json.dumps(d)}\r\n\r\n" for n, d in events).encode()


def test_streams_without_their_final_event_are_reassembled_from_deltas(fix) -> None:
    f = make_flow({"model": "m", "input": []})
    f.response = tutils.tresp(headers=http.Headers(content_type="text/event-stream; charset=utf-8"), content=_sse(
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                        "item": {"type": "message", "role": "assistant", "content": []}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 0, "delta": "Hel"}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 0, "delta": "lo"}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 1, "item": {
            "type": "function_call", "call_id": "call_9", "name": "ls", "arguments": ""}}),
        ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta",
                                                    "output_index": 1, "delta": '{"dir":'}),
        ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta",
                                                    "output_index": 1, "delta": '"/"}'}),
    ))
    text = show(f.response, f).text
    assert "[0] message assistant\n    output_text 'Hello'\n" in text
    assert '[1] function_call call_9 ls({"dir":"/"})' in text


def test_chat_stream_with_reasoning_text_and_usage(fix) -> None:
    f = make_flow({"model": "m", "messages": []}, host="api.deepseek.com", path="/v1/chat/completions")
    chunk = {"model": "deepseek-reasoner", "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                             "reasoning_content": "think"}}]}
    f.response = tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=_sse(
        (None, chunk),
        (None, {"choices": [{"index": 0, "delta": {"content": "Answer"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2}}),
    ) + b"data: [DONE]\n\n")
    text = show(f.response, f).text
    assert "\n# model deepseek-reasoner · stopped: stop · tokens in 5 / out 2\n" in text
    assert "[0] assistant\n    reasoning 'think'\n    'Answer'\n" in text


def test_anthropic_stream_with_text_and_thinking(fix) -> None:
    f = make_flow({"model": "m", "messages": []}, host="api.anthropic.com", path="/v1/messages")
    f.response = tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=_sse(
        ("message_start", {"type": "message_start",
                           "message": {"role": "assistant", "model": "claude", "content": []}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "thinking", "thinking": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        ("content_block_start", {"type": "content_block_start", "index": 1,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "text_delta", "text": "Hi there"}}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
    ))
    text = show(f.response, f).text
    assert "stopped: end_turn" in text
    assert "[0] assistant\n    thinking 'hmm'\n    text 'Hi there'\n" in text


def test_a_json_answer_is_readable_but_json_stays_the_default(fix) -> None:
    f = make_flow({"model": "m", "messages": []}, path="/v1/chat/completions")
    f.response = json_response({"model": "gpt", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]})
    assert show(f.response, f).view_name != CONVERSATION
    text = show(f.response, f, CONVERSATION).text
    assert text.startswith("# HTTP 200 · chat answer\n# model gpt · stopped: tool_calls\n[0] assistant\n")
    assert "→ call call_1 f({})" in text


def test_an_error_answer_shows_the_upstreams_message(fix) -> None:
    f = make_flow(XAI)
    f.response = json_response({"code": "Client specified an invalid argument",
                                "error": "did not match any variant of untagged enum ModelInput"}, status=422)
    text = show(f.response, f, CONVERSATION).text
    assert text.splitlines()[0] == "# HTTP 422 · responses answer"
    assert "untagged enum ModelInput" in text.splitlines()[1]
