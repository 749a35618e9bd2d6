"""Gemini's rejections, read in every envelope its doors use (``{"error": …}`` from the Gemini API and Vertex,
``[{"error": …}]`` from Code Assist and a ``streamGenerateContent`` without ``alt=sse``), with the exact texts of the
strict mock (tests/upstreams/gemini_errors.py); and what llmfix does with them: a gateway it has no profile for
learns that its calls need signatures, or that its tool schemas are held to Gemini's ``Schema`` (its paths prefixed
``request.`` inside Code Assist's envelope), and resends once, repaired."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.gemini import signature_facts
from llmfix.dialects.registry import GEMINI
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.retry import decide, rejections
from llmfix.retry.learned import LearnedQuirks
from tests.unit.dialects.gemini_session import capture, hear_sse, issued, raw, response, sse, taken, without_signatures
from tests.upstreams.gemini_errors import (
    CALL_PLACEMENT,
    CORRUPTED,
    COUNT_MISMATCH,
    VERTEX_INVALID_SIGNATURE,
    GeminiError,
    missing_signature,
)
from tests.upstreams.gemini_schema import check_tools
from tests.upstreams.gemini_signatures import SignatureLedger

SIGNATURES = (("gemini_thought_signatures", True),)
SCHEMAS = (("tool_schema_openapi", True),)
MCP = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": False,
       "properties": {"q": {"type": "string"}}, "required": ["q"]}


def schema_error(prefix: str) -> GeminiError:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": [{"functionDeclarations": [
        {"name": "read_file", "parameters": {"type": "object", "properties": {"p": {"type": "string"}}}},
        {"name": "search", "parameters": MCP}]}]}
    found = check_tools(body, prefix=prefix)
    assert found is not None
    return found


TEXTS = [
    (missing_signature("gemini", "read_file", 2), "gemini-signature-missing", SIGNATURES),
    (missing_signature("vertex", "read_file", 3), "gemini-signature-missing", SIGNATURES),
    (missing_signature("code-assist", "shell", 5), "gemini-signature-missing", SIGNATURES),
    (CORRUPTED, "gemini-signature-refused", ()),
    (VERTEX_INVALID_SIGNATURE, "gemini-signature-refused", ()),
    ("Invalid thought signature.", "gemini-signature-refused", ()),
    (COUNT_MISMATCH, "gemini-response-count", ()),
    (CALL_PLACEMENT, "gemini-call-placement", ()),
    (schema_error("").message, "gemini-schema", SCHEMAS),
    (schema_error("request.").message, "gemini-schema", SCHEMAS),
]


@pytest.mark.parametrize("backend, array", [("gemini", False), ("vertex", False), ("code-assist", True),
                                            ("gemini", True)])
@pytest.mark.parametrize("text, name, flags", TEXTS)
def test_each_text_is_read_in_each_envelope(text: str, name: str, flags: Any, backend: Any, array: bool) -> None:
    body = json.dumps(GeminiError(text, "x").body(backend, array=array)).encode()
    assert body.startswith(b"[") == array
    found = rejections.match("gemini", 400, body)
    assert found is not None and found.rule.name == name and found.flags == flags


def test_the_request_prefix_is_in_code_assist_s_text() -> None:
    assert "'request.tools[0].function_declarations[1].parameters'" in schema_error("request.").message


def test_other_texts_teach_nothing() -> None:
    for text in ("Request contains an invalid argument.", "Please use a valid role: user, model."):
        assert rejections.match("gemini", 400, json.dumps(GeminiError(text, "x").body("gemini")).encode()) is None
    assert rejections.match("gemini", 200, json.dumps(GeminiError(CORRUPTED, "x").body("gemini")).encode()) is None


def test_a_refusal_names_every_signature_of_the_request_but_the_dummies() -> None:
    body = capture("turn2")
    body["contents"][1]["parts"][1]["thoughtSignature"] = "skip_thought_signature_validator"
    assert signature_facts.signatures(body) == [issued()[0]["thoughtSignature"]]
    assert signature_facts.signatures({"request": body}) == [issued()[0]["thoughtSignature"]]


GATEWAY = "llm.gateway.test"


def settings(memory: Any) -> engine.Settings:
    return engine.Settings(quirks=LearnedQuirks(None, 3600), reasoning=memory)


async def resent_after(path: str, body: dict[str, Any], memory: Any, refuse: Any, backend: Any,
                       useful: tuple[tuple[str, bool], ...]) -> dict[str, Any]:
    """``body`` to the gateway: untouched up front (nothing learned yet); the mock's rejection (``refuse()``, in
    ``backend``'s envelope) is read, teaches ``useful`` and gives the resend, returned parsed."""
    req = engine.request(GEMINI, GATEWAY, 443, path, raw(body), None, None)
    assert (await decide.in_a_thread(req, settings(memory))).status == "untouched"
    rejection = refuse()
    assert rejection is not None
    found = rejections.match("gemini", 400, json.dumps(rejection.body(backend)).encode())
    assert found is not None
    d = await decide.decide(found, 400, req, raw(body), settings(memory))
    assert d.useful == list(useful) and d.outcome is not None and d.outcome.body is not None
    return json.loads(d.outcome.body)


async def test_a_gateway_learns_that_calls_need_signatures_and_resends_with_the_one_heard() -> None:
    """A gateway in front of Gemini, with a model alias that does not say Gemini 3: nothing up front; its
    missing-signature 400 teaches the flag, and the resend carries the signature its answer streamed."""
    path = "/v1beta/models/my-coder:streamGenerateContent?alt=sse"
    memory = SqliteReasoningStore(":memory:")
    hear_sse(memory, sse([response([p]) for p in issued()]), f"{GATEWAY}:443/gemini")
    body = without_signatures(capture("turn2"), 1)
    book = SignatureLedger()
    book.trust(*(p["thoughtSignature"] for p in issued()))
    resent = await resent_after(path, body, memory, lambda: book.check(
        body["contents"], backend="gemini", model="gemini-3.1-pro-preview"), "gemini", SIGNATURES)
    assert resent["contents"][1]["parts"][0]["thoughtSignature"] == issued()[0]["thoughtSignature"]
    assert book.check(resent["contents"], backend="gemini", model="gemini-3.1-pro-preview") is None
    taken(resent)


async def test_a_code_assist_gateway_learns_the_schema_rule_from_a_request_prefixed_path() -> None:
    inner = {"contents": [{"role": "user", "parts": [{"text": "search"}]}],
             "tools": [{"functionDeclarations": [{"name": "search", "description": "MCP", "parameters": MCP}]}]}
    envelope = {"model": "gemini-2.5-pro", "project": "p-1", "request": inner}
    resent = await resent_after("/v1internal:generateContent", envelope, SqliteReasoningStore(":memory:"),
                                lambda: check_tools(inner, prefix="request.", vertex=True), "code-assist", SCHEMAS)
    assert {k: v for k, v in resent.items() if k != "request"} == {"model": "gemini-2.5-pro", "project": "p-1"}
    assert resent["request"]["tools"][0]["functionDeclarations"][0] == {"name": "search", "description": "MCP",
                                                                        "parametersJsonSchema": MCP}
    taken(resent["request"], backend="code-assist", prefix="request.")
