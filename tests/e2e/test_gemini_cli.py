"""The real Gemini CLI 0.61.0 through a real, BARE mitmdump (no llmfix) against the strict Gemini mock: what the
client does unhelped (tests/e2e/gemini_cli.py; tests/e2e/test_gemini_cli_llmfix.py loads llmfix with the same
helpers).

- A two-call image turn: both ``read_file`` calls answered, every request accepted (200) and byte for byte what
  the CLI sent; the turn-2 history holds the signed first call, the unsigned sibling, both responses and images.
- ``--resume latest`` after that tool turn: the CLI sends every function response twice (4 for 2 calls, with their
  images) and Google's dummy on the first call: the count 400, on every later resume too.
- An answer streamed over ~5 s: held by mitmdump until it ends (every delta reaches the CLI at once), and the
  control that streams event-stream answers (each delta as it comes).

Skipped when the CLI is not installed (``.ci/install-gemini``), failed instead under CI.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e import gemini_cli
from tests.e2e.gemini_cli import DONE, TWO_IMAGES, GeminiSession, generations, images_in, png, start_proxy
from tests.upstreams.gemini_canned import slow_text, text_answer
from tests.upstreams.gemini_errors import COUNT_MISMATCH
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(300)
HOST = "generativelanguage.googleapis.com"
STREAM = f"/v1beta/models/{gemini_cli.MODEL}:streamGenerateContent?alt=sse"
COUNT = f"/v1beta/models/{gemini_cli.MODEL}:countTokens"


@pytest.fixture
def upstream() -> Iterator[MockUpstream]:
    with MockUpstream(rules="by-host") as up:  # the redirect's original host picks the gemini rules
        yield up


@pytest.fixture
def session(tmp_path) -> GeminiSession:
    gemini_cli.binary()
    return GeminiSession(tmp_path / "home")


def test_a_two_call_image_turn_is_accepted_byte_for_byte(upstream, session, tmp_path) -> None:
    gemini_cli.queue_two_image_turn(upstream)
    with start_proxy(upstream, tmp_path / "conf") as proxy:
        run = session.run(proxy, TWO_IMAGES)
        sent = gemini_cli.client_sent(proxy)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.result["response"] == DONE
    seen = upstream.requests
    assert [(r.path, r.status, r.rules) for r in seen] == [(STREAM, 200, "gemini"), (COUNT, 200, "gemini"),
                                                           (STREAM, 200, "gemini")]
    assert [body for kind, body in sent if kind == "http"] == [r.body for r in seen]  # byte for byte
    assert all(r.headers["x-llmfix-test-original-host"] == HOST and r.headers["x-goog-api-key"] for r in seen)
    user, model, answers = seen[-1].json["contents"]
    issued = upstream.gemini.sent[0].issued  # the thought, the signed call a, call b
    assert model == {"role": "model", "parts": [
        {"functionCall": {"id": model["parts"][0]["functionCall"]["id"], "args": {"file_path": "a.png"},
                          "name": "read_file"}, "thoughtSignature": issued[1]["thoughtSignature"]},
        {"functionCall": {"id": model["parts"][1]["functionCall"]["id"], "args": {"file_path": "b.png"},
                          "name": "read_file"}}]}  # the thought summary is not replayed
    responses = [p["functionResponse"] for p in answers["parts"] if "functionResponse" in p]
    assert [r["id"] for r in responses] == [p["functionCall"]["id"] for p in model["parts"]]
    assert images_in(answers) == [png((255, 0, 0)), png((0, 255, 0))]
    assert user["role"] == "user" and TWO_IMAGES in [p.get("text") for p in user["parts"]]


def test_resume_after_a_tool_turn_sends_every_response_twice_and_is_rejected(upstream, session, tmp_path) -> None:
    gemini_cli.queue_two_image_turn(upstream)
    with start_proxy(upstream, tmp_path / "conf") as proxy:
        first = session.run(proxy, TWO_IMAGES)
        assert first.returncode == 0, first.stderr[-2000:]
        before = len(upstream.requests)
        upstream.gemini.queue(text_answer("The green one."), text_answer("unused"))
        resumed = session.run(proxy, "And which one is brighter?", resume=True)
        again = session.run(proxy, "Answer anything, please.", resume=True)
    assert resumed.returncode != 0 and again.returncode != 0
    assert resumed.result["error"]["code"] == 400 and COUNT_MISMATCH in resumed.result["error"]["message"]
    rejected = upstream.requests[before:]
    assert [(r.path, r.status, r.reason) for r in rejected] == [(STREAM, 400, "response-count")] * 2  # no retry
    contents = rejected[0].json["contents"]
    calls, answers = contents[1], contents[2]
    assert [p.get("thoughtSignature") for p in calls["parts"]] == ["skip_thought_signature_validator", None]
    ids = [p["functionResponse"]["id"] for p in answers["parts"] if "functionResponse" in p]
    assert ids == [p["functionCall"]["id"] for p in calls["parts"]] * 2  # 4 responses for 2 calls
    assert images_in(answers) == [png((255, 0, 0)), png((0, 255, 0))] * 2
    assert contents[3:] == [{"role": "model", "parts": [{"text": DONE}]},
                            {"role": "user", "parts": [{"text": "And which one is brighter?"}]}]
    assert rejected[1].json["contents"][:4] == contents[:4]  # the same history: every later turn fails alike
    assert upstream.gemini.pending == 2  # nothing was answered


@pytest.mark.parametrize("stream", [False, True], ids=["bare-holds-it", "streamed-control"])
def test_an_answer_streamed_over_seconds(upstream, session, tmp_path, stream: bool) -> None:
    text = "one two three four five six"
    upstream.gemini.queue(slow_text(text, events=6, seconds=5.0))
    with start_proxy(upstream, tmp_path / "conf", stream=stream) as proxy:
        run = session.run(proxy, "Say six words.", output="stream-json")
    assert run.returncode == 0, run.stderr[-2000:]
    deltas = [(at, e["content"]) for at, e in run.events() if e.get("type") == "message" and e.get(
        "role") == "assistant"]
    assert "".join(content for _, content in deltas) == text and len(deltas) == 6
    [request] = generations(upstream)
    assert request.status == 200
    spread = deltas[-1][0] - deltas[0][0]
    if stream:
        assert spread >= 3.0  # each event as the mock sent it, ~1 s apart
    else:
        assert spread < 1.0  # mitmdump held the whole answer: every delta arrived at once, after ~5 s
