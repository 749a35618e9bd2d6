"""A known rejection inside a 200 SSE answer (Gemini's bare ``{"error": …}`` chunk) in mitmproxy's test harness: the
stream passes byte for byte, the rejection teaches what its 400 would (a flag, or facts), one line names the flow and
the rule, and the next request is repaired up front. The live path (a real mitmdump, google-genai):
tests/e2e/test_stream_rejection.py."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http
from mitmproxy.test import tutils

from llmfix.proxy import LLMFix
from llmfix.retry.addon import Retry
from llmfix.retry.streamed import SEEN, status_of
from tests.conftest import llmfix_with, make_flow
from tests.upstreams.gemini_canned import sse_text
from tests.upstreams.gemini_errors import CORRUPTED, GeminiError, missing_signature

HOST = "generativelanguage.googleapis.com"
QUERY_KEY = "query-key-not-for-any-log-0123"
ALIAS = "gemini-flash-latest"  # an alias: llmfix cannot tell it is a Gemini 3 model
DUMMY = "skip_thought_signature_validator"
ANSWER = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}, "index": 0}]}
MISSING = GeminiError(missing_signature("gemini", "read_file", 2), "signature-missing").body("gemini")


def history(signature: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"functionCall": {"name": "read_file", "args": {"file_path": "a.md"}}}
    if signature:
        call["thoughtSignature"] = signature
    return {"contents": [
        {"role": "user", "parts": [{"text": "Read a.md."}]},
        {"role": "model", "parts": [call]},
        {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "hi"}}}]},
    ]}


def gemini_flow(body: dict[str, Any], model: str = ALIAS) -> http.HTTPFlow:
    path = f"/v1beta/models/{model}:streamGenerateContent?alt=sse&key={QUERY_KEY}"
    return make_flow(body, host=HOST, path=path, headers={"x-goog-api-key": "header-key-not-for-any-log-4567"})


async def streamed(fix: LLMFix, retry: Retry, f: http.HTTPFlow, text: str, step: int = 9) -> bytes:
    """Send ``f`` through llmfix, answer it 200 with ``text`` as an SSE stream fed in ``step``-byte chunks, end it
    (the response hook); what the client received."""
    await fix.request(f)
    f.response = tutils.tresp(status_code=200, content=b"", headers=((b"content-type", b"text/event-stream"),))
    fix.responseheaders(f)
    stream = f.response.stream
    assert callable(stream)
    data, out = text.encode(), b""
    for i in range(0, len(data), step):
        out += stream(data[i:i + step])
    out += stream(b"")
    fix.response(f)
    await retry.response(f)
    return out


@pytest.fixture
def addons(tmp_path: Path):
    with llmfix_with(Retry) as (fix, retry, tctx):
        tctx.configure(fix, llmfix_log=str(tmp_path / "changes.jsonl"))
        yield fix, retry, tctx


@pytest.mark.parametrize(("event", "status"), [
    (b'{"error": {"code": 400, "message": "x"}}', 400),
    (b'[{"error": {"code": "400", "message": "x"}}]', 400),
    (b'{"error": {"code": 429}}', 429),
    (b'{"error": {"message": "no code"}}', None),
    (b'{"error": {"code": true}}', None),
    (b'{"error": {"code": 7}}', None),
    (b"not json", None),
])
def test_the_status_an_error_event_states(event: bytes, status: int | None) -> None:
    assert status_of(event) == status


async def test_a_missing_signature_inside_the_stream_teaches_the_flag_and_the_next_request_is_repaired(
        addons, caplog, tmp_path) -> None:
    fix, retry, _ = addons
    f = gemini_flow(history())
    text = sse_text([ANSWER], error=MISSING)
    with caplog.at_level(logging.INFO, logger="llmfix"):
        got = await streamed(fix, retry, f, text)
    assert got == text.encode()  # the stream reached the client byte for byte, the error chunk included
    assert "llmfix" not in f.metadata or not f.metadata["llmfix"].get("changes")  # the request left untouched
    assert [(q.host, q.flag, q.value) for q in fix.learned()] == [(HOST, "gemini_thought_signatures", True)]
    [line] = [r.getMessage() for r in caplog.records if "inside its 200 stream" in r.getMessage()]
    assert line.startswith(f"llmfix: {f.id[:8]} POST {HOST}/v1beta/models/{ALIAS}:streamGenerateContent "
                           "rejected inside its 200 stream: 400 gemini-signature-missing \"Function call is missing")
    assert line.endswith("→ learned gemini_thought_signatures=true for generativelanguage.googleapis.com:443 (gemini); "
                         "not resent (the answer was already streaming to the client): the next request is repaired "
                         "up front")
    assert f.comment.endswith("rejected inside its 200 stream (gemini-signature-missing) → learned "
                              "gemini_thought_signatures=true")
    [record] = [json.loads(x) for x in (tmp_path / "changes.jsonl").read_text().splitlines()]
    assert record["event"] == "stream-rejection" and record["rejection"] == "gemini-signature-missing"
    assert record["resent"] is False and record["learned"] == [
        {"flag": "gemini_thought_signatures", "value": True, "new": True}]
    assert "key" not in record["path"] and QUERY_KEY not in caplog.text

    again = gemini_flow(history())
    await fix.request(again)  # the client's next request: repaired before it leaves
    assert again.metadata["llmfix"]["repairs"] == ["restore-thought-signatures"]
    assert json.loads(again.request.content)["contents"][1]["parts"][0]["thoughtSignature"] == DUMMY


async def test_a_refused_signature_inside_the_stream_teaches_the_facts(addons, caplog) -> None:
    fix, retry, _ = addons
    foreign = "Zm9yZWlnbi1zaWduYXR1cmUtYnl0ZXM="
    corrupted = GeminiError(CORRUPTED, "signature-invalid").body("gemini")
    f = gemini_flow(history(foreign), model="gemini-3.1-pro-preview")
    with caplog.at_level(logging.INFO, logger="llmfix"):
        await streamed(fix, retry, f, sse_text([], error=corrupted), step=4)
    assert "rejected inside its 200 stream: 400 gemini-signature-refused" in caplog.text
    assert fix.learned() == []  # facts, not a flag
    again = gemini_flow(history(foreign), model="gemini-3.1-pro-preview")
    await fix.request(again)
    assert json.loads(again.request.content)["contents"][1]["parts"][0]["thoughtSignature"] == DUMMY


async def test_report_mode_learns_nothing_and_says_what_it_would(addons, caplog) -> None:
    fix, retry, tctx = addons
    tctx.configure(fix, llmfix_mode="report")
    f = gemini_flow(history())
    with caplog.at_level(logging.INFO, logger="llmfix"):
        await streamed(fix, retry, f, sse_text([ANSWER], error=MISSING))
    assert "llmfix (report): " in caplog.text and "report mode: would learn it for the next request" in caplog.text
    assert fix.learned() == []
    assert f.comment.endswith("(gemini-signature-missing) → would have learned gemini_thought_signatures=true")


@pytest.mark.parametrize("case", ["retry-off", "unknown-text", "not-an-error", "offline"])
async def test_what_is_left_alone(addons, caplog, case: str) -> None:
    fix, retry, tctx = addons
    error = MISSING
    if case == "retry-off":
        tctx.configure(retry, llmfix_retry=False)
    elif case == "unknown-text":
        error = {"error": {"code": 400, "message": "Something else went wrong.", "status": "INVALID_ARGUMENT"}}
    f = gemini_flow(history())
    if case == "offline":
        f.live = False
    text = sse_text([ANSWER], error=None if case == "not-an-error" else error)
    with caplog.at_level(logging.INFO, logger="llmfix"):
        assert await streamed(fix, retry, f, text) == text.encode()
    assert "inside its 200 stream" not in caplog.text and SEEN not in f.metadata and fix.learned() == []


async def test_a_failing_watcher_never_breaks_the_stream(addons, caplog) -> None:
    fix, retry, _ = addons

    def broken(flow: http.HTTPFlow, event: bytes) -> None:
        raise RuntimeError("watcher broke")

    fix.watch_stream_errors(broken)
    f = gemini_flow(history())
    text = sse_text([ANSWER], error=MISSING)
    with caplog.at_level(logging.INFO, logger="llmfix"):
        assert await streamed(fix, retry, f, text, step=3) == text.encode()
    assert caplog.text.count("an error inside the streamed answer was not read: RuntimeError: watcher broke") == 1
    assert [q.flag for q in fix.learned()] == ["gemini_thought_signatures"]  # the other watcher still learned
