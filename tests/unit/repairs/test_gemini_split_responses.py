"""pair-tool-calls on Gemini: a call turn's responses split over two user contents (NousResearch/hermes-agent
PR #22261: the same 400 as a count mismatch) are joined in the one content right after the call turn, in call order,
with the image each came with — with ids (Gemini CLI makes its own) and without (the Gemini API's model gives
none, and ``google-genai`` sends back none: tests/e2e/test_gemini_genai_llmfix.py); never "no result recorded" for a
call whose response is there.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.registry import GEMINI
from tests.conftest import fixture_json
from tests.upstreams.gemini_errors import COUNT_MISMATCH
from tests.upstreams.rules import check

HOST = "generativelanguage.googleapis.com"
PATH = "/v1beta/models/gemini-3.1-pro-preview:generateContent"
NOT_RECORDED = "No result was recorded"


def run(body: dict[str, Any] | bytes) -> engine.Outcome:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    settings = engine.Settings(memory=None, enabled=frozenset({"pair-tool-calls"}))
    return engine.process(engine.request(GEMINI, HOST, 443, PATH, raw, None, None), settings)


def capture(*, ids: bool) -> dict[str, Any]:
    """Gemini CLI 0.61.0's turn 2 (two read_file calls, each response followed by its image); ``ids=False``: the
    calls and responses without ids, as the Gemini API and google-genai have them."""
    body = fixture_json("gemini-cli/turn2_request.json")
    if not ids:
        for content in body["contents"]:
            for part in content["parts"]:
                for key in ("functionCall", "functionResponse"):
                    part.get(key, {}).pop("id", None)
    return body


def split(body: dict[str, Any]) -> dict[str, Any]:
    """The responses content cut in two: the first response (and its image), then the second (and its image)."""
    out = copy.deepcopy(body)
    answers = out["contents"][2]
    out["contents"][2:3] = [{**answers, "parts": answers["parts"][:2]}, {**answers, "parts": answers["parts"][2:]}]
    return out


@pytest.mark.parametrize("ids", [True, False], ids=["with-ids", "without-ids"])
def test_responses_split_over_two_contents_are_joined_after_their_call_turn(ids: bool) -> None:
    valid = capture(ids=ids)
    assert check("gemini", PATH, valid) is None and run(valid).status == "untouched"
    broken = split(valid)
    rejection = check("gemini", PATH, broken)
    assert rejection is not None and rejection.message == COUNT_MISMATCH
    out = run(broken)
    assert out.status == "repaired" and out.repairs == ["pair-tool-calls"]
    got = json.loads(out.body or b"")
    assert got == valid  # joined, in call order, each image after its response; nothing else changed
    assert NOT_RECORDED not in out.body.decode()
    assert [c.location for c in out.changes] == ["contents[2]", "contents[3]"]
    assert run(out.body or b"").status == "untouched"  # idempotent


def test_a_second_content_answering_calls_already_answered_is_still_not_a_response_of_that_turn() -> None:
    """The same responses twice, each copy in its own content: the second copy answers no open call (each has
    its response), so it is not taken for the turn's responses."""
    valid = capture(ids=False)
    twice = copy.deepcopy(valid)
    twice["contents"].append(copy.deepcopy(valid["contents"][2]))
    out = run(twice)
    got = json.loads(out.body or b"")
    assert got["contents"][2] == valid["contents"][2]  # the turn's own responses stay as they are
    assert NOT_RECORDED not in out.body.decode()
