"""The Chat repairs on Droid's captures and on the valid shapes they must leave alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.registry import CHAT
from llmfix.memory.learn import StreamLearner, calls_in_request
from llmfix.memory.recall import Recall
from llmfix.memory.sqlite import SqliteStore
from llmfix.memory.store import ToolCall
from tests.conftest import fixture_bytes, fixture_json
from tests.images import png_url

VERSIONS = ["0.215.0", "0.225.2"]
A_ARGS = '{"file_path": "/home/dev/project/a.png"}'
B_ARGS = '{"file_path": "/home/dev/project/b.png"}'
IMG = {"type": "image_url", "image_url": {"url": png_url(0)}}


def run(raw: bytes | dict, host: str = "api.openai.com", memory: Any = None) -> engine.Outcome:
    data = raw if isinstance(raw, bytes) else json.dumps(raw).encode()
    return engine.process(engine.Request(CHAT, host, 443, data), engine.Settings(memory=memory))


@pytest.fixture
def memory():
    m = Recall(SqliteStore(":memory:"))
    m.remember([ToolCall("call_mock_a", "Read", A_ARGS, "chat"), ToolCall("call_mock_b", "Read", B_ARGS, "chat")])
    yield m
    m.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_droid_two_images_untangled_with_declarations_from_memory(version: str, memory) -> None:
    sent = fixture_json(f"droid/{version}__two_images__turn2.json")
    result = run(fixture_bytes(f"droid/{version}__two_images__turn2.json"), memory=memory)
    got = json.loads(result.body)["messages"]
    n = len(sent["messages"])
    tail = got[n - 5:]
    assert [m["role"] for m in tail] == ["assistant", "tool", "tool", "user", "user"]
    calls = tail[0]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("call_mock_a", "Read", '{"file_path":"/home/dev/project/a.png"}'), ("call_mock_b", "Read", B_ARGS)]
    assert calls[0] == sent["messages"][n - 5]["tool_calls"][0]  # the declared one is untouched
    assert [m["tool_call_id"] for m in tail[1:3]] == ["call_mock_a", "call_mock_b"]
    assert tail[3] == sent["messages"][n - 3] and tail[4] == sent["messages"][n - 1]  # images, in order
    assert got[: n - 5] == sent["messages"][: n - 5]
    assert {c.repair for c in result.changes} == {"untangle-tool-run"}


@pytest.mark.parametrize("version", VERSIONS)
def test_droid_without_memory_the_orphan_becomes_a_user_message_and_nothing_is_lost(version: str) -> None:
    sent = fixture_json(f"droid/{version}__two_images__turn2.json")
    got = json.loads(run(fixture_bytes(f"droid/{version}__two_images__turn2.json")).body)["messages"]
    n = len(sent["messages"])
    tail = got[n - 5:]
    assert [m["role"] for m in tail] == ["assistant", "tool", "user", "user", "user"]
    orphan_text = sent["messages"][n - 2]["content"]
    assert "call_mock_b" in tail[3]["content"] and orphan_text in tail[3]["content"]
    assert tail[2] == sent["messages"][n - 3] and tail[4] == sent["messages"][n - 1]


def kimi_ids(raw: bytes) -> bytes:
    """Droid's capture as it is on Kimi, whose ids number the calls of one conversation (every session has them)."""
    return raw.replace(b"call_mock_a", b"functions.Read:0").replace(b"call_mock_b", b"functions.Read:1")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_kimi_id_two_sessions_declared_differently_gives_neither_a_declaration_back(version: str) -> None:
    """Session A's answer declared ``functions.Read:1`` on b.png, session B's on another file: Droid then trims
    either's declaration, and the orphan is turned into a user message as without memory, not given the other's
    call. The same call seen again (A's answer, then A's history in Droid's own JSON) stays known."""
    raw = kimi_ids(fixture_bytes(f"droid/{version}__two_images__turn2.json"))
    store = Recall(SqliteStore(":memory:"))
    a = kimi_ids(fixture_bytes("droid/two_images__turn1_response.sse.txt"))
    learner = StreamLearner("chat", store.remember, upstream="api.moonshot.ai:443/chat")
    learner.feed(a)
    learner.feed(b"")
    store.remember(calls_in_request("chat", json.loads(raw)))  # A's history: the same declarations, re-written
    first = run(raw, "api.moonshot.ai", store)
    got = json.loads(first.body)["messages"]
    assert {c.repair for c in first.changes} == {"untangle-tool-run"}
    assert got[len(got) - 5]["tool_calls"][1]["function"]["arguments"] == B_ARGS  # A gets its own call back
    store.remember([ToolCall("functions.Read:1", "Read", '{"file_path": "/home/bob/secret.png"}', "chat")])
    for _ in range(2):  # B's answer, then A's again: ambiguous for as long as it is seen
        assert store.lookup(["functions.Read:0", "functions.Read:1"]).keys() == {"functions.Read:0"}
        store.remember(calls_in_request("chat", json.loads(raw)))
    sent = json.loads(raw)["messages"]
    got = json.loads(run(raw, "api.moonshot.ai", store).body)["messages"]
    n = len(sent)
    assert [m["role"] for m in got[n - 5:]] == ["assistant", "tool", "user", "user", "user"]  # as without memory
    assert "secret.png" not in json.dumps(got) and "functions.Read:1" in got[n - 2]["content"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("scenario", ["single_image", "text_then_image", "two_images_noimg"])
@pytest.mark.parametrize("turn", [1, 2])
@pytest.mark.parametrize("host", ["api.openai.com", "api.deepseek.com", "gateway.example"])
def test_valid_droid_shapes_pass_untouched(version, scenario, turn, host, memory) -> None:
    result = run(fixture_bytes(f"droid/{version}__{scenario}__turn{turn}.json"), host, memory)
    if host == "api.deepseek.com" and scenario != "two_images_noimg" and turn == 2:
        # DeepSeek takes no image anywhere (its user-message images are a 400): only those are omitted
        assert {c.repair for c in result.changes} == {"omit-unsupported-media"}
    else:
        assert result.status == "untouched"


def test_pi_ai_chat_capture_is_valid_and_untouched() -> None:
    assert run(fixture_bytes("pi-ai/chat_completions.json")).status == "untouched"


def test_untangle_is_idempotent(memory) -> None:
    once = run(fixture_bytes("droid/0.225.2__two_images__turn2.json"), memory=memory)
    assert run(once.body, memory=memory).status == "untouched"


def conv(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "gpt-4.1", "messages": list(messages)}


def asst(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]}


def tool(cid: str, content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def test_three_parallel_images_in_tool_messages_are_hoisted_after_the_run() -> None:
    body = conv({"role": "user", "content": "go"}, asst("a", "b", "c"),
                tool("a", [{"type": "text", "text": "a.png"}, IMG]), tool("b", [IMG]), tool("c", "plain"),
                {"role": "user", "content": "next"})
    result = run(body)
    got = json.loads(result.body)["messages"]
    assert [m["role"] for m in got] == ["user", "assistant", "tool", "tool", "tool", "user", "user"]
    assert got[2]["content"] == [{"type": "text", "text": "a.png"}]
    moved = "[1 image from this tool result attached in the next user message]"
    assert got[3]["content"] == [{"type": "text", "text": moved}]
    assert got[4] == body["messages"][4]
    hoisted = got[5]["content"]
    assert [p["type"] for p in hoisted] == ["text", "image_url", "text", "image_url"]
    assert hoisted[0]["text"].endswith(" a:") and hoisted[2]["text"].endswith(" b:")
    assert got[6] == body["messages"][5]


def test_deepseek_gets_strings_in_tool_messages() -> None:
    body = conv(asst("a", "b"), tool("a", [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]),
                tool("b", [{"type": "text", "text": "b.png"}, IMG]))
    got = json.loads(run(body, host="api.deepseek.com").body)["messages"]
    assert got[1]["content"] == "one\ntwo"
    assert got[2]["content"].startswith("b.png\n[1 image from this tool result omitted")  # DeepSeek takes no images
    assert "image_url" not in json.dumps(got)


def test_text_arrays_are_valid_for_openai_and_left_alone() -> None:
    body = conv(asst("a"), tool("a", [{"type": "text", "text": "one"}]))
    assert run(body).status == "untouched"


def test_user_message_between_assistant_and_its_first_tool_message_moves_after_the_run() -> None:
    body = conv(asst("a"), {"role": "user", "content": "early"}, tool("a"))
    got = json.loads(run(body).body)["messages"]
    assert [m["role"] for m in got] == ["assistant", "tool", "user"]


def test_tool_message_with_no_assistant_before_it_is_kept_as_user_text() -> None:
    body = conv({"role": "user", "content": "hi"}, tool("zz", "result text"))
    got = json.loads(run(body).body)["messages"]
    assert got[1]["role"] == "user" and "zz" in got[1]["content"] and "result text" in got[1]["content"]


def test_assistant_whose_calls_were_all_trimmed_gets_them_back(memory) -> None:
    body = conv({"role": "assistant", "content": "reading"}, tool("call_mock_a"), tool("call_mock_b"))
    got = json.loads(run(body, memory=memory).body)["messages"]
    assert [c["id"] for c in got[0]["tool_calls"]] == ["call_mock_a", "call_mock_b"]
    assert got[0]["content"] == "reading"
