"""The conversation view of Gemini requests (the before/after lines of mitmweb's diff): a ``functionResponse`` with
its media nested in ``functionResponse.parts`` (Gemini 3's multimodal function responses,
https://ai.google.dev/gemini-api/docs/function-calling#multimodal) is drawn with those parts as Gemini parts, so a
repair of such a request is made and shown instead of failing."""

from __future__ import annotations

from typing import Any

from tests.images import b64, image_bytes
from tests.unit.dialects.gemini_session import run, sent, snake

USER = {"role": "user", "parts": [{"text": "Read a.bmp"}]}
CALL = {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"file_path": "a.bmp"}},
                                    "thoughtSignature": "c2lnbmVk"}]}


def nested(mime: str, data: str) -> dict[str, Any]:
    return {"functionResponse": {"name": "read_file", "response": {"output": "Binary content provided."},
                                 "parts": [{"inlineData": {"mimeType": mime, "data": data}}]}}


def test_a_nested_image_is_fitted_and_the_view_draws_it() -> None:
    body = {"contents": [USER, CALL, {"role": "user", "parts": [nested("image/bmp", b64(image_bytes("bmp")))]}]}
    outcome = run(body)
    assert outcome.status == "repaired", outcome.reason
    assert outcome.repairs == ["fit-images"]
    blob = sent(outcome, body)["contents"][2]["parts"][0]["functionResponse"]["parts"][0]["inlineData"]
    assert blob["mimeType"] == "image/png"  # Gemini refuses BMP
    response = [n for n, line in enumerate(outcome.after) if "functionResponse" in line]
    assert len(response) == 1
    below = outcome.after[response[0] + 1]
    assert "inlineData" in below and "image/png" in below and blob["data"] not in "".join(outcome.after)
    assert "image/bmp" in outcome.before[response[0] + 1]


def test_nested_parts_in_the_snake_case_spelling_are_drawn_too() -> None:
    # an empty text part makes order-gemini-turns act, and the view is drawn
    body = snake({"contents": [USER, CALL, {"role": "user", "parts": [nested("image/png", b64(image_bytes("png"))),
                                                                       {"text": ""}]}]})
    outcome = run(body)
    assert outcome.status == "repaired", outcome.reason
    assert outcome.repairs == ["order-gemini-turns"]
    assert any("inlineData" in line and "image/png" in line for line in outcome.after)
