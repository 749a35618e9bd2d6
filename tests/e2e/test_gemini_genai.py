"""Google's Python SDK (``google-genai``) through a real, BARE mitmdump against the strict Gemini mock
(tests/e2e/genai_client.py): a two-turn function-call session whose signatures the mock issued and accepts (the SDK
keeps a signature as bytes and writes it back in URL-safe base64: the same bytes, another text), the same on Vertex
(express mode) with Vertex's own keys, and each broken turn-2 shape of a Gemini session answered
with its 400 and Google's text — one upstream request each, nothing repaired (no llmfix in the proxy).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from tests.e2e import genai_client
from tests.e2e.gemini_cli import start_proxy
from tests.e2e.harness import Mitmdump
from tests.upstreams.gemini_canned import function_calls, text_answer
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(120)
MODEL = "gemini-3.1-pro-preview"
PROMPT = "Read a.md and b.md at once."
A, B = {"file_path": "a.md"}, {"file_path": "b.md"}
DONE = "a.md says hi, b.md says bye"


@pytest.fixture(scope="module")
def proxy(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    with start_proxy(upstream, tmp_path_factory.mktemp("genai-conf")) as p:
        yield p


def first_turn(upstream: MockUpstream, proxy: Mitmdump, *, vertex: bool = False):
    upstream.gemini.queue(function_calls(("read_file", A), ("read_file", B), thought="Both at once."))
    gc = genai_client.client(proxy, vertex=vertex)
    parts, history = genai_client.turn1(gc, MODEL, PROMPT)
    return gc, parts, history


@pytest.mark.parametrize("vertex", [False, True], ids=["gemini-api", "vertex-express"])
def test_a_two_turn_function_call_session_is_accepted_with_its_signatures(upstream, proxy, vertex: bool) -> None:
    before = len(upstream.requests)
    gc, parts, history = first_turn(upstream, proxy, vertex=vertex)
    assert [(p.function_call.name, p.function_call.args) for p in parts] == [("read_file", A), ("read_file", B)]
    assert parts[0].thought_signature and parts[1].thought_signature is None  # only the first parallel call
    upstream.gemini.queue(text_answer(DONE))
    answer = genai_client.turn2(gc, MODEL, [*history, genai_client.responses_for(parts)])
    assert answer.text == DONE
    seen = upstream.requests[before:]
    host = "aiplatform.googleapis.com" if vertex else "generativelanguage.googleapis.com"
    assert [(r.headers["x-llmfix-test-original-host"], r.status) for r in seen] == [(host, 200)] * 2
    assert seen[0].path.endswith(f"{MODEL}:streamGenerateContent?alt=sse") and seen[1].path.endswith(
        f"{MODEL}:generateContent")
    replayed = seen[1].json["contents"][1]["parts"][0]
    issued = upstream.gemini.sent[-2].issued[1]["thoughtSignature"]
    # the SDK holds the signature as bytes and writes it back URL-safe (proto3 JSON takes both alphabets):
    # the same bytes, not the same text
    assert base64.urlsafe_b64decode(replayed["thoughtSignature"]) == base64.b64decode(issued)
    assert base64.b64decode(issued) == parts[0].thought_signature


def test_a_gemini_api_signature_replayed_to_vertex_is_not_valid_there(upstream, proxy) -> None:
    _, parts, history = first_turn(upstream, proxy)
    vertex = genai_client.client(proxy, vertex=True)
    status, message = genai_client.rejection(lambda: genai_client.turn2(
        vertex, MODEL, [*history, genai_client.responses_for(parts)]))
    assert status == 400 and "Thought signature is not valid" in message


@pytest.mark.parametrize("name", genai_client.BROKEN)
def test_each_broken_turn2_is_rejected_with_googles_text(upstream, proxy, name: str) -> None:
    gc, parts, history = first_turn(upstream, proxy)
    foreign = base64.b64decode(upstream.gemini.ledger.sign_call("read_file", A, signer="another-account"))
    broken, raw_tools, text = genai_client.broken_histories(history, genai_client.responses_for(parts), foreign)[name]
    before = len(upstream.requests)
    status, message = genai_client.rejection(lambda: genai_client.turn2(gc, MODEL, broken, raw_tools=raw_tools))
    assert (status, message) == (400, text)
    [seen] = upstream.requests[before:]
    assert seen.status == 400 and seen.reason is not None
