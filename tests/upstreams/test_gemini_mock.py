"""The Gemini mock over HTTP: its doors, its streams, the signatures it issues and checks, its error envelopes."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.upstreams.gemini_canned import Call, function_calls, slow_text, text_answer
from tests.upstreams.gemini_errors import CORRUPTED, COUNT_MISMATCH, GeminiError, missing_signature
from tests.upstreams.gemini_mock import route
from tests.upstreams.mock import MockUpstream

MODEL = "gemini-3.1-pro-preview"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
UNARY = f"/v1beta/models/{MODEL}:generateContent"
VERTEX = f"/v1beta1/projects/p/locations/global/publishers/google/models/{MODEL}:streamGenerateContent?alt=sse"
CODE_ASSIST = "/v1internal:streamGenerateContent?alt=sse"
USER = {"role": "user", "parts": [{"text": "read a and b"}]}
A, B = {"file_path": "a.png"}, {"file_path": "b.png"}


@pytest.fixture
def up() -> Iterator[MockUpstream]:
    with MockUpstream(rules="gemini") as mock:
        yield mock


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(block[5:]) for block in text.split("\r\n\r\n") if block.startswith("data:")]


def parts(stream: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for e in stream for p in (e.get("response", e))["candidates"][0]["content"]["parts"]]


def post(up: MockUpstream, path: str, body: Any) -> httpx.Response:
    return httpx.post(up.url + path, json=body, headers={"x-goog-api-key": "fake"}, timeout=30)


def turn2(model_parts: list[dict[str, Any]], n: int = 2) -> dict[str, Any]:
    answers = [{"functionResponse": {"name": "read_file", "response": {"output": "ok"}}}] * n
    return {"contents": [USER, {"role": "model", "parts": model_parts}, {"role": "user", "parts": answers}]}


def test_routes() -> None:
    assert route(STREAM).backend == "gemini"
    assert (route(STREAM).method, route(STREAM).model, route(STREAM).sse) == ("streamGenerateContent", MODEL, True)
    assert route(VERTEX).backend == "vertex"
    assert route(f"/v1/publishers/google/models/{MODEL}:generateContent").backend == "vertex"  # express mode
    assert route(CODE_ASSIST).backend == "code-assist"
    assert route("/v1beta/openai/chat/completions").backend == "door"
    assert route("/v1beta/models") is None and route(f"/v1beta/models/{MODEL}:embedContent") is None


def test_parallel_calls_stream_one_event_each_and_only_the_first_is_signed(up: MockUpstream) -> None:
    up.gemini.queue(function_calls(("read_file", A), ("read_file", B), thought="Reading both."))
    got = post(up, STREAM, {"contents": [USER]})
    assert got.status_code == 200 and got.headers["content-type"] == "text/event-stream"
    stream = events(got.text)
    assert [len(e["candidates"][0]["content"]["parts"]) for e in stream] == [1, 1, 1]
    thought, first, second = parts(stream)
    assert thought == {"text": "Reading both.", "thought": True}
    assert first["functionCall"] == {"name": "read_file", "args": A} and first["thoughtSignature"]
    assert "thoughtSignature" not in second
    assert stream[-1]["candidates"][0]["finishReason"] == "STOP" and "finishReason" not in stream[0]["candidates"][0]
    assert stream[-1]["usageMetadata"]["thoughtsTokenCount"] > 0 and stream[0]["modelVersion"] == MODEL
    assert up.gemini.sent[0].issued == [thought, first, second]
    # the signed turn, replayed whole, passes; without the signature it is Google's missing-signature 400
    assert post(up, STREAM, turn2([first, second])).status_code == 200
    unsigned = post(up, STREAM, turn2([{"functionCall": first["functionCall"]}, second]))
    assert unsigned.status_code == 400
    assert unsigned.json() == {"error": {"code": 400, "message": missing_signature("gemini", "read_file", 2),
                                         "status": "INVALID_ARGUMENT"}}
    assert [r.status for r in up.requests] == [200, 200, 400] and up.requests[-1].reason == "signature-missing"


def test_signatures_in_either_spelling_and_the_documented_dummies(up: MockUpstream) -> None:
    signature = up.gemini.ledger.sign_call("read_file", A)
    call = {"function_call": {"name": "read_file", "args": A}}
    assert post(up, STREAM, turn2([{**call, "thought_signature": signature}, {"functionCall": {
        "name": "read_file", "args": B}}])).status_code == 200
    for dummy in ("skip_thought_signature_validator", "context_engineering_is_the_way_to_go",
                  base64.b64encode(b"skip_thought_signature_validator").decode()):
        assert post(up, STREAM, turn2([{**call, "thoughtSignature": dummy}, call])).status_code == 200


def test_a_signature_another_backend_issued_is_corrupted(up: MockUpstream) -> None:
    foreign = up.gemini.ledger.sign_call("read_file", A, signer="code-assist")
    got = post(up, STREAM, turn2([{"functionCall": {"name": "read_file", "args": A}, "thoughtSignature": foreign},
                                  {"functionCall": {"name": "read_file", "args": B}}]))
    assert got.status_code == 400 and got.json()["error"]["message"] == CORRUPTED
    moved = up.gemini.ledger.sign_call("read_file", B)  # issued, but for another call
    got = post(up, STREAM, turn2([{"functionCall": {"name": "read_file", "args": A}, "thoughtSignature": moved},
                                  {"functionCall": {"name": "read_file", "args": B}}]))
    assert got.json()["error"]["message"] == CORRUPTED
    up.gemini.trust(foreign)  # declared issued (a real capture's): accepted
    assert post(up, STREAM, turn2([{"functionCall": {"name": "read_file", "args": A}, "thoughtSignature": foreign},
                                   {"functionCall": {"name": "read_file", "args": B}}])).status_code == 200


def test_only_the_current_turn_must_be_signed_and_gemini_2_5_signs_nothing(up: MockUpstream) -> None:
    old = turn2([{"functionCall": {"name": "read_file", "args": A}}], 1)["contents"]
    old += [{"role": "model", "parts": [{"text": "It is red."}]}, {"role": "user", "parts": [{"text": "thanks"}]}]
    assert post(up, STREAM, {"contents": old}).status_code == 200  # an unsigned call in an older turn
    # a function-response content does not start a turn: the call before it is still in the current one
    assert post(up, STREAM, turn2([{"functionCall": {"name": "read_file", "args": A}}], 1)).status_code == 400
    old_model = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert post(up, old_model, turn2([{"functionCall": {"name": "read_file", "args": A}}], 1)).status_code == 200
    up.gemini.queue(function_calls(("read_file", A)))
    assert "thoughtSignature" not in parts(events(post(up, old_model, {"contents": [USER]}).text))[0]


def test_vertex_and_code_assist_word_their_errors_and_use_their_own_keys(up: MockUpstream) -> None:
    unsigned = turn2([{"functionCall": {"name": "read_file", "args": A}}], 1)
    vertex = post(up, VERTEX, unsigned)
    assert vertex.json() == {"error": {"code": 400, "message": missing_signature("vertex", "read_file", 2),
                                       "status": "INVALID_ARGUMENT"}}
    assert "in the 2. content block is missing a `thought_signature`" in vertex.json()["error"]["message"]
    wrapped = post(up, CODE_ASSIST, {"model": MODEL, "project": "p", "request": unsigned})
    [error] = wrapped.json()
    assert error["error"]["errors"] == [{"message": error["error"]["message"], "domain": "global",
                                         "reason": "badRequest"}]
    gemini_signed = up.gemini.ledger.sign_call("read_file", A)  # the Gemini API's, sent to Vertex
    got = post(up, VERTEX, turn2([{"functionCall": {"name": "read_file", "args": A},
                                   "thoughtSignature": gemini_signed}], 1))
    assert "Thought signature is not valid" in got.json()["error"]["message"]


def test_code_assist_answers_in_its_envelope_and_its_signatures_verify_there(up: MockUpstream) -> None:
    up.gemini.queue(function_calls(("read_file", A)))
    got = post(up, CODE_ASSIST, {"model": MODEL, "project": "p", "request": {"contents": [USER]}})
    stream = events(got.text)
    assert set(stream[0]) == {"response", "traceId"}
    [call] = parts(stream)
    again = {"model": MODEL, "request": turn2([call], 1)}
    assert post(up, CODE_ASSIST, again).status_code == 200
    assert post(up, STREAM, turn2([call], 1)).json()["error"]["message"] == CORRUPTED  # not the Gemini API's key


def test_unary_array_and_count_tokens_answers(up: MockUpstream) -> None:
    up.gemini.queue(text_answer("hello there", chunks=3), text_answer("as an array", chunks=2))
    unary = post(up, UNARY, {"contents": [USER]}).json()
    [part] = unary["candidates"][0]["content"]["parts"]
    assert part["text"] == "hello there" and part["thoughtSignature"]  # deltas merged, signed on the last part
    array = post(up, STREAM.split("?")[0], {"contents": [USER]}).json()
    assert isinstance(array, list) and "".join(p["text"] for p in parts(array)) == "as an array"
    bad = post(up, STREAM.split("?")[0], {"contents": [USER, {"role": "model", "parts": []}]})
    assert isinstance(bad.json(), list) and bad.status_code == 400
    count = post(up, f"/v1beta/models/{MODEL}:countTokens", {"contents": [USER]}).json()
    assert count["totalTokens"] > 0
    assert up.gemini.pending == 0 and len(up.gemini.sent) == 2  # countTokens takes no queued answer


def test_an_error_inside_a_200_stream(up: MockUpstream) -> None:
    error = GeminiError("The model is overloaded. Please try again later.", "overloaded", status=503)
    up.gemini.queue(text_answer("partial answer", chunks=3).with_error(error, after=1))
    got = post(up, STREAM, {"contents": [USER]})
    assert got.status_code == 200
    head, _, tail = got.text.rpartition("\r\n\r\n")
    assert len(events(head + "\r\n\r\n")) == 1
    assert json.loads(tail) == {"error": {"code": 503, "message": error.message, "status": "UNAVAILABLE"}}


def test_a_slow_stream_sends_headers_and_the_first_event_at_once(up: MockUpstream) -> None:
    up.gemini.queue(slow_text("one two three four", events=4, seconds=2.4))
    seen: list[tuple[float, str]] = []
    start = time.monotonic()
    with httpx.stream("POST", up.url + STREAM, json={"contents": [USER]}, timeout=30) as got:
        headers_at = time.monotonic() - start
        for line in got.iter_lines():
            if line.startswith("data:"):
                seen.append((time.monotonic() - start, line))
    assert headers_at < 0.5 and seen[0][0] < 0.5
    assert len(seen) == 4 and seen[-1][0] >= 2.2  # spread over the seconds asked for
    sending = [at - start for at in up.gemini.sent[-1].sending_at]  # when the mock began to send each event
    assert len(sending) == 4 and sending[-1] - sending[0] >= 2.2
    assert all(w <= s for w, (s, _) in zip(sending, seen, strict=True))  # each was read after it was sent


def test_unknown_paths_bad_json_and_the_payload_limit(up: MockUpstream) -> None:
    assert httpx.post(up.url + "/v1beta/models", json={}).status_code == 404
    bad = httpx.post(up.url + STREAM, content=b"{nope", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("Invalid JSON payload received.")
    up.gemini.payload_limit = 1000
    big = post(up, STREAM, {"contents": [{"role": "user", "parts": [{"text": "x" * 2000}]}]})
    assert big.json()["error"]["message"] == "Request payload size exceeds the limit: 1000 bytes."
    assert [r.reason for r in up.requests] == ["unknown-url", "invalid-json", "payload-size"]


def test_pairing_is_checked_before_signatures_and_a_resumed_duplicate_is_rejected(up: MockUpstream) -> None:
    dummy_first = [{"functionCall": {"name": "read_file", "args": A}, "thoughtSignature":
                    "skip_thought_signature_validator"}, {"functionCall": {"name": "read_file", "args": B}}]
    got = post(up, STREAM, turn2(dummy_first, 4))  # Gemini CLI 0.61.0 after --resume: every response twice
    assert got.status_code == 400 and got.json()["error"]["message"] == COUNT_MISMATCH


def test_scripted_ids_and_pinned_signatures(up: MockUpstream) -> None:
    up.gemini.queue(function_calls(Call("read_file", A, id="call_1", signature="pinned"), ("read_file", B),
                                   sequential=True))
    first, second = parts(events(post(up, STREAM, {"contents": [USER]}).text))
    assert first == {"functionCall": {"id": "call_1", "name": "read_file", "args": A}, "thoughtSignature": "pinned"}
    assert second["thoughtSignature"]  # sequential: each call signed


def test_concurrent_requests_are_all_recorded(up: MockUpstream) -> None:
    threads = [threading.Thread(target=post, args=(up, STREAM, {"contents": [USER]})) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(up.requests) == 8 and {r.status for r in up.requests} == {200}
