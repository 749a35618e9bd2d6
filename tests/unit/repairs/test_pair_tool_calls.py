"""pair-tool-calls on real captures made broken the way an interruption, a compaction or opencode's id cut does.

Each broken body is first shown to be rejected by the strict rules (tests/upstreams/rules.py, the real
texts), then repaired; the repair must be accepted, keep every text and image the client sent, say
plainly that a missing result was not recorded, and leave valid histories byte-identical.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.memory.recall import Recall
from llmfix.memory.sqlite import SqliteStore
from llmfix.memory.store import ToolCall
from tests.conftest import fixture_bytes, fixture_json
from tests.upstreams.rules import check

PATHS = {CHAT: "/v1/chat/completions", RESPONSES: "/v1/responses", MESSAGES: "/v1/messages"}
HOSTS = {CHAT: "api.openai.com", RESPONSES: "api.openai.com", MESSAGES: "api.anthropic.com"}
RULES = {"api.openai.com": "openai", "api.anthropic.com": "anthropic", "api.deepseek.com": "deepseek",
         "gateway.example": "spec"}
CODEX_CALL = "call_mock883ae17f536f41f8a10f_0"
CC_CALL = "toolu_mock_003_0"
NOT_RECORDED = "No result was recorded for tool call"


def run(dialect: Dialect, body: dict[str, Any] | bytes, host: str | None = None, memory: Any = None
        ) -> engine.Outcome:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    settings = engine.Settings(memory=memory, enabled=frozenset({"pair-tool-calls", "untangle-tool-run"}))
    return engine.process(engine.Request(dialect, host or HOSTS[dialect], 443, raw), settings)


def repaired(dialect: Dialect, body: dict[str, Any], host: str | None = None, memory: Any = None,
             rules: str | None = None) -> tuple[dict[str, Any], engine.Outcome]:
    """Check the body is rejected, repair it, check the repair is accepted, idempotent and names the repair."""
    host = host or HOSTS[dialect]
    rules = rules or RULES[host]
    assert check(rules, PATHS[dialect], body) is not None, "the broken body should be rejected"
    out = run(dialect, body, host, memory)
    assert out.status == "repaired", out.reason
    assert "pair-tool-calls" in out.repairs
    got = json.loads(out.body)
    assert check(rules, PATHS[dialect], got) is None, check(rules, PATHS[dialect], got)
    assert run(dialect, out.body, host, memory).status == "untouched"  # idempotent
    assert run(dialect, body, host, memory).body == out.body  # deterministic
    return got, out


CONTENT_KEYS = frozenset({"text", "content", "output", "url", "image_url", "data", "file_data"})


def strings(value: Any, key: str = "content") -> list[str]:
    """Every text and media string in a JSON value (texts, tool outputs, image URLs, base64 payloads)."""
    if isinstance(value, str):
        return [value] if key in CONTENT_KEYS else []
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings(v, k)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v, key)]
    return []


def assert_nothing_lost(sent: dict[str, Any], got: dict[str, Any], key: str) -> None:
    """Every text, image and result string the client sent reaches the upstream (inside some string)."""
    blob = json.dumps(got[key])
    for s in strings(sent[key]):
        assert json.dumps(s)[1:-1] in blob, s[:80]


def memory_of(*calls: ToolCall) -> Recall:
    m = Recall(SqliteStore(":memory:"))
    m.remember(calls)
    return m


# --- Chat ----------------------------------------------------------------------------------------------------


def test_opencode_mistral_duplicate_ids_become_unique_and_keep_their_format() -> None:
    sent = fixture_json("opencode/chat__mistral-medium-latest__two_png__turn2.json")
    got, out = repaired(CHAT, sent)
    msgs = got["messages"]
    ids = [c["id"] for c in msgs[2]["tool_calls"]]
    assert ids[0] == "callmock0" and ids[1] != "callmock0"
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids)  # Mistral's format, kept
    assert [msgs[3]["tool_call_id"], msgs[4]["tool_call_id"]] == ids  # k-th declaration ↔ k-th result
    assert [c["function"] for c in msgs[2]["tool_calls"]] == [c["function"] for c in sent["messages"][2]["tool_calls"]]
    assert msgs[5:] == sent["messages"][5:] and msgs[:2] == sent["messages"][:2]
    assert any("callmock0" in line and ids[1] in line for line in out.lines)


def test_duplicate_result_for_one_call_is_kept_as_a_user_message_after_the_run() -> None:
    sent = fixture_json("pi-ai/chat_completions.json")
    sent["messages"].insert(4, copy.deepcopy(sent["messages"][3]) | {"content": "second answer"})
    got, _ = repaired(CHAT, sent)
    msgs = got["messages"]
    assert [m["role"] for m in msgs[2:6]] == ["assistant", "tool", "user", "user"]
    assert "call_mock_17" in msgs[4]["content"] and "second answer" in msgs[4]["content"]
    assert_nothing_lost(sent, got, "messages")


@pytest.mark.parametrize("version", ["0.215.0", "0.225.2"])
@pytest.mark.parametrize("host", ["api.openai.com", "api.deepseek.com", "gateway.example"])
def test_droid_interrupted_parallel_call_gets_a_result_in_call_order(version: str, host: str) -> None:
    sent = fixture_json(f"droid/{version}__two_images_noimg__turn2.json")
    del sent["messages"][4]  # call_mock_a's result never written (Esc); call_mock_b's kept
    sent["messages"].append({"role": "user", "content": "go on"})
    got, out = repaired(CHAT, sent, host)
    tail = got["messages"][3:]
    assert [m["role"] for m in tail] == ["assistant", "tool", "tool", "user"]
    assert [m.get("tool_call_id") for m in tail[1:3]] == ["call_mock_a", "call_mock_b"]
    assert NOT_RECORDED in tail[1]["content"] and "Read" in tail[1]["content"]
    assert isinstance(tail[1]["content"], str)
    assert tail[2] == sent["messages"][4]
    assert_nothing_lost(sent, got, "messages")
    assert any("call_mock_a" in line for line in out.lines)


def test_chat_interrupted_single_call_before_the_next_prompt() -> None:
    sent = fixture_json("pi-ai/chat_completions.json")
    del sent["messages"][3:5]  # the tool result and its image message never came
    got, _ = repaired(CHAT, sent)
    assert [m["role"] for m in got["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert got["messages"][3]["tool_call_id"] == "call_mock_17"
    assert "fake" not in got["messages"][3]["content"].lower()


# --- Responses -------------------------------------------------------------------------------------------------


def codex_turn2() -> dict[str, Any]:
    return fixture_json("codex/turn2_request.json")


def test_codex_interrupted_call_gets_an_output_saying_none_was_recorded() -> None:
    sent = codex_turn2()
    call_at = next(i for i, it in enumerate(sent["input"]) if it.get("type") == "function_call")
    del sent["input"][call_at + 1]  # Esc during view_image: no output
    sent["input"].append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]})
    got, _ = repaired(RESPONSES, sent)
    placeholder = got["input"][call_at + 1]
    assert placeholder["type"] == "function_call_output" and placeholder["call_id"] == CODEX_CALL
    assert NOT_RECORDED in placeholder["output"] and "view_image" in placeholder["output"]
    assert got["input"][: call_at + 1] == sent["input"][: call_at + 1]
    assert got["input"][call_at + 2 :] == sent["input"][call_at + 1 :]


def test_parallel_calls_one_output_missing_goes_after_the_run_in_call_order() -> None:
    sent = fixture_json("pi-ai/xai_responses_parallel_tools.json")
    del sent["input"][5]  # call_mock_13_1 unanswered
    got, _ = repaired(RESPONSES, sent)
    assert [(it.get("type"), it.get("call_id")) for it in got["input"][2:6]] == [
        ("function_call", "call_mock_13_0"), ("function_call", "call_mock_13_1"),
        ("function_call_output", "call_mock_13_0"), ("function_call_output", "call_mock_13_1")]
    assert got["input"][6] == sent["input"][5]


def test_codex_orphan_output_gets_its_declaration_back_from_memory() -> None:
    sent = codex_turn2()
    call_at = next(i for i, it in enumerate(sent["input"]) if it.get("type") == "function_call")
    call = sent["input"].pop(call_at)  # compaction cut the call away
    memory = memory_of(ToolCall(CODEX_CALL, call["name"], call["arguments"], "responses"))
    got, _ = repaired(RESPONSES, sent, memory=memory)
    restored = got["input"][call_at]
    assert {k: restored[k] for k in ("type", "call_id", "name", "arguments")} == {
        k: call[k] for k in ("type", "call_id", "name", "arguments")}
    assert got["input"][call_at + 1] == sent["input"][call_at]  # the output, image and all, untouched


def test_codex_orphan_output_without_memory_becomes_a_user_message_naming_the_call() -> None:
    sent = codex_turn2()
    call_at = next(i for i, it in enumerate(sent["input"]) if it.get("type") == "function_call")
    del sent["input"][call_at]
    got, _ = repaired(RESPONSES, sent)
    user = got["input"][call_at]
    assert user["role"] == "user" and CODEX_CALL in user["content"][0]["text"]
    assert user["content"][1:] == sent["input"][call_at]["output"]  # the image, as sent
    assert_nothing_lost(sent, got, "input")


def test_empty_call_ids_get_one_new_id_for_call_and_output() -> None:
    sent = fixture_json("pi-ai/openai_responses.json")
    for it in sent["input"]:
        if "call_id" in it:
            it["call_id"] = ""
    got, _ = repaired(RESPONSES, sent)
    ids = {it["call_id"] for it in got["input"] if "call_id" in it}
    assert len(ids) == 1 and re.fullmatch(r"call_[A-Za-z0-9]{24}", ids.pop())


def test_duplicate_parallel_call_ids_pair_kth_with_kth() -> None:
    sent = fixture_json("pi-ai/xai_responses_parallel_tools.json")
    sent["input"][3]["call_id"] = sent["input"][5]["call_id"] = "call_mock_13_0"
    got, _ = repaired(RESPONSES, sent, host="api.openai.com")
    second = got["input"][3]["call_id"]
    assert second != "call_mock_13_0" and len(second) == len("call_mock_13_0")
    assert got["input"][5]["call_id"] == second and got["input"][4]["call_id"] == "call_mock_13_0"


def test_previous_response_id_and_item_reference_stay_byte_identical() -> None:
    sent = codex_turn2()
    call_at = next(i for i, it in enumerate(sent["input"]) if it.get("type") == "function_call")
    stateful = copy.deepcopy(sent)
    del stateful["input"][call_at]
    stateful["previous_response_id"] = "resp_mock_1"
    assert check("openai", PATHS[RESPONSES], stateful) is None
    raw = json.dumps(stateful).encode()
    assert run(RESPONSES, raw).status == "untouched"
    referenced = copy.deepcopy(sent)
    referenced["input"][call_at] = {"type": "item_reference", "id": "fc_mock883ae17f536f41f8a10f_0"}
    assert run(RESPONSES, json.dumps(referenced).encode()).status == "untouched"


# --- Anthropic ----------------------------------------------------------------------------------------------------


def cc_turn2() -> dict[str, Any]:
    return fixture_json("claude-code/single_png__turn2.json")


def test_claude_code_esc_during_the_tool_then_a_new_prompt() -> None:
    sent = cc_turn2()
    sent["messages"][3] = {"role": "user", "content": [{"type": "text", "text": "never mind, what now?"}]}
    got, _ = repaired(MESSAGES, sent)
    user = got["messages"][3]["content"]
    assert user[0]["type"] == "tool_result" and user[0]["tool_use_id"] == CC_CALL and user[0]["is_error"] is True
    assert NOT_RECORDED in user[0]["content"] and "Read" in user[0]["content"]
    assert user[1:] == sent["messages"][3]["content"]
    assert got["messages"][:3] == sent["messages"][:3]


def test_claude_code_string_prompt_after_an_interrupted_call() -> None:
    sent = cc_turn2()
    sent["messages"][3] = {"role": "user", "content": "and now?"}
    got, _ = repaired(MESSAGES, sent)
    assert [b["type"] for b in got["messages"][3]["content"]] == ["tool_result", "text"]
    assert got["messages"][3]["content"][1]["text"] == "and now?"


def test_interrupted_call_as_the_last_message_gets_a_new_user_message() -> None:
    sent = cc_turn2()
    del sent["messages"][3]
    got, out = repaired(MESSAGES, sent)
    assert got["messages"][3]["role"] == "user"
    assert [b["tool_use_id"] for b in got["messages"][3]["content"]] == [CC_CALL]
    assert any("new user message" in line for line in out.lines)


def test_parallel_calls_one_result_missing_is_added_in_call_order() -> None:
    sent = cc_turn2()
    second = {"type": "tool_use", "id": "toolu_mock_003_1", "name": "Read", "input": {"file_path": "/b.png"}}
    sent["messages"][2]["content"].insert(0, second)
    got, _ = repaired(MESSAGES, sent)
    results = got["messages"][3]["content"]
    assert [b["tool_use_id"] for b in results] == ["toolu_mock_003_1", CC_CALL]
    assert results[1] == sent["messages"][3]["content"][0]  # the real result untouched


def test_text_before_tool_result_is_moved_after_it() -> None:
    sent = cc_turn2()
    note = {"type": "text", "text": "Here is the file."}
    sent["messages"][3]["content"].insert(0, note)
    got, _ = repaired(MESSAGES, sent)
    assert got["messages"][3]["content"] == [sent["messages"][3]["content"][1], note]


def test_results_split_over_two_user_messages_are_joined_in_the_next_one() -> None:
    sent = fixture_json("pi-ai/anthropic_messages.json")
    second = {"type": "tool_use", "id": "toolu_mock_22", "name": "read", "input": {"path": "/b.png"}}
    sent["messages"][1]["content"].append(second)
    late = {"type": "tool_result", "tool_use_id": "toolu_mock_22", "content": "b read"}
    sent["messages"][3]["content"].insert(0, late)
    sent["messages"].insert(3, {"role": "assistant", "content": [{"type": "text", "text": "One moment."}]})
    got, _ = repaired(MESSAGES, sent)
    assert [b.get("tool_use_id") for b in got["messages"][2]["content"]] == ["toolu_mock_21", "toolu_mock_22"]
    assert got["messages"][4]["content"] == sent["messages"][4]["content"][1:]
    assert_nothing_lost(sent, got, "messages")


def test_orphan_result_gets_its_tool_use_back_from_memory() -> None:
    sent = cc_turn2()
    use = sent["messages"][2]["content"][0]
    sent["messages"][2]["content"] = [{"type": "text", "text": "Let me look."}]
    memory = memory_of(ToolCall(CC_CALL, "Read", json.dumps(use["input"]), "messages"))
    got, _ = repaired(MESSAGES, sent, memory=memory)
    assert got["messages"][2]["content"] == [{"type": "text", "text": "Let me look."}, use]
    assert got["messages"][3] == sent["messages"][3]


def test_orphan_result_without_memory_is_kept_as_text_and_image_naming_the_call() -> None:
    sent = cc_turn2()
    sent["messages"][2]["content"] = [{"type": "text", "text": "Let me look."}]
    got, _ = repaired(MESSAGES, sent)
    blocks = got["messages"][3]["content"]
    assert blocks[0]["type"] == "text" and CC_CALL in blocks[0]["text"]
    assert blocks[1:] == sent["messages"][3]["content"][0]["content"]  # the image, as sent
    assert_nothing_lost(sent, got, "messages")


def test_duplicate_tool_use_ids_across_turns_are_renamed_with_their_result() -> None:
    sent = fixture_json("pi-ai/anthropic_messages.json")
    again = [copy.deepcopy(sent["messages"][1]), copy.deepcopy(sent["messages"][2])]
    sent["messages"][3:3] = again  # a model reusing its id in a later turn
    got, _ = repaired(MESSAGES, sent)
    first, second = got["messages"][1]["content"][0]["id"], got["messages"][3]["content"][0]["id"]
    assert first == "toolu_mock_21" and second != first and len(second) == len(first)
    assert got["messages"][4]["content"][0]["tool_use_id"] == second


def test_server_tool_blocks_and_valid_captures_are_untouched() -> None:
    server = {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "png"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": []},
        {"type": "text", "text": "Found it."}]}
    body = fixture_json("pi-ai/anthropic_messages.json")
    body["messages"].insert(1, server)
    body["messages"].insert(2, {"role": "user", "content": "thanks"})
    assert run(MESSAGES, json.dumps(body).encode()).status == "untouched"


VALID = [
    (CHAT, "opencode/chat__mistral-medium-latest__two_png__turn2.json", False),
    (CHAT, "pi-ai/chat_completions.json", True),
    *[(CHAT, f"droid/{v}__{s}__turn{t}.json", True) for v in ("0.215.0", "0.225.2")
      for s in ("single_image", "text_then_image", "two_images_noimg") for t in (1, 2)],
    (RESPONSES, "codex/turn1_request.json", True),
    (RESPONSES, "codex/turn2_request.json", True),
    (RESPONSES, "pi-ai/openai_responses.json", True),
    (RESPONSES, "pi-ai/xai_responses_parallel_tools.json", True),
    (MESSAGES, "claude-code/single_png__turn2.json", True),
    (MESSAGES, "pi-ai/anthropic_messages.json", True),
]


@pytest.mark.parametrize(("dialect", "name", "valid"), [v for v in VALID if v[2]])
def test_valid_captures_pass_byte_identical(dialect: Dialect, name: str, valid: bool) -> None:
    memory = memory_of(ToolCall(CODEX_CALL, "view_image", "{}", "responses"),
                       ToolCall(CC_CALL, "Read", "{}", "messages"))
    assert run(dialect, fixture_bytes(name), memory=memory).status == "untouched"


def test_history_cut_before_the_call_keeps_the_result_as_text_even_with_memory() -> None:
    sent = cc_turn2()
    sent["messages"] = sent["messages"][3:]  # compaction kept only the user message with the tool_result
    memory = memory_of(ToolCall(CC_CALL, "Read", "{}", "messages"))  # nothing before it could declare it
    got, _ = repaired(MESSAGES, sent, memory=memory)
    assert [b["type"] for b in got["messages"][0]["content"]] == ["text", "image"]
    assert CC_CALL in got["messages"][0]["content"][0]["text"]


def test_conversation_state_on_the_server_leaves_orphan_outputs_alone() -> None:
    sent = codex_turn2()
    del sent["input"][next(i for i, it in enumerate(sent["input"]) if it.get("type") == "function_call")]
    sent["conversation"] = "conv_mock_1"
    assert run(RESPONSES, json.dumps(sent).encode()).status == "untouched"


@pytest.mark.parametrize(("old", "pattern"), [
    ("callmock0", r"[A-Za-z0-9]{9}"),
    ("call_mock_13_0", r"call_mock_13_[A-Za-z0-9]"),
    ("toolu_01", r"toolu_[A-Za-z0-9]{2}"),
    ("", r"call_[A-Za-z0-9]{24}"),
])
def test_fresh_ids_keep_the_format_and_are_deterministic(old: str, pattern: str) -> None:
    from llmfix.wire.toolpairs import fresh_id

    taken = {old}
    new = fresh_id(old, 1, taken, CHAT.tools.FRESH_PREFIX)
    assert re.fullmatch(pattern, new) and new != old and len(new) == (len(old) or len(new))
    assert fresh_id(old, 1, {old}, CHAT.tools.FRESH_PREFIX) == new  # the same on every turn
    assert fresh_id(old, 1, {old, new}, CHAT.tools.FRESH_PREFIX) != new  # never one already in the request
    assert fresh_id("", 0, set(), MESSAGES.tools.FRESH_PREFIX).startswith("toolu_")


def test_change_lines_name_the_call_ids() -> None:
    sent = fixture_json("pi-ai/xai_responses_parallel_tools.json")
    del sent["input"][4:6]
    _, out = repaired(RESPONSES, sent)
    assert any("call_mock_13_0" in line and "call_mock_13_1" in line for line in out.lines)
    assert all("iVBOR" not in line for line in out.lines)


def test_a_system_message_between_tool_use_and_its_result_moves_the_result_not_invents_one() -> None:
    sent = cc_turn2()
    sent["messages"].insert(3, {"role": "system", "content": "<system-reminder>files changed</system-reminder>"})
    got, _ = repaired(MESSAGES, sent)
    assert [m["role"] for m in got["messages"][2:]] == ["assistant", "user", "system"]
    assert got["messages"][3]["content"] == sent["messages"][4]["content"]  # the real result, no placeholder
    assert NOT_RECORDED not in json.dumps(got)
