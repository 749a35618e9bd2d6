"""hoist-tool-media on Responses: xAI wants string tool outputs; images go to one user message after the run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.registry import RESPONSES
from tests.conftest import fixture_bytes, fixture_json
from tests.images import png_url

PNG_A = png_url(1)
PNG_B = png_url(2)
PNG_C = png_url(3)


def run(body: dict[str, Any] | bytes, host: str = "api.x.ai") -> engine.Outcome:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return engine.process(engine.Request(RESPONSES, host, 443, raw), engine.Settings())


def out_body(outcome: engine.Outcome) -> dict[str, Any]:
    assert outcome.status == "repaired", outcome
    return json.loads(outcome.body)


def img(url: str, detail: str = "auto") -> dict[str, Any]:
    return {"type": "input_image", "detail": detail, "image_url": url}


def call(cid: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": "read", "arguments": "{}"}


def output(cid: str, parts: Any, kind: str = "function_call_output") -> dict[str, Any]:
    return {"type": kind, "call_id": cid, "output": parts}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "input_text", "text": text}]}


def images_in(message: dict[str, Any]) -> list[str]:
    return [p["image_url"] for p in message["content"] if p["type"] == "input_image"]


def test_pi_ai_text_and_image_output_becomes_text_plus_one_user_message() -> None:
    sent = fixture_json("pi-ai/xai_responses.json")
    got = out_body(run(fixture_bytes("pi-ai/xai_responses.json")))
    fco = sent["input"][3]
    assert got["input"][3] == {**fco, "output": fco["output"][0]["text"]}
    hoisted = got["input"][4]
    assert hoisted["role"] == "user" and hoisted["type"] == "message"
    assert hoisted["content"][0] == {"type": "input_text", "text": "Attached from tool result call_mock_1:"}
    assert hoisted["content"][1] == fco["output"][1]  # the image part, exactly as sent (detail kept)
    assert got["input"][5] == sent["input"][4]  # the user's next question still comes after
    assert len(got["input"]) == len(sent["input"]) + 1
    assert {k: v for k, v in got.items() if k != "input"} == {k: v for k, v in sent.items() if k != "input"}


def test_pi_ai_image_only_output_gets_a_placeholder_saying_where_the_image_went() -> None:
    sent = fixture_json("pi-ai/xai_responses_image_only.json")
    got = out_body(run(fixture_bytes("pi-ai/xai_responses_image_only.json")))
    assert got["input"][3]["output"] == "[1 image from this tool result attached in the next user message]"
    assert images_in(got["input"][4]) == [sent["input"][3]["output"][0]["image_url"]]


def test_pi_ai_parallel_outputs_share_one_message_after_the_run_in_call_order() -> None:
    sent = fixture_json("pi-ai/xai_responses_parallel_tools.json")
    got = out_body(run(fixture_bytes("pi-ai/xai_responses_parallel_tools.json")))
    assert [i.get("type") for i in got["input"][2:7]] == [
        "function_call", "function_call", "function_call_output", "function_call_output", "message"]
    assert all(isinstance(i["output"], str) for i in got["input"][4:6])
    labels = [p["text"] for p in got["input"][6]["content"] if p["type"] == "input_text"]
    assert labels == ["Attached from tool result call_mock_13_0:", "Attached from tool result call_mock_13_1:"]
    assert images_in(got["input"][6]) == [sent["input"][4]["output"][1]["image_url"],
                                          sent["input"][5]["output"][1]["image_url"]]
    assert sum(1 for i in got["input"] if i.get("role") == "user") == 3


@pytest.mark.parametrize("name", ["xai_responses.json", "xai_responses_image_only.json",
                                  "xai_responses_parallel_tools.json", "openai_responses.json"])
def test_openai_upstream_takes_arrays_so_nothing_changes(name: str) -> None:
    assert run(fixture_bytes(f"pi-ai/{name}"), host="api.openai.com").status == "untouched"


@pytest.mark.parametrize("name", ["xai_responses.json", "xai_responses_image_only.json",
                                  "xai_responses_parallel_tools.json"])
def test_repair_is_idempotent(name: str) -> None:
    once = run(fixture_bytes(f"pi-ai/{name}"))
    assert run(once.body).status == "untouched"


def test_three_images_and_a_pdf_in_one_output_all_move_in_order() -> None:
    pdf = {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64," + "P" * 80}
    body = {"model": "grok-4.3", "input": [user("go"), call("c1"),
                                           output("c1", [img(PNG_A), {"type": "input_text", "text": "t"},
                                                         img(PNG_B), pdf, img(PNG_C)])]}
    got = out_body(run(body))
    assert got["input"][2]["output"] == "t"
    msg = got["input"][3]
    assert [p["type"] for p in msg["content"]] == ["input_text", "input_image", "input_image", "input_file",
                                                   "input_image"]
    assert images_in(msg) == [PNG_A, PNG_B, PNG_C]


def test_separate_runs_get_separate_messages_each_right_after_its_run() -> None:
    body = {"model": "grok-4.3", "input": [
        user("one"), call("a"), output("a", [img(PNG_A)]),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        user("two"), call("b"), output("b", [img(PNG_B)]), user("three")]}
    got = out_body(run(body))["input"]
    assert [i.get("role") or i["type"] for i in got] == [
        "user", "function_call", "function_call_output", "user", "assistant", "user", "function_call",
        "function_call_output", "user", "user"]
    assert images_in(got[3]) == [PNG_A]
    assert images_in(got[8]) == [PNG_B]


def test_string_outputs_in_the_run_are_left_alone() -> None:
    body = {"model": "grok-4.3", "input": [call("a"), call("b"), output("a", "plain"), output("b", [img(PNG_B)])]}
    result = run(body)
    got = out_body(result)["input"]
    assert got[2] == body["input"][2]
    assert got[4]["role"] == "user" and images_in(got[4]) == [PNG_B]
    assert [c.location for c in result.changes] == ["input[3].output", "input[3]+1"]


def test_custom_tool_call_outputs_are_hoisted_too() -> None:
    patch = {"type": "custom_tool_call", "call_id": "p", "name": "apply_patch", "input": "*** Begin Patch"}
    body = {"model": "grok-4.3", "input": [patch, output("p", [{"type": "input_text", "text": "done"}, img(PNG_A)],
                                                         kind="custom_tool_call_output")]}
    got = out_body(run(body))["input"]
    assert got[1]["output"] == "done" and images_in(got[2]) == [PNG_A]


def test_text_only_model_gets_a_visible_placeholder_and_the_log_records_the_drop() -> None:
    body = {"model": "grok-3-mini", "input": [call("a"), output("a", [{"type": "input_text", "text": "x.png"},
                                                                      img(PNG_A)])]}
    result = run(body)
    got = out_body(result)["input"]
    assert len(got) == 2  # no image message for a model that cannot see it
    assert got[1]["output"] == (
        "x.png\n[1 image from this tool result omitted: model grok-3-mini does not take image input]"
    )
    assert result.changes[0].dropped and "does not take image input" in result.changes[0].dropped[0]
    assert "AAAA" not in result.changes[0].dropped[0]


def test_file_id_only_image_cannot_go_to_xai_and_is_reported_not_silently_dropped() -> None:
    body = {"model": "grok-4.3", "input": [call("a"), output("a", [{"type": "input_image", "file_id": "file-9"},
                                                                   img(PNG_B)])]}
    result = run(body)
    got = out_body(result)["input"]
    assert images_in(got[2]) == [PNG_B]
    assert "needs image_url" in got[1]["output"]
    assert any("file_id" in d for d in result.changes[0].dropped)


def test_unknown_model_is_assumed_to_take_images() -> None:
    body = {"model": "grok-99-next", "input": [call("a"), output("a", [img(PNG_A)])]}
    got = out_body(run(body))["input"]
    assert images_in(got[2]) == [PNG_A]


def test_repaired_prefix_is_stable_when_the_conversation_grows() -> None:
    turn1 = {"model": "grok-4.3", "input": [user("go"), call("a"), output("a", [img(PNG_A)])]}
    turn2 = {"model": "grok-4.3", "input": [*turn1["input"],
                                            {"type": "message", "role": "assistant",
                                             "content": [{"type": "output_text", "text": "red"}]},
                                            user("and now?"), call("b"), output("b", [img(PNG_B)])]}
    first = out_body(run(turn1))["input"]
    second = out_body(run(turn2))["input"]
    assert second[: len(first)] == first


def test_change_log_carries_no_base64() -> None:
    result = run(fixture_bytes("pi-ai/xai_responses.json"))
    text = json.dumps([c.record() for c in result.changes]) + "\n".join(c.line() for c in result.changes)
    assert "iVBOR" not in text and "base64," not in text
    assert "<image/png" in text
