"""``llmfix -- gemini …``: the real Gemini CLI 0.61.0 run by the real ``llmfix`` console script, with the CLI's
defaults, as the README's quick start says.

The CLI gets only what a user's shell would hold (a throw-away ``HOME`` with the settings of tests/e2e/gemini_cli.py,
a fake ``GEMINI_API_KEY``, no proxy or CA variable, no ``NO_PROXY``, ``gemini`` on ``PATH``); the launcher adds
``HTTPS_PROXY`` and ``NODE_EXTRA_CA_CERTS``, which the CLI honours (its undici proxy agent; Node's extra CA). The
launcher's mitmdump gets the loopback redirect (``-s tests/e2e/loopback_upstream.py``, before ``--``), which sends
``generativelanguage.googleapis.com`` to the strict Gemini mock: every request the mock records came through llmfix,
over HTTPS trusting llmfix's CA. Each run is bounded (its process group killed after ``TIMEOUT`` seconds; llmfix's
mitmdump dies with the launcher).

Skipped when the CLI is not installed (``.ci/install-gemini``), failed instead under CI.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import gemini_cli
from tests.e2e.gemini_cli import DONE, KEY, MODEL, TWO_IMAGES, GeminiSession, Run, images_in, png, run_bounded
from tests.e2e.test_launcher import processes_mentioning, redirect
from tests.upstreams.gemini_canned import text_answer
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(300)
LLMFIX = Path(sys.executable).parent / "llmfix"
HOST = "generativelanguage.googleapis.com"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
TIMEOUT = 150.0
HELLO = "Hello from the mock Gemini."


@pytest.fixture
def upstream() -> Iterator[MockUpstream]:
    with MockUpstream(rules="by-host") as up:  # the redirect's original host picks the gemini rules
        yield up


@pytest.fixture
def session(tmp_path: Path) -> GeminiSession:
    gemini_cli.binary()
    return GeminiSession(tmp_path / "home")


def launch(session: GeminiSession, upstream: MockUpstream, confdir: Path, log: Path, *client: str) -> Run:
    """``llmfix [options] -- gemini CLIENT…`` in the session's project folder, from a shell holding no proxy or CA
    variable, ``gemini`` found on ``PATH`` as a user's would be."""
    env = session.env(None, None)
    env["PATH"] = f"{gemini_cli.binary().parent}{os.pathsep}{env.get('PATH', '')}"
    options = ["--set", f"confdir={confdir}", "--set", "llmfix_memory=:memory:", "--set", f"llmfix_log={log}",
               *redirect(upstream)]
    command = [str(LLMFIX), *options, "--", "gemini", "-m", session.model, "--skip-trust", "-o", "json", *client]
    return run_bounded(command, session.project, env, TIMEOUT)


def summary(run: Run) -> str:
    """The launcher's last line on stderr."""
    lines = run.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def test_the_quick_start_answers_through_llmfix(upstream, session, confdir, tmp_path) -> None:
    upstream.gemini.queue(text_answer(HELLO, chunks=3))
    log = tmp_path / "changes.jsonl"
    run = launch(session, upstream, confdir, log, "-p", "Say hello.")
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    assert run.result["response"] == HELLO
    [request] = upstream.requests  # the settings turn off telemetry and update checks: one request, the turn
    assert (request.path, request.status, request.rules) == (STREAM, 200, "gemini")
    assert request.headers["x-llmfix-test-original-host"] == HOST  # through llmfix's proxy, trusting its CA
    assert request.headers["x-goog-api-key"] == KEY  # the CLI's default auth: its key, in the header
    assert re.fullmatch(rf"llmfix: 1 request \(1 to LLM APIs\), 0 repaired; change log: {re.escape(str(log))}; "
                        r"llmfix output: \S+mitmdump\.log", summary(run)), run.stderr[-3000:]
    assert "NO_PROXY" not in run.stderr  # none set: nothing goes around llmfix
    assert KEY not in run.stderr and KEY not in run.stdout
    assert not log.exists() or not log.read_text()  # a valid turn: nothing repaired, nothing logged
    assert processes_mentioning(str(log)) == []  # llmfix stopped with the client


def test_a_two_call_image_turn_goes_through_llmfix_untouched(upstream, session, confdir, tmp_path) -> None:
    gemini_cli.queue_two_image_turn(upstream)
    log = tmp_path / "changes.jsonl"
    run = launch(session, upstream, confdir, log, "-p", TWO_IMAGES)
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    assert run.result["response"] == DONE
    seen = [(r.path.split("?")[0].rsplit(":", 1)[-1], r.status) for r in upstream.requests]
    assert seen == [("streamGenerateContent", 200), ("countTokens", 200), ("streamGenerateContent", 200)]
    assert all(r.headers["x-llmfix-test-original-host"] == HOST for r in upstream.requests)
    _, model, answers = upstream.requests[-1].json["contents"]
    issued = upstream.gemini.sent[0].issued  # the thought, the signed first call, its sibling
    assert model["parts"][0]["thoughtSignature"] == issued[1]["thoughtSignature"]  # signed by the mock, accepted
    assert images_in(answers) == [png((255, 0, 0)), png((0, 255, 0))]
    assert "llmfix: 3 requests (3 to LLM APIs), 0 repaired;" in summary(run), run.stderr[-3000:]
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert records == []  # Gemini CLI's own valid turns leave byte for byte: nothing to log
