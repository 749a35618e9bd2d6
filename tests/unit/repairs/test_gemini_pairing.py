"""Gemini's pairing rule through ``engine.process``, judged by the strict mock (tests/upstreams/gemini_rules.py):
after a model content with N ``functionCall`` parts, one user content with N ``functionResponse`` parts in call order,
each image right after its response. Derived from Gemini CLI's captured turn 2 (ids it made itself) and from id-less
histories (the model may give no ids, a client may send none): responses split over several user contents are
merged in call order, a missing response is added saying no result was recorded, and ``countTokens`` (which counts a
partial turn) gets none added."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.unit.dialects.gemini_session import COUNT, GENERATE, capture, run, sent, snake, taken

PAIR = "pair-tool-calls"
USER = {"role": "user", "parts": [{"text": "read a.md, list ., read b.md"}]}


def fc(name: str, **args: Any) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": args}, "thoughtSignature": "c2lnbmVk"}


def fr(name: str, output: str) -> dict[str, Any]:
    return {"functionResponse": {"name": name, "response": {"output": output}}}


def outputs(content: dict[str, Any]) -> list[Any]:
    """What each part of ``content`` is: a response's output, or a media part's MIME type."""
    out = []
    for p in content["parts"]:
        r = p.get("functionResponse", p.get("function_response"))
        blob = p.get("inlineData", p.get("inline_data"))
        out.append(r["response"]["output"] if r else (blob.get("mimeType", blob.get("mime_type")) if blob else p))
    return out


CALLS = {"role": "model", "parts": [fc("read", path="a.md"), fc("list", path="."), fc("read", path="b.md")]}


@pytest.mark.parametrize("split", [
    [[fr("read", "A")], [fr("list", "L"), fr("read", "B")]],
    [[fr("read", "A"), fr("list", "L")], [fr("read", "B")]],
    [[fr("list", "L")], [fr("read", "A"), fr("read", "B")]],  # out of order: merged in call order
    [[fr("read", "A")], [fr("list", "L")], [fr("read", "B")]],
])
def test_id_less_responses_split_over_several_user_contents_are_merged_in_call_order(split: list[list[Any]]) -> None:
    body = {"contents": [USER, CALLS, *({"role": "user", "parts": parts} for parts in split)]}
    outcome = run(body, path=GENERATE)
    assert outcome.repairs == [PAIR]
    out = sent(outcome, body)
    taken(out)
    assert len(out["contents"]) == 3 and out["contents"][:2] == body["contents"][:2]
    assert outputs(out["contents"][2]) == ["A", "L", "B"]  # each answers its own call: nothing invented
    assert "No result was recorded" not in str(out)


def test_gemini_cli_s_responses_split_with_their_images_are_merged_with_them() -> None:
    body = capture("turn2")
    parts = body["contents"][2]["parts"]  # response a, image a, response b, image b
    split = copy.deepcopy(body)
    split["contents"][2:] = [{"role": "user", "parts": parts[2:]}, {"role": "user", "parts": parts[:2]}]
    for variant in (split, snake(split)):
        outcome = run(variant)
        assert outcome.repairs == [PAIR]
        out = sent(outcome, variant)
        taken(out)
        assert out["contents"][2] == (body if variant is split else snake(body))["contents"][2]
        assert len(out["contents"]) == 3


DROP = "drop-repeated-responses"


def test_every_response_sent_twice_after_a_resume_leaves_once_with_its_image() -> None:
    body = capture("turn2")
    resumed = copy.deepcopy(body)
    resumed["contents"][2]["parts"] *= 2  # what Gemini CLI 0.61.0 sends after `gemini --resume latest`
    for sent_body, expected in ((resumed, body), (snake(resumed), snake(body))):
        outcome = run(sent_body)
        assert outcome.repairs == [DROP]
        out = sent(outcome, sent_body)
        assert out == expected  # the first copies, each with its image, in order
        taken(out)


def test_id_less_copies_go_from_the_end() -> None:
    """One file read twice (two equal calls, two equal responses) then another: a client sending the last response
    twice loses that copy, not the second equal response that answers the second call."""
    calls = {"role": "model", "parts": [fc("read", path="x"), fc("read", path="x"), fc("read", path="y")]}
    body = {"contents": [USER, calls, {"role": "user", "parts": [fr("read", "X"), fr("read", "X"), fr("read", "Y"),
                                                                 fr("read", "Y")]}]}
    outcome = run(body, path=GENERATE)
    assert outcome.repairs == [DROP]
    out = sent(outcome, body)
    taken(out)
    assert outputs(out["contents"][2]) == ["X", "X", "Y"]


def test_equal_id_less_responses_to_equal_calls_stay() -> None:
    calls = {"role": "model", "parts": [fc("read", path="x"), fc("read", path="x")]}
    body = {"contents": [USER, calls, {"role": "user", "parts": [fr("read", "X"), fr("read", "X")]}]}
    assert run(body, path=GENERATE).status == "untouched"


def test_a_missing_response_is_added_saying_no_result_was_recorded() -> None:
    body = capture("turn2")
    lost = copy.deepcopy(body)
    del lost["contents"][2]["parts"][2:]  # the run was interrupted before b.png's result
    outcome = run(lost)
    assert outcome.repairs == [PAIR]
    out = sent(outcome, lost)
    taken(out)
    parts = out["contents"][2]["parts"]
    assert parts[:2] == body["contents"][2]["parts"][:2]
    added = parts[2]["functionResponse"]
    call = body["contents"][1]["parts"][1]["functionCall"]
    assert added["id"] == call["id"] and added["name"] == call["name"]
    assert "No result was recorded" in added["response"]["error"]


def test_without_ids_the_added_response_names_the_tool_and_nothing_llmfix_made_up() -> None:
    body = {"contents": [USER, CALLS, {"role": "user", "parts": [fr("read", "A"), fr("list", "L")]}]}
    outcome = run(body, path=GENERATE)
    assert outcome.repairs == [PAIR]
    out = sent(outcome, body)
    taken(out)
    added = out["contents"][2]["parts"][2]["functionResponse"]
    assert added["name"] == "read" and "id" not in added
    text = added["response"]["error"]
    assert "No result was recorded for tool call" in text and "(read)" in text
    assert "@" not in text  # llmfix's own key for a call without an id never reaches the model


def test_count_tokens_counts_a_partial_turn_as_it_is() -> None:
    """Gemini CLI counts a content holding only function responses (its capture), and may count a call turn whose
    responses are not there yet: countTokens takes both, so nothing is added; the turn's other repairs still act."""
    body = capture("count_tokens")
    assert run(body, path=COUNT).status == "untouched"
    partial = {"contents": [USER, {"role": "model", "parts": [{"text": ""}, {"functionCall": {
        "name": "read", "args": {"path": "a.md"}}}]}]}
    outcome = run(partial, path=COUNT)
    out = sent(outcome, partial)
    assert PAIR not in outcome.repairs and len(out["contents"]) == 2
    assert set(outcome.repairs) == {"order-gemini-turns", "restore-thought-signatures"}
    assert out["contents"][1]["parts"] == [{"functionCall": {"name": "read", "args": {"path": "a.md"}},
                                            "thoughtSignature": "skip_thought_signature_validator"}]
    # the same body to generateContent gets the response Gemini needs
    generated = sent(run(partial, path=GENERATE), partial)
    assert len(generated["contents"]) == 3 and "No result was recorded" in str(generated["contents"][2])
