"""A rejection inside a 200 stream, end to end: Google's Python SDK (``google-genai``) through a real mitmdump with
llmfix against the strict Gemini mock, which answers the first streamed request ``200 text/event-stream`` with one
event and then Gemini's bare ``{"error": …}`` chunk (the missing-signature 400 of the Gemini API).

The model is an alias (``gemini-flash-latest``): llmfix cannot tell from its name that it validates thought
signatures, so the first request leaves as the client sent it. The SDK raises the error it finds in the stream
(``ClientError`` 400); llmfix cannot resend an answer already streaming, but learns what that 400 teaches for the
upstream (``gemini_thought_signatures``) and says so in one line naming the flow and the rule. The client's next
request — the same history, still without a signature — reaches the upstream repaired (Google's documented dummy on
the first call of the current turn): two upstream requests in all, no resend.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from google.genai import types

from tests.e2e import genai_client
from tests.e2e.gemini_cli import client_sent, start_proxy
from tests.e2e.harness import Mitmdump
from tests.upstreams.gemini_canned import text_answer
from tests.upstreams.gemini_errors import GeminiError, missing_signature
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(120)
ALIAS = "gemini-flash-latest"
HOST = "generativelanguage.googleapis.com"
DUMMY = "skip_thought_signature_validator"
MISSING = missing_signature("gemini", "read_file", 2)
DONE = "a.md says hi"
LINE = (r"llmfix: [0-9a-f]{8} POST generativelanguage\.googleapis\.com/v1\w*/models/gemini-flash-latest:"
        r"streamGenerateContent rejected inside its 200 stream: 400 gemini-signature-missing .*\n")


@pytest.fixture
def upstream() -> Iterator[MockUpstream]:
    with MockUpstream(rules="by-host") as up:
        yield up


@pytest.fixture
def proxy(upstream: MockUpstream, tmp_path) -> Iterator[Mitmdump]:
    with start_proxy(upstream, tmp_path / "conf", llmfix=True) as p:
        yield p


def unsigned_history() -> list[types.Content]:
    """A turn whose model step called ``read_file`` and lost its signature (converted through another API, say)."""
    call = types.Part(function_call=types.FunctionCall(name="read_file", args={"file_path": "a.md"}))
    answer = types.Part(function_response=types.FunctionResponse(name="read_file", response={"output": "hi"}))
    return [types.Content(role="user", parts=[types.Part(text="Read a.md.")]),
            types.Content(role="model", parts=[call]), types.Content(role="user", parts=[answer])]


def first_call(body: bytes | dict) -> dict:
    data = json.loads(body) if isinstance(body, bytes) else body
    return data["contents"][1]["parts"][0]


def test_the_rejection_inside_the_stream_is_learned_and_the_next_request_is_repaired(upstream, proxy) -> None:
    gc = genai_client.client(proxy)
    rejected = text_answer("never finished", chunks=3).with_error(GeminiError(MISSING, "signature-missing"), after=1)
    upstream.gemini.queue(rejected, text_answer(DONE))

    stream = gc.models.generate_content_stream(model=ALIAS, contents=unsigned_history(), config=genai_client.config())
    status, message = genai_client.rejection(lambda: list(stream))
    assert (status, message) == (400, MISSING)  # the SDK found Gemini's error in the 200 stream
    line = proxy.wait_for_output(re.compile(LINE), timeout=30).group(0)
    assert "→ learned gemini_thought_signatures=true for generativelanguage.googleapis.com:443 (gemini); " \
           "not resent (the answer was already streaming to the client)" in line

    answer = genai_client.turn2(gc, ALIAS, unsigned_history())  # the client sends the same history again
    assert answer.text == DONE

    first, second = upstream.requests  # no resend: one request per client request
    assert (first.status, second.status) == (200, 200)
    assert "thoughtSignature" not in first_call(first.json)  # the first left as the client sent it
    assert first_call(second.json)["thoughtSignature"] == DUMMY  # the next one repaired up front
    sent = [body for kind, body in client_sent(proxy) if kind == "http"]
    assert len(sent) == 2 and all("thoughtSignature" not in first_call(b) for b in sent)  # llmfix's doing
    records = [json.loads(x) for x in (proxy.confdir / "changes.jsonl").read_text().splitlines()]
    assert [(r.get("event"), r.get("repair")) for r in records] == [("stream-rejection", None),
                                                                      (None, "restore-thought-signatures")]
    assert records[0]["learned"] == [{"flag": "gemini_thought_signatures", "value": True, "new": True}]
    assert proxy.output().count("inside its 200 stream") == 1
