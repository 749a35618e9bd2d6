"""order-gemini-turns through ``engine.process`` on Gemini CLI's captured turn 2, judged by the strict mock
(tests/upstreams/gemini_rules.py): a call turn that follows no user content gets a short user content before it,
empty text parts and contents left empty go, a signed empty part (Gemini streams a signature on one) stays."""

from __future__ import annotations

import copy

from tests.unit.dialects.gemini_session import capture, run, sent, snake, taken
from tests.upstreams.gemini_errors import CALL_PLACEMENT, EMPTY_TEXT
from tests.upstreams.gemini_rules import check

NAME = "order-gemini-turns"


def test_a_call_turn_opening_the_history_gets_a_user_turn_before_it() -> None:
    body = capture("turn2")
    cut = copy.deepcopy(body)
    del cut["contents"][0]  # a compaction or a crash took the prompt
    assert check(cut).message == CALL_PLACEMENT  # type: ignore[union-attr]
    for variant in (cut, snake(cut)):
        outcome = run(variant)
        assert outcome.repairs == [NAME]
        out = sent(outcome, variant)
        taken(out)
        bridge = out["contents"][0]
        assert bridge["role"] == "user" and len(bridge["parts"]) == 1 and bridge["parts"][0]["text"].strip()
        assert out["contents"][1:] == variant["contents"]


def test_a_call_turn_after_another_model_content_gets_one_too() -> None:
    body = capture("turn2")
    body["contents"].insert(1, {"role": "model", "parts": [{"text": "Let me look at both images."}]})
    assert check(body).message == CALL_PLACEMENT  # type: ignore[union-attr]
    outcome = run(body)
    out = sent(outcome, body)
    taken(out)
    assert [c["role"] for c in out["contents"]] == ["user", "model", "user", "model", "user"]
    assert out["contents"][3:] == body["contents"][2:] and out["contents"][:2] == body["contents"][:2]


def test_empty_text_parts_and_contents_left_empty_go() -> None:
    body = capture("turn2")
    broken = copy.deepcopy(body)
    broken["contents"][1]["parts"].insert(0, {"text": ""})  # an interrupted stream
    broken["contents"][0]["parts"].append({"text": ""})
    broken["contents"].insert(1, {"role": "user", "parts": [{"text": ""}]})
    assert check(broken).message == EMPTY_TEXT  # type: ignore[union-attr]
    outcome = run(broken)
    assert outcome.repairs == [NAME]
    out = sent(outcome, broken)
    taken(out)
    assert out == body


def test_a_signed_empty_text_part_stays() -> None:
    body = capture("turn2")
    body["contents"][1]["parts"].insert(0, {"text": "", "thoughtSignature": "c2lnbmVkIGVtcHR5"})
    assert run(body).status == "untouched"
    taken(body)

