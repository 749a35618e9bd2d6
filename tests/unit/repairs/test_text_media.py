"""The recogniser of restore-text-media: each recognised shape, and the near-misses it must leave as text."""

from __future__ import annotations

import base64
import json

import pytest

from llmfix.repairs.text_media import recognise
from tests.conftest import fixture_json

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()
URL = f"data:image/png;base64,{PNG}"
TEXT = {"type": "text", "text": "Image read successfully"}


def dumps(parts: object) -> str:
    return json.dumps(parts, separators=(",", ":"))


def test_the_opencode_xai_capture_is_recognised_as_text_then_image() -> None:
    messages = fixture_json("opencode/xai-builtin__grok-4__two_png__turn2.json")["messages"]
    for message in [m for m in messages if m["role"] == "tool"]:
        serialized = json.loads(message["content"])
        pieces = recognise(message["content"])
        assert pieces is not None
        assert [p.kind for p in pieces] == ["text", "image"]
        assert pieces[0].text == "Image read successfully"
        assert pieces[1].url == f"data:image/png;base64,{serialized[1]['data']}"  # the very base64, unchanged


@pytest.mark.parametrize(
    "image",
    [
        {"type": "image-data", "data": PNG, "mediaType": "image/png"},
        {"type": "image-data", "data": PNG, "mediaType": "image/png", "providerOptions": {"x": 1}},
        {"type": "media", "data": PNG, "mediaType": "image/png"},
        {"type": "file-data", "data": PNG, "mediaType": "image/png", "filename": "a.png"},
        {"type": "file", "data": PNG, "mediaType": "image/jpeg"},
        {"type": "image_url", "image_url": {"url": URL}},
        {"type": "image_url", "image_url": {"url": URL, "detail": "high"}},
        {"type": "input_image", "image_url": URL},
        {"type": "input_image", "image_url": URL, "detail": "auto"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    ],
    ids=lambda p: p["type"] + ("+" + "+".join(sorted(set(p) - {"type", "data", "mediaType", "image_url", "source"}))
                               if set(p) - {"type", "data", "mediaType", "image_url", "source"} else ""),
)
@pytest.mark.parametrize("text", [None, TEXT, {"type": "input_text", "text": "a.png"}])
def test_each_part_shape_is_recognised(image: dict, text: dict | None) -> None:
    parts = [text, image] if text else [image]
    pieces = recognise(dumps(parts))
    assert pieces is not None
    assert [p.kind for p in pieces] == ["text", "image"] if text else ["image"]
    mime = image.get("mediaType") or image.get("source", {}).get("media_type") or "image/png"
    assert pieces[-1].url == f"data:{mime};base64,{PNG}"


def test_several_images_keep_their_order() -> None:
    other = base64.b64encode(b"another image").decode()
    pieces = recognise(dumps([{"type": "image-data", "data": PNG, "mediaType": "image/png"}, TEXT,
                              {"type": "media", "data": other, "mediaType": "image/webp"}]))
    assert pieces is not None
    assert [p.url for p in pieces if p.kind == "image"] == [URL, f"data:image/webp;base64,{other}"]


def test_a_whole_data_url_is_recognised() -> None:
    pieces = recognise(URL)
    assert pieces is not None and [(p.kind, p.url) for p in pieces] == [("image", URL)]


IMAGE = {"type": "image-data", "data": PNG, "mediaType": "image/png"}
NEAR_MISSES = {
    "plain text": "Image read successfully",
    "text then array": "result: " + dumps([TEXT, IMAGE]),
    "array then newline": dumps([TEXT, IMAGE]) + "\n",
    "array with leading space": " " + dumps([TEXT, IMAGE]),
    "pretty-printed array": json.dumps([TEXT, IMAGE], indent=2),
    "text parts only": dumps([TEXT, {"type": "text", "text": "more"}]),
    "an object, not an array": dumps(IMAGE),
    "a JSON config with an icon": dumps([{"name": "app", "icon": URL}]),
    "icon config object": dumps({"name": "app", "icon": {"data": PNG, "mediaType": "image/png"}}),
    "unknown part type": dumps([TEXT, IMAGE, {"type": "tool-call", "id": "x"}]),
    "extra key": dumps([{**IMAGE, "extra": 1}]),
    "missing mediaType": dumps([{"type": "image-data", "data": PNG}]),
    "pdf media": dumps([{"type": "media", "data": PNG, "mediaType": "application/pdf"}]),
    "text mediaType": dumps([{"type": "file", "data": PNG, "mediaType": "text/plain"}]),
    "mediaType not a string": dumps([{**IMAGE, "mediaType": ["image/png"]}]),
    "upper-case mediaType": dumps([{**IMAGE, "mediaType": "IMAGE/PNG"}]),
    "data not base64": dumps([{**IMAGE, "data": "not base64!"}]),
    "data unpadded": dumps([{**IMAGE, "data": PNG.rstrip("=") + "A"}]),
    "data with a newline": dumps([{**IMAGE, "data": PNG[:8] + "\n" + PNG[8:]}]),
    "data url-safe alphabet": dumps([{**IMAGE, "data": "ab-_" * 4}]),
    "empty data": dumps([{**IMAGE, "data": ""}]),
    "data a number": dumps([{**IMAGE, "data": 12}]),
    "text not a string": dumps([{"type": "text", "text": 3}, IMAGE]),
    "filename on image-data": dumps([{**IMAGE, "filename": "a.png"}]),
    "image_url by http": dumps([{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]),
    "image_url string": dumps([{"type": "image_url", "image_url": URL}]),
    "image_url extra key": dumps([{"type": "image_url", "image_url": {"url": URL, "x": 1}}]),
    "bad detail": dumps([{"type": "input_image", "image_url": URL, "detail": "ultra"}]),
    "anthropic url source": dumps([{"type": "image", "source": {"type": "url", "url": "https://e.com/a.png"}}]),
    "anthropic missing media_type": dumps([{"type": "image", "source": {"type": "base64", "data": PNG}}]),
    "anthropic with cache_control": dumps([{"type": "image", "cache_control": {"type": "ephemeral"},
                                            "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]),
    "nested array": dumps([[TEXT, IMAGE]]),
    "truncated JSON": dumps([TEXT, IMAGE])[:-3] + "}]",
    "a .b64 file read": PNG,
    "data url with text after": URL + " is the icon",
    "data url with text before": "icon: " + URL,
    "data url of a pdf": f"data:application/pdf;base64,{PNG}",
    "data url without base64": "data:image/svg+xml,<svg/>",
    "data url, bad payload": "data:image/png;base64,@@@@",
    "two data urls": URL + URL,
    "empty": "",
    "empty array": "[]",
}


@pytest.mark.parametrize("text", NEAR_MISSES.values(), ids=NEAR_MISSES.keys())
def test_near_misses_stay_text(text: str) -> None:
    assert recognise(text) is None
