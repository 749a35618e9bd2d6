"""Every captured Gemini CLI 0.61.0 body (tests/fixtures/gemini-cli/) passes the strict Gemini mock, and the ways
the CLI breaks them are refused with Google's texts."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.gemini_errors import CORRUPTED, COUNT_MISMATCH, missing_signature
from tests.upstreams.mock import MockUpstream

BASE = "/v1beta/models/gemini-3.1-pro-preview"


@pytest.fixture
def up() -> Iterator[MockUpstream]:
    with MockUpstream(rules="gemini") as mock:
        yield mock


def capture_signatures() -> list[str]:
    return [p["thoughtSignature"] for p in capture_json("gemini-cli/turn1_meta.json")["answer_parts"]]


def send(up: MockUpstream, name: str, body: bytes | dict[str, Any]) -> httpx.Response:
    path = capture_json(f"gemini-cli/{name}_meta.json")["path"]
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(up.url + path, content=content, headers={"content-type": "application/json"}, timeout=30)


def test_each_captured_body_is_accepted_as_it_was_sent(up: MockUpstream) -> None:
    up.gemini.trust(*capture_signatures())  # they came from a real answer (the capturing mock's)
    for name in ("turn1", "count_tokens", "turn2"):
        assert capture_json(f"gemini-cli/{name}_meta.json")["path"].startswith(BASE)
        got = send(up, name, capture_bytes(f"gemini-cli/{name}_request.json"))
        assert got.status_code == 200, (name, got.text)
    assert [r.status for r in up.requests] == [200, 200, 200]


def test_turn2_with_signatures_this_backend_never_issued_is_corrupted(up: MockUpstream) -> None:
    got = send(up, "turn2", capture_bytes("gemini-cli/turn2_request.json"))  # not declared issued
    assert got.status_code == 400 and got.json()["error"]["message"] == CORRUPTED


def test_turn2_after_a_lost_signature_and_after_resume(up: MockUpstream) -> None:
    up.gemini.trust(*capture_signatures())
    turn2 = capture_json("gemini-cli/turn2_request.json")
    lost = copy.deepcopy(turn2)
    for part in lost["contents"][1]["parts"]:
        part.pop("thoughtSignature")
    got = send(up, "turn2", lost)
    assert got.json()["error"]["message"] == missing_signature("gemini", "read_file", 2)
    sibling_only = copy.deepcopy(turn2)
    sibling_only["contents"][1]["parts"][0].pop("thoughtSignature")  # the second call keeps its own
    assert send(up, "turn2", sibling_only).status_code == 400
    resumed = copy.deepcopy(turn2)  # what 0.61.0 sends after --resume latest: the dummy, every response twice
    resumed["contents"][1]["parts"][0]["thoughtSignature"] = "skip_thought_signature_validator"
    del resumed["contents"][1]["parts"][1]["thoughtSignature"]
    resumed["contents"][2]["parts"] *= 2
    resumed["contents"] += [{"role": "model", "parts": [{"text": "done: a.png is red, b.png is green"}]},
                            {"role": "user", "parts": [{"text": "And which one is brighter?"}]}]
    got = send(up, "turn2", resumed)
    assert got.status_code == 400 and got.json()["error"]["message"] == COUNT_MISMATCH
    resumed["contents"][2]["parts"] = resumed["contents"][2]["parts"][:4]  # one response per call again
    assert send(up, "turn2", resumed).status_code == 200


def test_a_captured_declaration_moved_to_parameters_meets_the_schema_rules(up: MockUpstream) -> None:
    turn1 = capture_json("gemini-cli/turn1_request.json")
    decls = turn1["tools"][0]["functionDeclarations"]
    index = next(i for i, d in enumerate(decls) if d["name"] == "read_file")
    schema = decls[index].pop("parametersJsonSchema")
    decls[index]["parameters"] = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
    got = send(up, "turn1", turn1)
    assert got.status_code == 400
    assert got.json()["error"]["message"].startswith(
        f'Invalid JSON payload received. Unknown name "$schema" at \'tools[0].function_declarations[{index}]'
        ".parameters': Cannot find field.")


def test_qwen_code_turn2_is_refused_without_its_signature_and_accepted_with_it() -> None:
    door = "/v1beta/openai/chat/completions"
    with MockUpstream(rules="gemini") as up:
        schemas = capture_bytes("qwen-code/turn1_request.json")  # its tools, as Gemini's door reads them
        refused = httpx.post(up.url + door, content=schemas, headers={"content-type": "application/json"})
        assert refused.status_code == 400 and refused.json()[0]["error"]["message"].startswith(
            'Invalid JSON payload received. Unknown name "oneOf"')
        up.gemini.door_schemas = False  # as when it was recorded
        body = capture_bytes("qwen-code/turn2_request.json")
        got = httpx.post(up.url + door, content=body, headers={"content-type": "application/json"}, timeout=30)
        assert got.status_code == 400
        assert got.json() == [{"error": {"code": 400, "message": missing_signature("door", "read_file", 2),
                                         "status": "INVALID_ARGUMENT"}}]  # list-wrapped, as the door writes it
        issued = capture_json("qwen-code/turn1_answer_calls.json")
        up.gemini.trust(issued[0]["extra_content"]["google"]["thought_signature"])
        restored = json.loads(body)
        [assistant] = [m for m in restored["messages"] if m["role"] == "assistant"]
        assistant["tool_calls"][0]["extra_content"] = issued[0]["extra_content"]
        assert httpx.post(up.url + door, json=restored, timeout=30).status_code == 200
