"""Gemini requests through ``engine.process`` the way the proxy hands them over (host, port, path and body), the
Gemini CLI captures (tests/fixtures/gemini-cli/), and llmfix's memory hearing Gemini's answers to them."""

from __future__ import annotations

import copy
import json
from typing import Any

from llmfix import engine
from llmfix.dialects.registry import GEMINI
from llmfix.memory.learn import StreamLearner, learn_json_response
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import ToolCall
from tests.conftest import fixture_json
from tests.upstreams.gemini_errors import Backend
from tests.upstreams.gemini_rules import check

HOST = "generativelanguage.googleapis.com"
MODEL = "gemini-3.1-pro-preview"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
GENERATE = f"/v1beta/models/{MODEL}:generateContent"
COUNT = f"/v1beta/models/{MODEL}:countTokens"
UP = f"{HOST}:443/gemini"
"""The upstream llmfix's memory keys what the Gemini API issued by."""
DUMMY = "skip_thought_signature_validator"
CODE_ASSIST = "cloudcode-pa.googleapis.com"
CA_STREAM = "/v1internal:streamGenerateContent?alt=sse"
"""Code Assist (Gemini CLI with a Google login): its host and streaming method."""


def capture(name: str) -> dict[str, Any]:
    """A Gemini CLI 0.61.0 capture (``turn1``, ``turn2``, ``count_tokens``), a fresh copy."""
    return copy.deepcopy(fixture_json(f"gemini-cli/{name}_request.json"))


def issued() -> list[dict[str, Any]]:
    """The parts the Gemini mock streamed for turn 1: two ``read_file`` calls, each with its signature."""
    return copy.deepcopy(fixture_json("gemini-cli/turn1_meta.json")["answer_parts"])


def raw(body: dict[str, Any] | bytes) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def run(body: dict[str, Any] | bytes, *, host: str = HOST, path: str = STREAM, store: Any = None,
        port: int = 443) -> engine.Outcome:
    """One request through the engine, as the proxy hands it over (the path names the model and the method)."""
    return engine.process(engine.request(GEMINI, host, port, path, raw(body), None, None),
                          engine.Settings(reasoning=store))


def sent(outcome: engine.Outcome, body: dict[str, Any]) -> dict[str, Any]:
    """What reaches the upstream: the repaired body, or the body itself when nothing changed."""
    assert outcome.status in ("untouched", "repaired"), outcome.reason
    return json.loads(outcome.body) if outcome.body is not None else body


def taken(body: dict[str, Any], backend: Backend = "gemini", prefix: str = "") -> None:
    """The strict Gemini mock (tests/upstreams/gemini_rules.py) takes ``body``."""
    rejection = check(body, backend=backend, prefix=prefix)
    assert rejection is None, rejection.message


def store() -> SqliteReasoningStore:
    return SqliteReasoningStore(":memory:")


def response(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``GenerateContentResponse`` holding ``parts``."""
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}], "modelVersion": MODEL}


def sse(events: list[Any]) -> str:
    """Events as Gemini streams them with ``alt=sse``."""
    return "".join(f"data: {json.dumps(e)}\r\n\r\n" for e in events)


def hear_sse(memory: Any, text: str, upstream: str = UP) -> list[ToolCall]:
    """llmfix's memory heard this streamed answer (as the proxy's learner feeds it); the tool calls it read."""
    calls: list[ToolCall] = []
    learner = StreamLearner("gemini", calls.extend, on_reasoning=memory.note, upstream=upstream)
    learner.feed(text.encode())
    learner.feed(b"")
    return calls


def hear_json(memory: Any, body: Any, upstream: str = UP) -> list[ToolCall]:
    """llmfix's memory heard this JSON answer (an object, or the array ``streamGenerateContent`` answers without
    ``alt=sse``); the tool calls it read."""
    return learn_json_response("gemini", json.dumps(body).encode(), upstream=upstream, on_reasoning=memory.note)


def without_signatures(body: dict[str, Any], index: int) -> dict[str, Any]:
    """``body`` with the thought signatures of ``contents[index]`` taken away (either spelling)."""
    out = copy.deepcopy(body)
    for part in out["contents"][index]["parts"]:
        part.pop("thoughtSignature", None)
        part.pop("thought_signature", None)
    return out


def snake(body: Any) -> Any:
    """``body`` with Gemini's part members in proto3 JSON's other spelling (the REST API takes both)."""
    text = json.dumps(body)
    for camel, low in (("functionCall", "function_call"), ("functionResponse", "function_response"),
                       ("thoughtSignature", "thought_signature"), ("inlineData", "inline_data"),
                       ("mimeType", "mime_type")):
        text = text.replace(f'"{camel}"', f'"{low}"')
    return json.loads(text)
