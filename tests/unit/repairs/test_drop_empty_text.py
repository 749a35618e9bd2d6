"""drop-empty-text on Claude Code's capture and on the shapes an interrupted stream or a resume leaves, through
`engine.process`; every result held to the strict Anthropic mock's rules."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.registry import CHAT, MESSAGES
from tests.conftest import fixture_bytes, fixture_json
from tests.upstreams.rules import check

CC = "claude-code/single_png__turn2.json"
SONNET = "claude-code/sonnet45__single_png__turn2.json"
ANTHROPIC = "api.anthropic.com"
CACHE = {"type": "ephemeral"}


def run(body: dict[str, Any] | bytes, host: str = ANTHROPIC) -> engine.Outcome:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return engine.process(engine.Request(MESSAGES, host, 443, raw), engine.Settings())


def sent(body: dict[str, Any], host: str = ANTHROPIC) -> dict[str, Any]:
    out = run(body, host)
    assert out.status != "failed", out.reason
    return json.loads(out.body) if out.body is not None else body


def conv(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "claude-opus-5-5", "max_tokens": 100, "messages": list(messages)}


def text(t: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **extra}


def use(i: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": i, "name": "Read", "input": {"file_path": f"/p/{i}"}, **extra}


def result(i: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": i, "content": "ok"}


def thinking(t: str = "hmm") -> dict[str, Any]:
    return {"type": "thinking", "thinking": t, "signature": "EuYBCkQYAiJA" + "x" * 40}


def user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content[0] if len(content) == 1 and isinstance(content[0], str)
            else list(content)}


def assistant(*content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


def rejected(body: dict[str, Any]) -> str | None:
    """The strict Anthropic mock's text for ``body`` (None: accepted)."""
    rejection = check("anthropic", "/v1/messages", body)
    return None if rejection is None else rejection.message


@pytest.mark.parametrize("name", [CC, SONNET])
@pytest.mark.parametrize("host", [ANTHROPIC, "api.deepseek.com", "relay.claude-like.test"])
def test_claude_codes_valid_captures_are_not_touched_by_it(name: str, host: str) -> None:
    out = run(fixture_bytes(name), host)
    assert "drop-empty-text" not in out.repairs


def test_claude_code_resumed_with_an_empty_text_block_next_to_its_tool_use() -> None:
    body = fixture_json(CC)
    broken = copy.deepcopy(body)
    broken["messages"][2]["content"].insert(0, text(""))  # what an interrupted stream leaves
    assert rejected(broken) == "messages: text content blocks must be non-empty"
    out = run(broken)
    assert out.repairs == ["drop-empty-text"]
    assert out.lines == ("drop-empty-text: messages[2].content[0]: empty text block dropped",)
    assert json.loads(out.body) == body
    assert rejected(json.loads(out.body)) is None


def test_whitespace_only_blocks_and_their_cache_marker() -> None:
    body = conv(user("hi"), assistant(text("Let me look."), text(" \n", cache_control=CACHE), use("t1")),
                user(result("t1")))
    assert rejected(body) == "messages.1.content.1.text: cache_control cannot be set for empty text blocks"
    out = run(body)
    assert json.loads(out.body)["messages"][1]["content"] == [text("Let me look.", cache_control=CACHE), use("t1")]
    assert out.lines == ("drop-empty-text: messages[1].content[1]: whitespace-only (2 chars) text block dropped; "
                         "its cache_control moved to content[0]",)
    assert rejected(json.loads(out.body)) is None


def test_a_marker_moves_after_when_nothing_before_takes_it_and_never_onto_thinking() -> None:
    got = sent(conv(user("hi"), assistant(thinking(), text("", cache_control=CACHE), use("t1")), user(result("t1")),
                    assistant(text("done"))))
    assert got["messages"][1]["content"] == [thinking(), use("t1", cache_control=CACHE)]


def test_a_neighbour_with_its_own_marker_keeps_it_and_none_is_added() -> None:
    one_hour = {"type": "ephemeral", "ttl": "1h"}
    got = sent(conv(user(text("a", cache_control=one_hour), text("", cache_control=CACHE)), assistant(text("b"))))
    assert got["messages"][0]["content"] == [text("a", cache_control=one_hour)]
    assert json.dumps(got).count("cache_control") == 1


def test_an_empty_assistant_turn_after_an_interrupted_stream_is_dropped() -> None:
    body = conv(user("hi"), assistant(text("")), user("are you there?"))
    assert rejected(body) == "messages: text content blocks must be non-empty"
    out = run(body)
    assert json.loads(out.body)["messages"] == [user("hi"), user("are you there?")]
    assert out.lines == ("drop-empty-text: messages[1]: assistant message dropped: it held only blank text (Anthropic "
                         "refuses an empty message that is not the last one)",)
    for empty in ([], "", "  "):
        body = conv(user("hi"), {"role": "assistant", "content": empty}, user("again"))
        assert sent(body)["messages"] == [user("hi"), user("again")], empty


def test_an_empty_turn_between_a_tool_use_and_its_results_no_longer_splits_them() -> None:
    """goose after Ctrl-C: the streamed turn was cut; dropping it puts the results right after their call."""
    body = conv(user("read it"), assistant(use("t1")), assistant(), user(result("t1")))
    got = sent(body)
    assert got["messages"] == [user("read it"), assistant(use("t1")), user(result("t1"))]
    assert rejected(got) is None


def test_the_last_message_is_never_dropped() -> None:
    # a last assistant message (a prefill) may be empty
    assert sent(conv(user("hi"), assistant(text(""))))["messages"] == [user("hi"), assistant()]
    body = conv(user("hi"), assistant(text("yes")), user(text("")))  # nothing could make it valid: as it came
    assert run(body).status == "untouched"


def test_the_latest_assistant_turn_with_thinking_is_left_as_it_came_until_another_follows() -> None:
    latest = assistant(thinking(), text(""), use("t1"))
    body = conv(user("hi"), latest, user(result("t1")))
    assert run(body).status == "untouched"
    later = conv(user("hi"), latest, user(result("t1")), assistant(text("done")), user("thanks"))
    assert sent(later)["messages"][1] == assistant(thinking(), use("t1"))
    # an empty assistant turn after it is dropped and does not count as the latest
    body = conv(user("hi"), latest, user(result("t1")), assistant(), user("again"))
    assert sent(body)["messages"] == [user("hi"), latest, user(result("t1")), user("again")]


def test_system_messages_are_not_its_own() -> None:
    """Claude Code's directive-only system message (empty content and an output_config) is valid on Anthropic."""
    directive = {"role": "system", "content": [], "output_config": {"effort": "high"}}
    assert run(conv(user("hi"), directive, assistant(text("a")), user("b"))).status == "untouched"


def test_tool_result_content_is_left_alone() -> None:
    body = conv(user("read"), assistant(use("t1")), user({"type": "tool_result", "tool_use_id": "t1",
                                                          "content": [text("")]}))
    assert run(body).status == "untouched"


def test_other_dialects_are_not_its_own() -> None:
    raw = json.dumps({"model": "m", "messages": [{"role": "user", "content": ""}, {"role": "user", "content": "x"}]})
    out = engine.process(engine.Request(CHAT, "api.openai.com", 443, raw.encode()), engine.Settings())
    assert out.status == "untouched"


def test_the_certain_check_judges_again_what_it_let_pass_when_only_a_system_message_follows() -> None:
    """A last empty assistant message was let pass; a system message after it makes it one that must go."""
    from llmfix.body.conversation import loads, parse
    from llmfix.profiles import ProfileTable
    from llmfix.repairs import drop_empty_text
    from llmfix.repairs.base import Context

    messages = [user("hi"), assistant(), {"role": "system", "content": "reminder"}]
    items = parse(MESSAGES, loads(json.dumps(conv(*messages)).encode())).items
    profile = ProfileTable().resolve(ANTHROPIC, 443, None, MESSAGES).profile
    ctx = Context(MESSAGES, profile, None, None)
    state = drop_empty_text._extend(None, items[:2], 0, ctx)
    assert state is not None and not drop_empty_text.REPAIR.apply(items[:2], ctx)[1]
    assert drop_empty_text._extend(state, items, 2, ctx) is None
    assert drop_empty_text.REPAIR.apply(items, ctx)[1]
