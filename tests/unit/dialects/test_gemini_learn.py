"""What llmfix's memory learns from Gemini's answers, and gives back on the next request: each function call's
thought signature, from a stream (``alt=sse``: ``data: {…}`` events), a JSON answer, the JSON array
``streamGenerateContent`` answers without ``alt=sse``, and Code Assist's ``{"response": {…}}`` envelope. Ids are
optional (Gemini CLI replays each call with one it made, the model gave none): a signature is known by the upstream
and the step's calls — names and arguments by value — never by a name alone."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from llmfix.memory.store import ToolCall
from tests.unit.dialects.gemini_session import (
    CA_STREAM,
    CODE_ASSIST,
    DUMMY,
    capture,
    hear_json,
    hear_sse,
    issued,
    response,
    run,
    sent,
    snake,
    sse,
    store,
    without_signatures,
)

CA_UP = f"{CODE_ASSIST}:443/gemini"
FINAL = {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}],
         "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}
"""The last event of a stream: its finish reason and usage."""


def thought(text: str = "I will read both.") -> dict[str, Any]:
    return {"text": text, "thought": True}


def events(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A streamed answer: a thought, then each call in its own event (as Gemini streams parallel calls), then the
    finish."""
    return [response([thought()]), *(response([p]) for p in parts), FINAL]


def ca(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"response": item} for item in items]


HEARINGS: dict[str, Callable[[Any, list[dict[str, Any]]], list[ToolCall]]] = {
    "sse, a call an event": lambda m, parts: hear_sse(m, sse(events(parts))),
    "sse, the calls in one event": lambda m, parts: hear_sse(m, sse([response([thought(), *parts]), FINAL])),
    "sse, snake_case": lambda m, parts: hear_sse(m, sse(snake(events(parts)))),
    "json": lambda m, parts: hear_json(m, response([thought(), *parts])),
    "json array": lambda m, parts: hear_json(m, events(parts)),
    "code assist sse": lambda m, parts: hear_sse(m, sse(ca(events(parts))), CA_UP),
    "code assist json array": lambda m, parts: hear_json(m, ca(events(parts)), CA_UP),
    "code assist json": lambda m, parts: hear_json(m, {"response": response(parts)}, CA_UP),
}


def request_after(how: str, memory: Any) -> dict[str, Any]:
    """Gemini CLI's turn 2 with its signatures lost, sent where the answer came from; what llmfix sends."""
    body = without_signatures(capture("turn2"), 1)
    if how.startswith("code assist"):
        envelope = {"model": "gemini-3.1-pro-preview", "project": "p-1", "request": body}
        return sent(run(envelope, host=CODE_ASSIST, path=CA_STREAM, store=memory),
                    envelope)["request"]
    return sent(run(body, store=memory), body)


@pytest.mark.parametrize("how", list(HEARINGS))
def test_each_answer_form_teaches_the_signature_of_the_step(how: str) -> None:
    memory = store()
    HEARINGS[how](memory, issued())
    parts = request_after(how, memory)["contents"][1]["parts"]
    assert parts[0]["thoughtSignature"] == issued()[0]["thoughtSignature"]  # byte for byte
    assert "thoughtSignature" not in parts[1]


@pytest.mark.parametrize("how", list(HEARINGS))
def test_an_answer_without_calls_teaches_nothing(how: str) -> None:
    memory = store()
    assert HEARINGS[how](memory, []) == []
    assert request_after(how, memory)["contents"][1]["parts"][0]["thoughtSignature"] == DUMMY


def test_ids_are_optional_calls_with_ids_are_remembered_as_calls_too() -> None:
    without = issued()
    assert hear_sse(store(), sse(events(without))) == []
    with_ids = copy.deepcopy(without)
    for n, p in enumerate(with_ids):
        p["functionCall"]["id"] = f"call_{n}"
    memory = store()
    calls = hear_sse(memory, sse(events(with_ids)))
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_0", "read_file", {"file_path": "a.png"}), ("call_1", "read_file", {"file_path": "b.png"})]
    # Gemini CLI replays the calls with ids of its own: the signature is found by the calls, not their ids
    assert request_after("sse", memory)["contents"][1]["parts"][0]["thoughtSignature"] == \
        issued()[0]["thoughtSignature"]


def heard() -> Any:
    memory = store()
    hear_sse(memory, sse(events(issued())))
    return memory


def turn_with(*calls: dict[str, Any]) -> dict[str, Any]:
    body = without_signatures(capture("turn2"), 1)
    body["contents"][1]["parts"] = [{"functionCall": c} for c in calls]
    body["contents"][2]["parts"] = [{"functionResponse": {"name": c["name"], "response": {"output": "ok"}}}
                                    for c in calls]
    return body


@pytest.mark.parametrize("calls", [
    ({"name": "read_file", "args": {"file_path": "c.png"}}, {"name": "read_file", "args": {"file_path": "b.png"}}),
    ({"name": "read_file", "args": {"file_path": "a.png"}},),  # the first call alone: another step
    ({"name": "read_file", "args": {"file_path": "b.png"}}, {"name": "read_file", "args": {"file_path": "a.png"}}),
    ({"name": "list_directory", "args": {"file_path": "a.png"}}, {"name": "read_file", "args": {"file_path": "b.png"}}),
])
def test_a_step_llmfix_did_not_hear_gets_the_dummy_never_another_step_s_signature(calls: tuple[Any, ...]) -> None:
    body = turn_with(*calls)
    out = sent(run(body, store=heard()), body)
    assert out["contents"][1]["parts"][0]["thoughtSignature"] == DUMMY


def test_arguments_are_compared_by_value() -> None:
    memory = store()
    part = {"functionCall": {"name": "grep", "args": {"pattern": "TODO", "path": "src", "limit": 10}},
            "thoughtSignature": "c2lnbmF0dXJlIG9mIGdyZXA="}
    hear_sse(memory, sse(events([part])))
    body = turn_with({"name": "grep", "args": {"limit": 10, "path": "src", "pattern": "TODO"}})
    assert sent(run(body, store=memory), body)["contents"][1]["parts"][0]["thoughtSignature"] == \
        part["thoughtSignature"]


def test_a_signature_is_given_back_only_to_the_upstream_that_issued_it() -> None:
    body = without_signatures(capture("turn2"), 1)
    vertex = "/v1/projects/p/locations/global/publishers/google/models/gemini-3.1-pro-preview:generateContent"
    out = sent(run(body, host="aiplatform.googleapis.com", path=vertex, store=heard()), body)
    assert out["contents"][1]["parts"][0]["thoughtSignature"] == DUMMY  # Vertex cannot verify the Gemini API's
