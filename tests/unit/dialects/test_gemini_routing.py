"""Which requests llmfix reads as Gemini's native API, and what their path says: the Gemini API (``/v1beta/`` and the
``/v1/`` google-genai uses), Vertex's publisher models, Code Assist's ``v1internal`` methods with the request in its
envelope, any gateway path ending in those methods with a ``contents`` body; the model named in the path (or Code
Assist's envelope), ``countTokens`` read as a count. Each then gets the repairs of its upstream's profile."""

from __future__ import annotations

import json

import pytest

from llmfix import engine, route
from llmfix.dialects.registry import CHAT, GEMINI
from tests.unit.dialects.gemini_session import (
    CA_STREAM,
    CODE_ASSIST,
    DUMMY,
    capture,
    run,
    sent,
    taken,
    without_signatures,
)

M = "gemini-3-pro-preview"
VERTEX = f"/v1/projects/my-project/locations/us-central1/publishers/google/models/{M}"
CASES = [
    # (host, path, profile, model in the path, counts only)
    ("generativelanguage.googleapis.com", f"/v1beta/models/{M}:generateContent", "gemini", M, False),
    ("generativelanguage.googleapis.com", f"/v1beta/models/{M}:streamGenerateContent?alt=sse", "gemini", M, False),
    ("generativelanguage.googleapis.com", f"/v1/models/{M}:streamGenerateContent?alt=sse", "gemini", M, False),
    ("generativelanguage.googleapis.com", f"/v1beta/models/{M}:countTokens", "gemini", M, True),
    ("us-central1-aiplatform.googleapis.com", f"{VERTEX}:generateContent", "vertex", M, False),
    ("aiplatform.googleapis.com", f"{VERTEX}:streamGenerateContent?alt=sse", "vertex", M, False),
    ("cloudcode-pa.googleapis.com", "/v1internal:streamGenerateContent?alt=sse", "code-assist", None, False),
    ("cloudcode-pa.googleapis.com", "/v1internal:generateContent", "code-assist", None, False),
    ("cloudcode-pa.googleapis.com", "/v1internal:countTokens", "code-assist", None, True),
    ("llm.gateway.test", f"/proxy/google/v1beta/models/{M}:streamGenerateContent?alt=sse", "spec", M, False),
    ("llm.gateway.test", f"/gemini/models/{M}:generateContent", "spec", M, False),
]


@pytest.mark.parametrize("host, path, profile, model, counts", CASES)
def test_the_path_routes_to_gemini_and_says_the_model(host: str, path: str, profile: str, model: str | None,
                                                      counts: bool) -> None:
    assert route.dialect_for("POST", path, "application/json") is GEMINI
    req = engine.request(GEMINI, host, 443, path, b"{}", None, None)
    assert (req.model, req.counts_only) == (model, counts)
    assert run(capture("turn1"), host=host, path=path).profile == profile


@pytest.mark.parametrize("path", ["/v1beta/models", f"/v1beta/models/{M}", f"/v1beta/models/{M}:embedContent",
                                  "/v1internal:loadCodeAssist"])
def test_other_methods_are_not_read(path: str) -> None:
    assert route.dialect_for("POST", path, "application/json") is None
    assert route.dialect_for("GET", f"/v1beta/models/{M}:generateContent", None) is None


def test_the_openai_compatible_door_is_chat() -> None:
    assert route.dialect_for("POST", "/v1beta/openai/chat/completions", "application/json") is CHAT


@pytest.mark.parametrize("host, path", [(h, p) for h, p, _, _, counts in CASES if not counts
                                        and not h.startswith("cloudcode")])
def test_each_gets_the_repairs(host: str, path: str) -> None:
    body = without_signatures(capture("turn2"), 1)
    out = sent(run(body, host=host, path=path), body)
    assert out["contents"][1]["parts"][0]["thoughtSignature"] == DUMMY  # the model is Gemini 3 (the path says)
    taken(out, backend="vertex" if "aiplatform" in host else "gemini")


@pytest.mark.parametrize("model, repaired", [("gemini-3-flash-preview", True), ("gemini-2.5-pro", False)])
def test_code_assist_s_envelope_names_the_model_and_is_repaired_inside(model: str, repaired: bool) -> None:
    inner = without_signatures(capture("turn2"), 1)
    envelope = {"model": model, "project": "my-project-123", "user_prompt_id": "p-1", "request": inner}
    data = json.dumps(envelope, separators=(",", ":")).encode()
    outcome = run(data, host=CODE_ASSIST, path=CA_STREAM)
    assert (outcome.status == "repaired") is repaired
    if repaired:
        assert outcome.body is not None
        assert outcome.body.startswith(data[:data.index(b'"request":') + len(b'"request":')])
        out = json.loads(outcome.body)
        assert out["request"]["contents"][1]["parts"][0]["thoughtSignature"] == DUMMY
        taken(out["request"], backend="code-assist", prefix="request.")


def test_a_body_that_is_not_a_gemini_request_passes() -> None:
    other = {"model": M, "messages": [{"role": "user", "content": "hi"}]}
    outcome = run(other, host="llm.gateway.test", path=f"/v1beta/models/{M}:generateContent")
    assert outcome.status in ("untouched", "failed") and outcome.body is None
