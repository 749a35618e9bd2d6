"""Anthropic thinking signatures end to end, through a real mitmdump with llmfix and the anthropic SDK streaming
turn 1: the strict mock signs its thinking (an HMAC per signer), rejects any block it did not sign and a changed
latest turn, with Anthropic's texts.

- Claude Code replaying its own thinking: byte-identical, 200.
- A session that went to Kimi (its own signatures) or to DeepSeek's ``/anthropic`` (message-UUID signatures), then
  to a fallback, then to Anthropic: 400 without llmfix; with it 200, only the foreign blocks gone from the older
  turn, the latest turn intact. Kimi's blocks have Anthropic's form: the rejection teaches them (two upstream
  requests), the next turn and a restarted llmfix need one. DeepSeek's form tells: one request from the start.
- Claude Code resumed with a lost signature, through a gateway llmfix has no profile for: two requests, then one.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Mitmdump, module_proxy
from tests.e2e.reasoning_client import post, since, start, stream_messages, without_llmfix
from tests.upstreams.mock import MockUpstream
from tests.upstreams.reasoning_canned import anthropic_sse, issued_turn
from tests.upstreams.reasoning_sessions import READ_A, claude_code

pytestmark = pytest.mark.timeout(180)
MODEL = "claude-opus-5-5"
UUID = "b7e3c1d2-8f4a-4e6b-9c0d-1a2b3c4d5e6f"
READ_B = ("toolu_b", "Read", {"file_path": "/home/dev/project/b.png"})


# by host: api.anthropic.com / claude.gateway.test check signatures
upstream, confdir, proxy = module_proxy("thinking", start, MockUpstream)


def sent_as_is(seen: Any, body: dict[str, Any]) -> bool:
    return seen.body == json.dumps(body).encode()


def test_claude_code_replaying_its_own_thinking_is_untouched(proxy: Mitmdump, upstream: MockUpstream) -> None:
    session = claude_code(upstream.ledger, MODEL)
    upstream.queue_sse(session.sse, chunk_delay=0.01)
    blocks = stream_messages(proxy, "https://api.anthropic.com", session.turn1)
    assert [b.type for b in blocks] == ["thinking", "tool_use"]
    assert blocks[0].signature == session.turn2["messages"][1]["content"][0]["signature"]  # streamed untouched
    before = len(upstream.requests)
    assert post(proxy, "https://api.anthropic.com/v1/messages", session.turn2).status_code == 200
    [seen] = since(upstream, before)
    assert sent_as_is(seen, session.turn2)


def switched(proxy: Mitmdump, upstream: MockUpstream, base_url: str, model: str, **sign: Any) -> dict[str, Any]:
    """Turn 1 on another provider (streamed through llmfix), turn 2 answered by a fallback without thinking: turn 3,
    sent to Anthropic."""
    question = {"role": "user", "content": "Look at a.png with the Read tool."}
    thought = "The user wants a.png; read it."
    upstream.queue_sse(anthropic_sse(upstream.ledger, model, thought, tool_uses=[READ_A], **sign))
    blocks = stream_messages(proxy, base_url, {"model": model, "max_tokens": 1024, "messages": [question],
                                               "thinking": {"type": "enabled", "budget_tokens": 512}})
    assert blocks[0].type == "thinking"
    theirs = issued_turn(upstream.ledger, thought, tool_uses=[READ_A], **sign)
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": READ_A[0], "content": "a red square"}]}
    fallback = {"role": "assistant", "content": [{"type": "text", "text": "It is a red square."}]}
    body = {"model": MODEL, "max_tokens": 1024, "stream": True, "thinking": {"type": "enabled", "budget_tokens": 512},
            "messages": [question, theirs, result, fallback, {"role": "user", "content": "And b.png?"}]}
    return body


def without_foreign_thinking(body: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(body)
    out["messages"][1]["content"] = out["messages"][1]["content"][1:]
    return out


def answer_b(upstream: MockUpstream) -> dict[str, Any]:
    """Anthropic's next answer, queued for the request that is accepted; the assistant turn the client stores."""
    upstream.queue_sse(anthropic_sse(upstream.ledger, MODEL, "Now b.png.", tool_uses=[READ_B]))
    return issued_turn(upstream.ledger, "Now b.png.", tool_uses=[READ_B])


def next_turn(body: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(body)
    out["messages"] += [answer, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": READ_B[0],
                                                              "content": "a blue square"}]}]
    return out


def test_a_session_back_from_deepseek_s_anthropic_endpoint(proxy: Mitmdump, upstream: MockUpstream) -> None:
    body = switched(proxy, upstream, "https://api.deepseek.com/anthropic", "deepseek-v4-pro", signature=UUID)
    back = copy.deepcopy(body)  # to DeepSeek itself, its own blocks stay as they are
    back["model"] = "deepseek-v4-pro"
    before = len(upstream.requests)
    assert post(proxy, "https://api.deepseek.com/anthropic/v1/messages", back).status_code == 200
    assert sent_as_is(since(upstream, before)[0], back)
    assert without_llmfix(upstream, "api.anthropic.com", "/v1/messages", body).status_code == 400
    answer_b(upstream)
    before = len(upstream.requests)
    assert post(proxy, "https://api.anthropic.com/v1/messages", body).status_code == 200
    [seen] = since(upstream, before)  # a message UUID is not Anthropic's form: one request
    assert seen.json == without_foreign_thinking(body)
    proxy.wait_for_output("its signature is a message UUID")


def test_claude_code_resumed_with_a_lost_signature_through_a_gateway(proxy: Mitmdump, upstream: MockUpstream) -> None:
    gateway = "https://claude.gateway.test"
    session = claude_code(upstream.ledger, MODEL)
    upstream.queue_sse(session.sse)
    stream_messages(proxy, gateway, session.turn1)
    upstream.queue_sse(anthropic_sse(upstream.ledger, MODEL, "It is red.", text="A red square."))
    assert post(proxy, f"{gateway}/v1/messages", session.turn2).status_code == 200
    resumed = copy.deepcopy(session.turn2)
    resumed["messages"][1]["content"][0]["signature"] = ""  # lost in the transcript (Claude Code #21726)
    resumed["messages"] += [issued_turn(upstream.ledger, "It is red.", text="A red square."),
                            {"role": "user", "content": "Thanks, and the corners?"}]
    expected = without_foreign_thinking(resumed)
    before = len(upstream.requests)
    assert post(proxy, f"{gateway}/v1/messages", resumed).status_code == 200
    assert [r.status for r in since(upstream, before)] == [400, 200]  # no profile: the gateway's word teaches
    assert since(upstream, before)[1].json == expected
    before = len(upstream.requests)
    assert post(proxy, f"{gateway}/v1/messages", resumed).status_code == 200
    [seen] = since(upstream, before)
    assert seen.json == expected


def test_a_session_back_from_kimi(proxy: Mitmdump, upstream: MockUpstream, confdir: Path) -> None:
    body = switched(proxy, upstream, "https://api.kimi.com/coding", "kimi-k3", signer="kimi")
    rejected = without_llmfix(upstream, "api.anthropic.com", "/v1/messages", body)
    assert rejected.status_code == 400
    assert rejected.json()["error"]["message"] == "messages.1.content.0: Invalid `signature` in `thinking` block"
    answer = answer_b(upstream)
    before = len(upstream.requests)
    response = post(proxy, "https://api.anthropic.com/v1/messages", body)
    assert response.status_code == 200, response.text
    first, second = since(upstream, before)  # the form was Anthropic's: the upstream's word taught it
    assert (first.status, first.reason) == (400, "thinking-signature-invalid")
    assert second.status == 200 and second.json == without_foreign_thinking(body)
    proxy.wait_for_output("retry: 400 messages-thinking-signature")
    later = next_turn(body, answer)
    expected = without_foreign_thinking(later)
    upstream.queue_sse(anthropic_sse(upstream.ledger, MODEL, "Both read.", text="Red and blue."))
    before = len(upstream.requests)
    assert post(proxy, "https://api.anthropic.com/v1/messages", later).status_code == 200
    [seen] = since(upstream, before)  # the next turn: dropped up front, Anthropic's latest turn as it came
    assert seen.json == expected and seen.json["messages"][5] == answer
    proxy.stop()
    with start(upstream, confdir) as again:
        upstream.queue_sse(anthropic_sse(upstream.ledger, MODEL, "Both read.", text="Red and blue."))
        before = len(upstream.requests)
        assert post(again, "https://api.anthropic.com/v1/messages", later).status_code == 200
        [seen] = since(upstream, before)
        assert seen.json == expected
