"""The strict mock's reasoning rules: DeepSeek's and Kimi's thinking mode, Anthropic's signatures and latest turn."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from tests.upstreams.mock import ORIGINAL_HOST_HEADER, MockUpstream
from tests.upstreams.reasoning_canned import anthropic_sse, chat_sse, issued_turn
from tests.upstreams.reasoning_rules import DEEPSEEK_TEXT
from tests.upstreams.rules import check
from tests.upstreams.thinking import LATEST, Ledger

CHAT = "/v1/chat/completions"
CALL = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}


def chat(*, model: str = "deepseek-v4-flash", reasoning: Any = None, final: bool = False, **top: Any) -> dict:
    assistant: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    if reasoning is not None:
        assistant["reasoning_content"] = reasoning
    messages = [{"role": "user", "content": "read it"}, assistant, {"role": "tool", "tool_call_id": "call_1",
                                                                      "content": "text of the file"}]
    if final:
        messages += [{"role": "assistant", "content": "It says hi."}, {"role": "user", "content": "thanks"}]
    return {"model": model, "messages": messages, **top}


@pytest.mark.parametrize("reasoning", [None, ""])
def test_deepseek_thinking_mode_wants_the_reasoning_back(reasoning: Any) -> None:
    rejection = check("deepseek", CHAT, chat(reasoning=reasoning))
    assert rejection is not None and rejection.status == 400
    assert rejection.body == {"error": {"message": DEEPSEEK_TEXT, "type": "invalid_request_error", "param": None,
                                        "code": "invalid_request_error"}}
    assert check("deepseek", CHAT, chat(reasoning="I will read it.")) is None


def test_deepseek_checks_every_assistant_message_of_a_span_with_a_tool_call() -> None:
    body = chat(reasoning="I will read it.", final=True)  # the final answer of the span has no reasoning
    assert check("deepseek", CHAT, body) is not None
    body["messages"][3]["reasoning_content"] = "It says hi, tell them."
    assert check("deepseek", CHAT, body) is None


def test_deepseek_without_thinking_and_spans_without_calls_need_none() -> None:
    assert check("deepseek", CHAT, chat(model="deepseek-chat")) is None  # not a thinking model by default
    assert check("deepseek", CHAT, chat(thinking={"type": "disabled"})) is None
    assert check("deepseek", CHAT, chat(model="deepseek-chat", thinking={"type": "enabled"})) is not None
    plain = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"},
                                                      {"role": "assistant", "content": "hello"},
                                                      {"role": "user", "content": "again"}]}
    assert check("deepseek", CHAT, plain) is None


def test_kimi_names_the_tool_call_message() -> None:
    rejection = check("moonshot", CHAT, chat(model="kimi-k2.5"))
    assert rejection is not None and rejection.status == 400
    text = "thinking is enabled but reasoning_content is missing in assistant tool call message at index 1"
    assert rejection.body == {"error": {"type": "invalid_request_error", "message": text}, "type": "error"}
    assert check("moonshot", CHAT, chat(model="kimi-k2.5", reasoning="read it", final=True)) is None  # calls only
    assert check("moonshot", CHAT, chat(model="moonshot-v1-8k")) is None


def test_deepseek_rejects_reasoning_it_did_not_issue() -> None:
    ledger = Ledger()
    answer = chat_sse("deepseek-v4-flash", "I will read it.", calls=[("call_1", "read", "{}")])
    ledger.observe("deepseek", "chat", answer)
    assert ledger.check("deepseek", "chat", chat(reasoning="I will read it.")) is None
    assert ledger.check("deepseek", "chat", chat(reasoning=".")).body["error"]["message"] == DEEPSEEK_TEXT


def anthropic_body(ledger: Ledger, older: dict[str, Any], latest: dict[str, Any]) -> dict[str, Any]:
    return {"model": "claude-opus-5-5", "max_tokens": 100, "messages": [
        {"role": "user", "content": "first"}, older, {"role": "user", "content": "second"}, latest,
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "ok"}]}]}


def issued(ledger: Ledger, thinking: str = "Read it.", **kw: Any) -> dict[str, Any]:
    """An answer the mock streamed (and so remembers), as the client keeps it."""
    tool_uses = [("toolu_2", "Read", {"file_path": "a.png"})]
    answer = anthropic_sse(ledger, "claude-opus-5-5", thinking, tool_uses=tool_uses, **kw)
    ledger.observe("anthropic", "messages", answer)
    return issued_turn(ledger, thinking, tool_uses=tool_uses, **kw)


def test_anthropic_accepts_its_own_signatures_and_rejects_any_other() -> None:
    ledger = Ledger()
    own = issued_turn(ledger, "An older thought.", text="Hello.")
    latest = issued(ledger)
    assert ledger.check("anthropic", "messages", anthropic_body(ledger, own, latest)) is None
    cases = {
        "another provider's": issued_turn(ledger, "An older thought.", signer="kimi", text="Hello."),
        "edited": {**own, "content": [{**own["content"][0], "thinking": "Edited."}, own["content"][1]]},
        "empty": {**own, "content": [{**own["content"][0], "signature": ""}, own["content"][1]]},
        "a UUID": {**own, "content": [{**own["content"][0], "signature": "7b0e3f2a-1c4d-4e5f-8a9b-0c1d2e3f4a5b"},
                                      own["content"][1]]},
    }
    for why, older in cases.items():
        rejection = ledger.check("anthropic", "messages", anthropic_body(ledger, older, latest))
        assert rejection is not None, why
        text = "messages.1.content.0: Invalid `signature` in `thinking` block"
        assert rejection.body == {"type": "error", "error": {"type": "invalid_request_error", "message": text}}
    unsigned = {**own, "content": [{"type": "thinking", "thinking": "x"}, own["content"][1]]}
    rejection = ledger.check("anthropic", "messages", anthropic_body(ledger, unsigned, latest))
    assert rejection is not None and rejection.message == "messages.1.content.0.thinking.signature: Field required"
    assert Ledger().check("anthropic", "messages", anthropic_body(ledger, own, latest)) is not None  # another mock


def test_anthropic_wants_the_latest_turn_exactly_as_it_issued_it() -> None:
    ledger = Ledger()
    own = issued_turn(ledger, "An older thought.", text="Hello.")
    latest = issued(ledger)
    other = issued_turn(ledger, "A different thought, also signed.",
                        tool_uses=[("toolu_2", "Read", {"file_path": "a.png"})])
    dropped = {**latest, "content": latest["content"][1:]}
    for changed in (other, dropped):
        rejection = ledger.check("anthropic", "messages", anthropic_body(ledger, own, changed))
        assert rejection is not None and rejection.message == f"messages.3.content.0: {LATEST}"


def test_anthropic_wants_thinking_first_and_no_empty_message() -> None:
    ledger = Ledger()
    latest = issued(ledger)
    own = issued_turn(ledger, "An older thought.", text="Hello.")
    behind = {**own, "content": [own["content"][1], own["content"][0]]}
    rejection = ledger.check("anthropic", "messages", anthropic_body(ledger, behind, latest))
    assert rejection is not None
    assert "the first block must be thinking or redacted_thinking. Found text." in rejection.message
    empty = {"role": "assistant", "content": []}
    rejection = ledger.check("anthropic", "messages", anthropic_body(ledger, empty, latest))
    assert rejection is not None
    assert rejection.message.startswith("messages.1: all messages must have non-empty content")


def test_redacted_thinking_is_checked_too() -> None:
    ledger = Ledger()
    latest = issued(ledger)
    good = {"role": "assistant", "content": [{"type": "redacted_thinking", "data": ledger.redacted()},
                                             {"type": "text", "text": "Hello."}]}
    assert ledger.check("anthropic", "messages", anthropic_body(ledger, good, latest)) is None
    bad = copy.deepcopy(good)
    bad["content"][0]["data"] = ledger.redacted("minimax")
    assert "Invalid `data` in `redacted_thinking` block" in ledger.check("anthropic", "messages",
                                                                         anthropic_body(ledger, bad, latest)).message


def test_the_mock_remembers_what_it_streamed_and_checks_it() -> None:
    with MockUpstream() as up:
        tool_uses = [("toolu_2", "Read", {"file_path": "a.png"})]
        up.queue_sse(anthropic_sse(up.ledger, "claude-opus-5-5", "Read it.", tool_uses=tool_uses))
        headers = {ORIGINAL_HOST_HEADER: "api.anthropic.com"}
        first = {"model": "claude-opus-5-5", "max_tokens": 10, "stream": True,
                 "messages": [{"role": "user", "content": "second"}]}
        assert httpx.post(f"{up.url}/v1/messages", json=first, headers=headers).status_code == 200
        own = issued_turn(up.ledger, "Read it.", tool_uses=tool_uses)
        body = {"model": "claude-opus-5-5", "max_tokens": 10, "messages": [
            {"role": "user", "content": "second"}, {**own, "content": own["content"][1:]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "ok"}]}]}
        response = httpx.post(f"{up.url}/v1/messages", json=body, headers=headers)
        assert response.status_code == 400 and LATEST in response.text
        body["messages"][1] = own
        assert httpx.post(f"{up.url}/v1/messages", json=body, headers=headers).status_code == 200
