"""The real Gemini CLI 0.61.0 through a real mitmdump WITH llmfix against the strict Gemini mock (the bare-proxy
controls are tests/e2e/test_gemini_cli.py; the helpers tests/e2e/gemini_cli.py). One llmfix proxy for the module.

- A two-call image turn through llmfix: every request accepted, and what reached the mock is byte for byte what the
  CLI sent — llmfix changes nothing on a valid session, and its change log stays empty.
- ``--resume latest`` after that turn (through a bare proxy: the count 400, every response sent twice): through
  llmfix the resumed turn is answered. The CLI still sends each response twice with its image; the mock gets one per
  call, one image each, and the rest of the body as sent — Google's dummy signature on the first call included
  (restore-thought-signatures has nothing to do: that call turn is no longer the current turn, and a signature a
  request carries is kept). The change log names drop-repeated-responses alone, with the model, and no image bytes.
  A second resume is answered the same way.
- An answer streamed over ~3 s reaches the CLI event by event: its first delta is read before the mock even began
  to send the last event (the headers came before it), while through a bare proxy the first delta comes only after
  the last event was sent (mitmdump held the answer).

Skipped when the CLI is not installed (``.ci/install-gemini``), failed instead under CI.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e import gemini_cli
from tests.e2e.codex_cli import changes
from tests.e2e.gemini_cli import DONE, TWO_IMAGES, GeminiSession, Run, client_sent, images_in, png, start_proxy
from tests.e2e.harness import Mitmdump
from tests.upstreams.gemini_canned import slow_text, text_answer
from tests.upstreams.mock import MockUpstream, RecordedRequest

pytestmark = pytest.mark.timeout(300)
HOST = "generativelanguage.googleapis.com"
STREAM = f"/v1beta/models/{gemini_cli.MODEL}:streamGenerateContent?alt=sse"
COUNT = f"/v1beta/models/{gemini_cli.MODEL}:countTokens"
DUMMY = "skip_thought_signature_validator"
RED, GREEN = png((255, 0, 0)), png((0, 255, 0))


@dataclass
class Turn:
    """One CLI run through the module's proxy and what it caused: the mock's requests, what the CLI sent (the
    probe, before llmfix), llmfix's change records, all from this run only."""

    run: Run
    seen: list[RecordedRequest]
    sent: list[bytes]
    changed: list[dict[str, Any]]


def turn(session: GeminiSession, upstream: MockUpstream, proxy: Mitmdump, prompt: str, **kwargs: Any) -> Turn:
    requests, sent, changed = len(upstream.requests), len(client_sent(proxy)), len(changes(proxy))
    run = session.run(proxy, prompt, **kwargs)
    return Turn(run, upstream.requests[requests:], [body for kind, body in client_sent(proxy)[sent:] if kind == "http"],
                changes(proxy)[changed:])


@pytest.fixture(scope="module")
def upstream() -> Iterator[MockUpstream]:
    with MockUpstream(rules="by-host") as up:  # the redirect's original host picks the gemini rules
        yield up


@pytest.fixture(scope="module")
def proxy(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    gemini_cli.binary()
    with start_proxy(upstream, tmp_path_factory.mktemp("gemini-llmfix-conf"), llmfix=True) as p:
        yield p


@pytest.fixture(scope="module")
def image_turn(upstream: MockUpstream, proxy: Mitmdump,
               tmp_path_factory: pytest.TempPathFactory) -> tuple[GeminiSession, Turn]:
    """The two-call image turn through llmfix, in a session the resume test continues."""
    session = GeminiSession(tmp_path_factory.mktemp("gemini-llmfix") / "home")
    gemini_cli.queue_two_image_turn(upstream)
    return session, turn(session, upstream, proxy, TWO_IMAGES)


def test_a_valid_two_call_image_turn_passes_through_llmfix_unchanged(upstream, image_turn) -> None:
    _, first = image_turn
    assert first.run.returncode == 0, first.run.stderr[-2000:]
    assert first.run.result["response"] == DONE
    assert [(r.path, r.status, r.headers["x-llmfix-test-original-host"]) for r in first.seen] == [
        (STREAM, 200, HOST), (COUNT, 200, HOST), (STREAM, 200, HOST)]
    assert first.sent == [r.body for r in first.seen]  # byte for byte what the CLI sent
    assert first.changed == []  # and nothing in llmfix's change log
    _, model, answers = first.seen[-1].json["contents"]  # the turn-2 request: both calls answered, both images
    assert [p["functionResponse"]["id"] for p in answers["parts"] if "functionResponse" in p] == [
        p["functionCall"]["id"] for p in model["parts"]]
    assert images_in(answers) == [RED, GREEN]


def test_resume_after_the_tool_turn_is_answered_through_llmfix(upstream, proxy, image_turn) -> None:
    session, first = image_turn
    assert first.run.returncode == 0, first.run.stderr[-2000:]
    upstream.gemini.queue(text_answer("The green one."), text_answer("Still the green one."))
    resumed = turn(session, upstream, proxy, "And which one is brighter?", resume=True)
    again = turn(session, upstream, proxy, "Answer anything, please.", resume=True)
    for done, answer in ((resumed, "The green one."), (again, "Still the green one.")):
        assert done.run.returncode == 0, done.run.stderr[-2000:]
        assert done.run.result["response"] == answer
        [seen] = done.seen
        assert (seen.path, seen.status, seen.reason) == (STREAM, 200, None)
        [sent] = done.sent
        cli = json.loads(sent)
        calls, answers = cli["contents"][1], cli["contents"][2]
        ids = [p["functionCall"]["id"] for p in calls["parts"]]
        # the CLI still sends every response twice, each with its image: the bug the bare test shows
        assert [p["functionResponse"]["id"] for p in answers["parts"] if "functionResponse" in p] == ids * 2
        assert images_in(answers) == [RED, GREEN] * 2
        assert calls["parts"][0]["thoughtSignature"] == DUMMY and "thoughtSignature" not in calls["parts"][1]
        # the mock got one response per call with its one image, and everything else exactly as the CLI sent it
        kept = {**answers, "parts": answers["parts"][:4]}
        assert seen.json == {**cli, "contents": [*cli["contents"][:2], kept, *cli["contents"][3:]]}
        assert [p["functionResponse"]["id"] for p in kept["parts"] if "functionResponse" in p] == ids
        assert images_in(kept) == [RED, GREEN]
        [record] = done.changed
        assert (record["repair"], record["host"], record["model"], record["mode"]) == (
            "drop-repeated-responses", HOST, gemini_cli.MODEL, "repair")
        assert record["location"] == "contents[2].parts[4]…[5], contents[2].parts[6]…[7]"
    assert again.seen[0].json["contents"][:5] == resumed.seen[0].json["contents"][:5]  # the same history, plus
    assert again.seen[0].json["contents"][5:] == [{"role": "model", "parts": [{"text": "The green one."}]},
                                                  {"role": "user", "parts": [{"text": "Answer anything, please."}]}]
    assert upstream.gemini.pending == 0
    logged = (proxy.confdir / "changes.jsonl").read_text() + proxy.output()
    for secret in (base64.b64encode(RED).decode(), base64.b64encode(GREEN).decode(), gemini_cli.KEY):
        assert secret not in logged


def first_delta(run: Run, started: float) -> tuple[float, list[str]]:
    """When the CLI printed its first assistant delta (on the test's clock, ``started`` the run's start), and all
    its deltas' texts."""
    deltas = [(at, e["content"]) for at, e in run.events() if e.get("type") == "message" and e.get(
        "role") == "assistant"]
    assert deltas, run.stdout[-2000:]
    return started + deltas[0][0], [content for _, content in deltas]


@pytest.mark.parametrize("through", ["llmfix", "bare"])
def test_an_answer_streamed_over_seconds_reaches_the_cli_event_by_event(upstream, proxy, tmp_path,
                                                                         through: str) -> None:
    text = "one two three four five six"
    answer = slow_text(text, events=6, seconds=3.0)  # 0.6 s apart: the order, not a speed, is checked
    upstream.gemini.queue(answer)
    session = GeminiSession(tmp_path / "home")
    requests = len(upstream.requests)
    if through == "llmfix":
        before = time.monotonic()
        run = session.run(proxy, "Say six words.", output="stream-json")
        started = time.monotonic() - run.seconds  # not before the run began: the read times below are not early
    else:
        with start_proxy(upstream, tmp_path / "conf") as bare:
            before = started = time.monotonic()  # not after the run began: the read times below are not late
            run = session.run(bare, "Say six words.", output="stream-json")
    assert run.returncode == 0, run.stderr[-2000:]
    read, deltas = first_delta(run, started)
    assert "".join(deltas) == text and len(deltas) == 6
    assert [(r.path, r.status) for r in upstream.requests[requests:]] == [(STREAM, 200)]
    last = answer.sending_at[-1]  # when the mock began to send its last event
    assert before < answer.sending_at[0] and len(answer.sending_at) >= 6
    margin = f"first delta read {read - last:+.2f} s after the last event began to be sent"
    if through == "llmfix":
        assert read < last, margin  # the first event (so the headers too) reached the CLI before the last was sent
    else:
        assert read > last, margin  # the control: mitmdump held the answer until it ended
