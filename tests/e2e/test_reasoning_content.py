"""DeepSeek / Kimi thinking mode end to end: turn 1 streams through a real mitmdump with llmfix (the openai SDK),
the mock answers in thinking mode; turn 2 is replayed the way Droid (no ``reasoning_content``) and opencode
(``"reasoning_content": ""``) replay it. Without llmfix the strict upstream answers its 400; through llmfix it
answers 200 and receives the reasoning byte for byte, nothing else changed. A gateway in front of DeepSeek, which
llmfix has no profile for, learns from its 400 (two upstream requests, then one), and still after a restart."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.e2e.harness import Mitmdump, module_proxy
from tests.e2e.reasoning_client import post, since, start, stream_chat, without_llmfix
from tests.upstreams.captures import capture_bytes
from tests.upstreams.mock import MockUpstream
from tests.upstreams.reasoning_canned import chat_sse
from tests.upstreams.reasoning_canned import with_reasoning as answered_with
from tests.upstreams.reasoning_rules import DEEPSEEK_TEXT, KIMI_TEXT
from tests.upstreams.reasoning_sessions import DROID_SSE, THOUGHT, Session, droid, opencode

pytestmark = pytest.mark.timeout(180)
PATH = "/v1/chat/completions"
FINAL = "Both files show the same red square, eight pixels wide."


# rules by host: api.deepseek.com, api.moonshot.ai, deepseek.gateway.test; llmfix's memory a file in the confdir
upstream, confdir, proxy = module_proxy("reasoning", start, MockUpstream)


def turn1(p: Mitmdump, upstream: MockUpstream, host: str, session: Session) -> None:
    upstream.queue_sse(session.sse, chunk_delay=0.01)
    reasoning, calls = stream_chat(p, host, session.turn1)
    assert reasoning == THOUGHT  # streamed to the client as it came
    assert calls == [tc["id"] for tc in session.turn2["messages"][session.at]["tool_calls"]]


def with_reasoning(body: dict, at: int, reasoning: str = THOUGHT) -> dict:
    out = copy.deepcopy(body)
    out["messages"][at]["reasoning_content"] = reasoning
    return out


@pytest.mark.parametrize(("host", "model", "text"), [
    ("api.deepseek.com", "deepseek-v4-flash", DEEPSEEK_TEXT),
    ("api.moonshot.ai", "kimi-k2.5", KIMI_TEXT.format(3)),
])
def test_droid_replaying_without_the_reasoning(proxy: Mitmdump, upstream: MockUpstream, host: str, model: str,
                                               text: str) -> None:
    session = droid("0.225.2", model)
    turn1(proxy, upstream, host, session)
    rejected = without_llmfix(upstream, host, PATH, session.turn2)
    assert rejected.status_code == 400 and text in rejected.text
    before = len(upstream.requests)
    response = post(proxy, f"https://{host}{PATH}", session.turn2)
    assert response.status_code == 200, response.text
    [seen] = since(upstream, before)
    assert seen.json == with_reasoning(session.turn2, session.at)  # the reasoning byte for byte; nothing else
    proxy.wait_for_output("restore-reasoning-content: messages[3].reasoning_content")


def kimi_session(home: str, reasoning: str) -> Session:
    """Droid on Kimi in ``home``: Kimi numbers the calls of a conversation, so every session's two Reads are
    ``functions.Read:0`` and ``functions.Read:1``."""

    def on_kimi(text: str) -> str:
        return text.replace("call_mock_a", "functions.Read:0").replace("call_mock_b", "functions.Read:1").replace(
            "/home/dev/project/", home)

    session = droid("0.225.2", "kimi-k2.5")
    return Session(json.loads(on_kimi(json.dumps(session.turn1))),
                   answered_with(on_kimi(capture_bytes(DROID_SSE).decode()), reasoning),
                   json.loads(on_kimi(json.dumps(session.turn2))), reasoning, session.at)


def test_two_kimi_sessions_under_the_same_call_ids_each_get_their_own_reasoning(proxy: Mitmdump,
                                                                                  upstream: MockUpstream) -> None:
    alice = kimi_session("/home/alice/", "Alice's reasoning: her deploy key is in ~/.env.")
    bob = kimi_session("/home/bob/", "Bob's reasoning: read both images.")
    for session in (alice, bob):
        upstream.queue_sse(session.sse)
        reasoning, calls = stream_chat(proxy, "api.moonshot.ai", session.turn1)
        assert (reasoning, calls) == (session.reasoning, ["functions.Read:0", "functions.Read:1"])
    for session in (bob, alice):
        before = len(upstream.requests)
        response = post(proxy, f"https://api.moonshot.ai{PATH}", session.turn2)
        assert response.status_code == 200, response.text
        [seen] = since(upstream, before)
        assert seen.json == with_reasoning(session.turn2, session.at, session.reasoning)  # its own, never the other's


def test_opencode_replaying_an_empty_reasoning(proxy: Mitmdump, upstream: MockUpstream) -> None:
    session = opencode()
    turn1(proxy, upstream, "api.deepseek.com", session)
    assert without_llmfix(upstream, "api.deepseek.com", PATH, session.turn2).status_code == 400
    before = len(upstream.requests)
    response = post(proxy, f"https://api.deepseek.com{PATH}", session.turn2)
    assert response.status_code == 200, response.text
    [seen] = since(upstream, before)
    got = seen.json
    assert got["messages"][2]["reasoning_content"] == THOUGHT
    # the image DeepSeek cannot take is omitted too (omit-unsupported-media); everything else is the capture's
    expected = with_reasoning(session.turn2, 2)
    expected["messages"][4]["content"] = got["messages"][4]["content"]
    assert got == expected
    assert "image omitted" in json.dumps(got["messages"][4]["content"])


GATEWAY = "deepseek.gateway.test"


def turn3(session: Session) -> dict:
    """The session's next turn: Droid's turn 2, the streamed final answer (its reasoning stripped), a question."""
    body = copy.deepcopy(session.turn2)
    body["messages"] += [{"role": "assistant", "content": FINAL}, {"role": "user", "content": "Thanks. Any text?"}]
    return body


def test_a_gateway_in_front_of_deepseek_learns_from_its_400(proxy: Mitmdump, upstream: MockUpstream,
                                                            confdir: Path) -> None:
    session = droid("0.215.0")
    turn1(proxy, upstream, GATEWAY, session)
    upstream.queue_sse(chat_sse("deepseek-v4-flash", "Describe both images.", text=FINAL))
    before = len(upstream.requests)
    response = post(proxy, f"https://{GATEWAY}{PATH}", session.turn2)
    assert response.status_code == 200, response.text
    first, second = since(upstream, before)  # no profile: rejected, learned, resent once
    assert (first.status, first.reason) == (400, "reasoning-content-missing")
    assert second.status == 200 and second.json == with_reasoning(session.turn2, session.at)
    proxy.wait_for_output(f"learned chat_reasoning_content=true for {GATEWAY}:443")
    expected = with_reasoning(with_reasoning(turn3(session), session.at), 6, "Describe both images.")
    before = len(upstream.requests)
    assert post(proxy, f"https://{GATEWAY}{PATH}", turn3(session)).status_code == 200
    [seen] = since(upstream, before)  # the next turn: repaired up front, both reasoning texts back
    assert seen.json == expected
    proxy.stop()
    with start(upstream, confdir) as again:  # a new process: only the memory file knows
        before = len(upstream.requests)
        assert post(again, f"https://{GATEWAY}{PATH}", turn3(session)).status_code == 200
        [seen] = since(upstream, before)
        assert seen.json == expected
