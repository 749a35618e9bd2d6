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

from tests.unit.dialects.gemini_session import GENERATE, capture, run, sent, snake, taken

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
