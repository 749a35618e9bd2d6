"""fold-system-messages on Claude Code's capture and on hand-made shapes, through `engine.process`."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.registry import MESSAGES
from llmfix.repairs.fold_system_messages import wrap
from tests.conftest import fixture_bytes, fixture_json
from tests.images import png_b64
from tests.upstreams.rules import check

CC = "claude-code/single_png__turn2.json"
SONNET = "claude-code/sonnet45__single_png__turn2.json"
FOLDING_HOSTS = ["api.deepseek.com", "open.bigmodel.cn", "api.z.ai", "dashscope-intl.aliyuncs.com",
                 "api.minimax.io", "api.moonshot.ai"]
IMG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png_b64(0)}}


def run(raw: bytes | dict, host: str = "api.deepseek.com") -> engine.Outcome:
    data = raw if isinstance(raw, bytes) else json.dumps(raw).encode()
    return engine.process(engine.Request(MESSAGES, host, 443, data), engine.Settings())


def sent(body: dict[str, Any], host: str = "api.deepseek.com") -> dict[str, Any]:
    """What reaches the upstream: the repaired body, or the body itself when nothing changed."""
    out = run(body, host)
    assert out.status != "failed", out.reason
    return json.loads(out.body) if out.body is not None else body


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "claude-opus-5-5", "max_tokens": 100, "messages": list(messages)}


def user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(content) if len(content) != 1 or not isinstance(content[0], str)
            else content[0]}


def text(t: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **extra}


def system(content: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "system", "content": content, **extra}


def assistant(*content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


def tool_use(i: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": i, "name": "Read", "input": {"file_path": f"/p/{i}.png"}}


def tool_result(i: str, *content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": i, "content": list(content)}


def r(t: str) -> dict[str, Any]:
    return text(f"<system-reminder>\n{t}\n</system-reminder>")


def markers(data: Any) -> int:
    return json.dumps(data).count('"cache_control"')


# --------------------------------------------------------------------------- the capture


@pytest.mark.parametrize("host", FOLDING_HOSTS)
def test_claude_code_capture_is_folded_into_the_user_message_before_it(host: str) -> None:
    original = fixture_json(CC)
    out = run(fixture_bytes(CC), host)
    got = json.loads(out.body)
    msgs = got["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    # the first user message keeps its blocks, then gets the system text, whole and wrapped
    assert msgs[0]["content"][:-1] == original["messages"][0]["content"]
    assert msgs[0]["content"][-1] == r(original["messages"][1]["content"])
    assert msgs[1:] == original["messages"][2:]  # the tool_use and the image tool_result untouched
    assert {k: v for k, v in got.items() if k != "messages"} == {
        k: v for k, v in original.items() if k != "messages"}  # top level (output_config too) untouched
    assert markers(got) == markers(original) <= 4
    assert check("anthropic", "/v1/messages", got) is None
    [change] = out.changes
    assert change.repair == "fold-system-messages" and change.location == "messages[1]"
    assert "output_config dropped" in change.summary
    assert out.lines == (
        "fold-system-messages: messages[1]: system message (9198 chars) → 1 <system-reminder> block(s) at the "
        "end of messages[0]; its output_config dropped (no place for it outside a system message)",)


@pytest.mark.parametrize("host", ["api.anthropic.com", "gateway.example.com", "127.0.0.1"])
def test_upstreams_that_take_system_messages_get_the_capture_byte_identical(host: str) -> None:
    out = run(fixture_bytes(CC), host)
    assert out.status == "untouched" and out.body is None


@pytest.mark.parametrize("host", [*FOLDING_HOSTS, "api.anthropic.com"])
def test_sonnet45_capture_without_system_messages_is_untouched_everywhere(host: str) -> None:
    out = run(fixture_bytes(SONNET), host)
    assert out.status == "untouched" and out.body is None


def test_the_fold_gives_the_shape_claude_code_itself_sends_without_the_feature() -> None:
    """sonnet45: the same environment text, as a <system-reminder> text block in the first user message."""
    folded = json.loads(run(fixture_bytes(CC)).body)["messages"][0]["content"][-1]["text"]
    own = [b["text"] for b in fixture_json(SONNET)["messages"][0]["content"]]
    assert folded.startswith("<system-reminder>\n# Environment\n") and folded.endswith("\n</system-reminder>")
    assert any(t.startswith("<system-reminder>\n# Environment\n") for t in own)


# --------------------------------------------------------------------------- positions


def test_system_message_first_goes_to_the_start_of_the_next_user_message() -> None:
    got = sent(body(system("be brief"), user("hi"), assistant(text("ok"))))
    assert got["messages"] == [user(r("be brief"), text("hi")), assistant(text("ok"))]


def test_system_message_first_before_an_assistant_becomes_a_user_message() -> None:
    got = sent(body(system("be brief"), assistant(text("ok")), user("go on")))
    assert got["messages"] == [{"role": "user", "content": [r("be brief")]}, assistant(text("ok")), user("go on")]


def test_system_message_between_user_and_assistant_goes_to_the_end_of_the_user_message() -> None:
    got = sent(body(user(text("a"), text("b")), system("env"), assistant(text("ok")), user("next")))
    assert got["messages"] == [user(text("a"), text("b"), r("env")), assistant(text("ok")), user("next")]


def test_after_a_tool_result_message_the_results_stay_first() -> None:
    got = sent(body(user("read it"), assistant(tool_use("t1"), tool_use("t2")),
                    user(tool_result("t1", IMG), tool_result("t2", text("x"))), system("reminder")))
    last = got["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert last[2] == r("reminder") and last[0]["content"] == [IMG]
    assert check("anthropic", "/v1/messages", got) is None


def test_between_a_tool_use_and_its_result_the_text_goes_after_the_results() -> None:
    got = sent(body(user("read it"), assistant(tool_use("t1")), system("late"),
                    user(tool_result("t1", text("x")), text("and?"))))
    assert got["messages"][-1]["content"] == [tool_result("t1", text("x")), r("late"), text("and?")]
    assert check("anthropic", "/v1/messages", got) is None


def test_several_in_a_row_keep_their_order() -> None:
    got = sent(body(user("hi"), system("one"), system([text("two"), text("three")]), system("four"),
                    assistant(text("ok"))))
    assert got["messages"][0]["content"] == [text("hi"), r("one"), r("two"), r("three"), r("four")]
    assert len(got["messages"]) == 2


def test_several_runs_each_go_to_their_own_neighbour() -> None:
    got = sent(body(system("s0"), user("u1"), system("s1"), assistant(text("a1")), user("u2"), system("s2")))
    assert got["messages"] == [user(r("s0"), text("u1"), r("s1")), assistant(text("a1")), user(text("u2"), r("s2"))]


def test_string_and_block_content_and_cache_control_kept() -> None:
    cc = {"type": "ephemeral"}
    original = body(user(text("hi", cache_control=cc)),
                    system([text("cached", cache_control=cc), text("plain")]), system("str"),
                    assistant(text("ok")))
    got = sent(original)
    assert got["messages"][0]["content"] == [
        text("hi", cache_control=cc), {**r("cached"), "cache_control": cc}, r("plain"), r("str")]
    assert markers(got) == markers(original) == 2


def test_never_more_than_four_markers_when_the_client_sends_four() -> None:
    cc = {"type": "ephemeral"}
    original = {**body(user(text("a", cache_control=cc)), system([text("s", cache_control=cc)]),
                       assistant(text("b", cache_control=cc)), user(text("c", cache_control=cc))),
                "system": [text("top")]}
    got = sent(original)
    assert markers(got) == 4


def test_output_config_of_an_empty_directive_message_is_dropped_and_logged() -> None:
    original = body(user("hi"), system([], output_config={"effort": "high"}), assistant(text("ok")))
    out = run(original)
    assert json.loads(out.body)["messages"] == [user("hi"), assistant(text("ok"))]
    [change] = out.changes
    assert change.location == "messages[1]" and "output_config dropped" in change.summary
    assert change.before == {"role": "system", "content": [], "output_config": {"effort": "high"}}
    assert change.record()["before"]["output_config"] == {"effort": "high"}


def test_already_wrapped_text_is_not_wrapped_twice() -> None:
    got = sent(body(user("hi"), system("<system-reminder>\nx\n</system-reminder>")))
    assert got["messages"][0]["content"][-1] == r("x")


def test_non_text_blocks_in_a_system_message_are_not_lost() -> None:
    got = sent(body(user("hi"), system([text("look"), IMG])))
    assert got["messages"][0]["content"] == [text("hi"), r("look"), IMG]


def test_untouched_messages_keep_their_exact_json() -> None:
    """Key order and unknown fields of every message the fold does not touch come back as sent."""
    weird = {"content": [{"text": "ok", "type": "text", "x-extra": 1}], "role": "assistant", "id": "m1"}
    raw = json.dumps(body(user("hi"), system("s"), weird)).encode()
    out = run(raw)
    assert b'{"content":[{"text":"ok","type":"text","x-extra":1}],"role":"assistant","id":"m1"}' in out.body


# --------------------------------------------------------------------------- promises


CASES = [
    body(system("s0"), user("u1"), system("s1"), assistant(text("a1")), user("u2"), system("s2")),
    fixture_json(CC),
    body(user("read"), assistant(tool_use("t1")), system("mid"), user(tool_result("t1", IMG)), system("end")),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_idempotent(case: int) -> None:
    once = sent(CASES[case])
    again = run(once)
    assert again.status == "untouched"


def test_after_an_assistant_text_turn_a_new_user_message_even_when_a_user_message_follows() -> None:
    """Folding into the next user message would move the text when the next turn adds that message."""
    alone = sent(body(user("u1"), assistant(text("a1")), system("s")))["messages"]
    later = sent(body(user("u1"), assistant(text("a1")), system("s"), user("u2")))["messages"]
    assert alone == [user("u1"), assistant(text("a1")), {"role": "user", "content": [r("s")]}]
    assert later == [*alone, user("u2")]


def test_prefix_stable_turn_after_turn() -> None:
    """Turn N's repaired messages are a byte-exact prefix of turn N+1's (prompt caches keep working)."""
    turns = [
        [user("u1"), system("s1")],
        [user("u1"), system("s1"), assistant(tool_use("t1")), user(tool_result("t1", IMG)), system("s2")],
        [user("u1"), system("s1"), assistant(tool_use("t1")), user(tool_result("t1", IMG)), system("s2"),
         assistant(text("a2")), user("u3"), system("s3")],
    ]
    done = [json.dumps(sent(body(*t))["messages"])[:-1] for t in turns]
    for a, b in itertools.pairwise(done):
        assert b.startswith(a)


def test_report_mode_leaves_the_body_alone() -> None:
    out = engine.process(engine.Request(MESSAGES, "api.deepseek.com", 443, fixture_bytes(CC)),
                         engine.Settings(mode="report"))
    assert [c.repair for c in out.changes] == ["fold-system-messages"]


def test_wrap() -> None:
    assert wrap("a") == "<system-reminder>\na\n</system-reminder>"
    assert wrap(" <system-reminder>a</system-reminder> ") == " <system-reminder>a</system-reminder> "
