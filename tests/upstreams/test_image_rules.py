"""The strict mocks' image rules: each refusal with the real upstream's status, error shape and text; valid images
pass. Every image is decoded (a PNG header over random bytes is refused, as the real upstreams refuse it)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.images import b64, declared_png, image_bytes, noise_png, padded_png, png_url
from tests.upstreams.rules import check

SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>'


def messages(*blocks: dict[str, Any], in_tool_result: bool = False) -> dict[str, Any]:
    result = [{"type": "tool_result", "tool_use_id": "t1", "content": list(blocks)}]
    content = result if in_tool_result else list(blocks)
    head = [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]}]
    return {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}, *(head if in_tool_result else []),
                                              {"role": "user", "content": content}]}


def block(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": b64(data)}}


def anthropic(body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    r = check("anthropic", "/v1/messages", body)
    return (r.status, r.body) if r else None


def error(message: str) -> tuple[int, dict[str, Any]]:
    return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def test_anthropic_size_is_measured_on_the_base64_text() -> None:
    over = padded_png(5_242_880 // 4 * 3 + 1)
    assert anthropic(messages(block(over))) == error(
        f"messages.1.content.0.image.source.base64: image exceeds 5 MB maximum: {len(b64(over))} bytes > 5242880 bytes")
    assert anthropic(messages(block(padded_png(5_242_880 // 4 * 3)))) is None


def test_anthropic_pixels_and_the_many_image_rule() -> None:
    assert anthropic(messages(block(image_bytes("png", 1, (8001, 2))))) == error(
        "messages.1.content.0.image.source.base64.data: At least one of the image dimensions exceed max allowed size: "
        "8000 pixels")
    assert anthropic(messages(*(block(image_bytes("png", k, (2001, 2))) for k in range(20)))) is None
    body = messages(*(block(image_bytes("png", k, (2001 if k == 20 else 5, 2))) for k in range(21)))
    assert anthropic(body) == error("messages.1.content.20.image.source.base64.data: At least one of the image "
                                    "dimensions exceed max allowed size for many-image requests: 2000 pixels")
    url = {"type": "image", "source": {"type": "url", "url": "https://img.example/a.png"}}
    assert anthropic(messages(*(block(image_bytes("png", k, (2001, 2))) for k in range(20)), url)) is not None


@pytest.mark.parametrize(("data", "mime", "message"), [
    (noise_png(4, 4)[:40], "image/png", "Could not process image"),
    (SVG, "image/png", "Could not process image"),
    (image_bytes("jpeg", 1), "image/png",
     "messages.1.content.0.image.source.base64.data: Image does not match the provided media type image/png"),
    (SVG, "image/svg+xml", "messages.1.content.0.image.source.base64.media_type: Input should be 'image/jpeg', "
                           "'image/png', 'image/gif' or 'image/webp'"),
])
def test_anthropic_refuses_what_it_cannot_process(data: bytes, mime: str, message: str) -> None:
    assert anthropic(messages(block(data, mime))) == error(message)


def test_anthropic_looks_inside_tool_results() -> None:
    got = anthropic(messages(block(image_bytes("png", 1, (9000, 2))), in_tool_result=True))
    assert got is not None and got[1]["error"]["message"].startswith("messages.2.content.0.content.0.image.source")


def responses(url: str, in_output: bool = True) -> dict[str, Any]:
    image = {"type": "input_image", "image_url": url, "detail": "auto"}
    if not in_output:
        return {"model": "gpt-5", "input": [{"role": "user", "content": [image]}]}
    return {"model": "gpt-5", "input": [
        {"type": "function_call", "call_id": "c1", "name": "view_image", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [image]}]}


@pytest.mark.parametrize("url", [f"data:image/svg+xml;base64,{b64(SVG)}",
                                 f"data:image/png;base64,{b64(b'not an image')}",
                                 f"data:image/gif;base64,{b64(image_bytes('gif', 1, (3, 3), frames=2))}"])
@pytest.mark.parametrize("in_output", [True, False])
def test_openai_responses_refuses_an_invalid_image(url: str, in_output: bool) -> None:
    r = check("openai", "/v1/responses", responses(url, in_output))
    assert r is not None and r.status == 400 and r.body == {"error": {
        "message": "The image data you provided does not represent a valid image. Please check your input and try "
                   "again with one of the supported image formats: ['image/jpeg', 'image/png', 'image/gif', "
                   "'image/webp'].", "type": "invalid_request_error", "param": "input", "code": "invalid_value"}}


@pytest.mark.parametrize("fmt", ["png", "jpeg", "gif", "webp"])
def test_openai_takes_its_four_formats(fmt: str) -> None:
    url = f"data:image/{fmt};base64,{b64(image_bytes(fmt, 2))}"
    assert check("openai", "/v1/responses", responses(url)) is None
    chat = {"model": "gpt-5", "messages": [{"role": "user", "content": [{"type": "image_url",
                                                                          "image_url": {"url": url}}]}]}
    assert check("openai", "/v1/chat/completions", chat) is None


def test_openai_chat_refuses_an_unsupported_image() -> None:
    url = f"data:image/png;base64,{b64(declared_png(3, 3)[:30])}"
    body = {"model": "gpt-5", "messages": [{"role": "user", "content": [{"type": "image_url",
                                                                          "image_url": {"url": url}}]}]}
    r = check("openai", "/v1/chat/completions", body)
    assert r is not None and r.status == 400 and r.body["error"]["code"] == "invalid_image_format"
    assert r.message == ("You uploaded an unsupported image. Please make sure your image has of one the following "
                         "formats: ['png', 'jpeg', 'gif', 'webp'].")


@pytest.mark.parametrize(("fmt", "refused"), [("webp", True), ("gif", True), ("png", False), ("jpeg", False)])
def test_xai_takes_jpeg_and_png_only(fmt: str, refused: bool) -> None:
    url = f"data:image/{fmt};base64,{b64(image_bytes(fmt, 3))}"
    chat = {"model": "grok-4.3", "messages": [{"role": "user", "content": [{"type": "image_url",
                                                                             "image_url": {"url": url}}]}]}
    for path, body in (("/v1/chat/completions", chat), ("/v1/responses", responses(url, in_output=False))):
        r = check("xai", path, body)
        if not refused:
            assert r is None
            continue
        assert r is not None and r.status == 400 and r.body == {
            "code": "Client specified an invalid argument",
            "error": "Invalid request content: Downloaded response does not contain a valid JPG or PNG image."}


def test_urls_are_not_fetched() -> None:
    assert check("openai", "/v1/responses", responses("https://img.example/a.svg")) is None
    assert check("xai", "/v1/responses", responses(png_url(1), in_output=False)) is None
