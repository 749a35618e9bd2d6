"""Learning reasoning from answers: DeepSeek/Kimi ``reasoning_content`` and which upstream signed which thinking
block, from streams (however chunked) and JSON answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from llmfix.dialects.chat.learn_reasoning import KIND, call_key, context, last_context, text_key
from llmfix.dialects.messages.learn_thinking import SIGNED, block_key
from llmfix.memory.learn import StreamLearner, learn_json_response
from llmfix.memory.store import Reasoning, ToolCall
from tests.upstreams.reasoning_canned import anthropic_sse, chat_sse, with_reasoning
from tests.upstreams.thinking import Ledger

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
UP = "api.deepseek.com:443/chat"
THOUGHT = "The user wants both images; read a.png and b.png in parallel.\nThen describe them."


def learn(dialect: str, chunks: list[bytes], upstream: str = UP, request: Any = None
          ) -> tuple[list[ToolCall], list[Reasoning]]:
    calls: list[ToolCall] = []
    thoughts: list[Reasoning] = []
    learner = StreamLearner(dialect, calls.extend, on_reasoning=thoughts.extend, upstream=upstream,
                            request=None if request is None else lambda: request)
    for chunk in chunks:
        learner.feed(chunk)
    learner.feed(b"")
    return calls, thoughts


def droid_turn1() -> bytes:
    """Droid's captured turn-1 stream (two parallel Read calls), answered in thinking mode."""
    return with_reasoning((FIXTURES / "droid/two_images__turn1_response.sse.txt").read_text(), THOUGHT).encode()


def test_a_thinking_stream_teaches_its_reasoning_under_each_call_with_its_upstream_and_declaration() -> None:
    calls, thoughts = learn("chat", [droid_turn1()])
    assert [c.call_id for c in calls] == ["call_mock_a", "call_mock_b"]  # the calls are learned as before
    keys = [call_key(UP, c, "Read", "function", f'{{"file_path": "/home/dev/project/{n}.png"}}')
            for c, n in (("call_mock_a", "a"), ("call_mock_b", "b"))]
    assert thoughts == [Reasoning(KIND, keys[0], THOUGHT, UP), Reasoning(KIND, keys[1], THOUGHT, UP)]
    # Droid replays the calls in its own JSON: the same declaration, the same key
    replayed = json.loads((FIXTURES / "droid/0.225.2__two_images_noimg__turn2.json").read_text())["messages"][3]
    assert [call_key(UP, tc["id"], tc["function"]["name"], "function", tc["function"]["arguments"])
            for tc in replayed["tool_calls"]] == keys
    assert replayed["tool_calls"][0]["function"]["arguments"] == '{"file_path":"/home/dev/project/a.png"}'


def test_a_kimi_id_that_every_session_makes_is_told_apart_by_upstream_and_declaration() -> None:
    """Kimi numbers its ids within a conversation: ``functions.bash:0`` is every session's first bash call."""
    kimi = "api.moonshot.ai:443/chat"
    a = call_key(kimi, "functions.bash:0", "bash", "function", '{"cmd": "cat ~/.env"}')
    assert a != call_key(kimi, "functions.bash:0", "bash", "function", '{"cmd": "ls"}')
    assert a != call_key(kimi, "functions.bash:0", "shell", "function", '{"cmd": "cat ~/.env"}')
    assert a != call_key(UP, "functions.bash:0", "bash", "function", '{"cmd": "cat ~/.env"}')
    assert a == call_key(kimi, "functions.bash:0", "bash", "function", '{ "cmd":"cat ~/.env" }')


@given(cuts=st.lists(st.integers(0, 4000), max_size=12))
def test_the_reasoning_is_byte_exact_however_the_stream_is_cut(cuts: list[int]) -> None:
    raw = droid_turn1()
    points = sorted({min(c, len(raw)) for c in cuts})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True) if b > a]  # b"" ends it
    assert [r.value for r in learn("chat", chunks)[1]] == [THOUGHT, THOUGHT]


def test_a_turn_without_calls_is_known_by_its_text_and_the_message_it_answered() -> None:
    text = "Let me look at the file structure first."  # how DeepSeek opens many a session
    sse = chat_sse("deepseek-v4-flash", "Describe them.", text=text).encode()
    request = {"model": "deepseek-v4-flash", "messages": [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "text", "text": "a.png"}]}]}
    before = context("user", "Describe \na.png", None)
    assert last_context(request) == before
    _, thoughts = learn("chat", [sse], request=request)
    assert thoughts == [Reasoning(KIND, text_key(UP, text, before), "Describe them.", UP)]
    other = {**request, "messages": [*request["messages"][:1], {"role": "user", "content": "Describe b.png"}]}
    assert learn("chat", [sse], request=other)[1][0].key != thoughts[0].key  # another session's opener
    assert learn("chat", [sse])[1] == []  # the request unknown: no record rather than one any session could make
    assert learn("chat", [chat_sse("m", "Think.", text="  ").encode()], request=request)[1] == []


def test_a_stream_without_reasoning_teaches_none_and_an_empty_reasoning_neither() -> None:
    assert learn("chat", [(FIXTURES / "droid/two_images__turn1_response.sse.txt").read_bytes()])[1] == []
    assert learn("chat", [chat_sse("deepseek-v4-flash", "", calls=[("call_1", "read", "{}")]).encode()])[1] == []


def test_a_lost_event_loses_the_reasoning_rather_than_keep_half_of_it() -> None:
    calls: list[ToolCall] = []
    thoughts: list[Reasoning] = []
    learner = StreamLearner("chat", calls.extend, on_reasoning=thoughts.extend, max_buffer=400)
    big = {"choices": [{"index": 0, "delta": {"reasoning_content": "x" * 1000}, "finish_reason": None}]}
    learner.feed(b'data: {"choices":[{"index":0,"delta":{"reasoning_content":"a"}}]}\n\n')
    learner.feed(f"data: {json.dumps(big)}\n\n".encode())
    learner.feed(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
    learner.feed(b"")
    assert thoughts == []


def test_a_json_answer_teaches_its_reasoning() -> None:
    body = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "", "reasoning_content": THOUGHT,
        "tool_calls": [{"id": "call_j", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}}]}
    thoughts: list[Reasoning] = []
    calls = learn_json_response("chat", json.dumps(body).encode(), upstream=UP, on_reasoning=thoughts.extend)
    assert [c.call_id for c in calls] == ["call_j"]
    assert thoughts == [Reasoning(KIND, call_key(UP, "call_j", "read", "function", "{}"), THOUGHT, UP)]


# -- Anthropic thinking signatures -------------------------------------------------------------------------------

ANTHROPIC = "api.anthropic.com:443/messages"


def test_a_streamed_thinking_block_is_known_by_its_hash_as_issued() -> None:
    ledger = Ledger()
    sse = anthropic_sse(ledger, "claude-opus-5-5", "Let me read it.\nCarefully.",
                        tool_uses=[("toolu_1", "Read", {"file_path": "a.png"})])
    calls, thoughts = learn("messages", [sse.encode()], ANTHROPIC)
    assert [c.call_id for c in calls] == ["toolu_1"]
    block = {"type": "thinking", "thinking": "Let me read it.\nCarefully.",
             "signature": ledger.sign("Let me read it.\nCarefully.")}
    assert thoughts == [Reasoning(SIGNED, block_key(block) or "", "claude-opus-5-5", ANTHROPIC)]
    edited = {**block, "thinking": "Let me read it."}
    assert block_key(edited) != block_key(block)  # an edited block is not the one issued


@given(cut=st.integers(1, 2000))
def test_the_block_is_the_same_however_the_stream_is_cut(cut: int) -> None:
    ledger = Ledger()
    raw = anthropic_sse(ledger, "m", "Think.", text="Hi.").encode()
    whole = learn("messages", [raw], ANTHROPIC)[1]
    assert learn("messages", [raw[:cut], raw[cut:]], ANTHROPIC)[1] == whole


def test_redacted_thinking_and_json_answers() -> None:
    data = Ledger().redacted()
    body = {"model": "claude-x", "content": [{"type": "redacted_thinking", "data": data},
                                              {"type": "thinking", "thinking": "t", "signature": "s"},
                                              {"type": "text", "text": "hi"}]}
    thoughts: list[Reasoning] = []
    learn_json_response("messages", json.dumps(body).encode(), upstream=ANTHROPIC, on_reasoning=thoughts.extend)
    assert [r.key for r in thoughts] == [block_key(body["content"][0]), block_key(body["content"][1])]
    assert {r.value for r in thoughts} == {"claude-x"}
    events = [{"type": "message_start", "message": {"model": "claude-x"}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": data}},
              {"type": "content_block_stop", "index": 0}]
    raw = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    assert learn("messages", [raw], ANTHROPIC)[1] == thoughts[:1]


def test_a_block_cut_off_before_its_stop_is_not_learned() -> None:
    raw = anthropic_sse(Ledger(), "m", "Think.", text="Hi.")
    cut = raw[: raw.index('"type":"content_block_stop"')]
    assert learn("messages", [cut.encode()], ANTHROPIC)[1] == []
