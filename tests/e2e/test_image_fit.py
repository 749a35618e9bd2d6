"""fit-images end to end: the Claude Code and Codex captures, their images replaced by ones the upstream refuses,
sent with the anthropic and openai SDKs through a real mitmdump to the strict mocks (which decode every image).

Without llmfix: the upstream's 400, with its own text. With it: 200, and every replacement image the mock receives
decodes, fits the upstream's limits and keeps its aspect ratio (within a pixel); the next turn carries the very
same replacement bytes and converts nothing (llmfix's debug line ``image converted`` counts conversions); images
within the limits leave byte-identical. Images are made here, small where the case allows.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from PIL import Image

from tests.e2e.harness import Mitmdump, loopback_proxy
from tests.e2e.harness import sdk_kwargs as _split
from tests.images import b64, data_url, image_bytes, noise_png, padded_png
from tests.upstreams.captures import capture_json
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(240)
CONVERTED = "llmfix: image converted"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 320 200"><rect x="9" y="9" width="30" height="9"/></svg>'


def start(upstream: MockUpstream, confdir: Path, *, llmfix: bool) -> Mitmdump:
    return loopback_proxy(upstream, confdir, llmfix=llmfix, **({"termlog_verbosity": "debug"} if llmfix else {}))


@pytest.fixture(scope="module")
def fixed(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    with start(upstream, tmp_path_factory.mktemp("conf"), llmfix=True) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def bare(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    with start(upstream, tmp_path_factory.mktemp("conf"), llmfix=False) as proxy:
        yield proxy


def send(proxy: Mitmdump, dialect: str, host: str, body: dict[str, Any]) -> Any:
    """``body`` sent to ``host`` with the real SDK of its dialect (non-streamed): the answer, or the APIStatusError."""
    if dialect == "messages":
        with httpx2.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=60) as http:
            sdk = anthropic.Anthropic(api_key="sk-ant-test-not-a-key", base_url=f"https://{host}", http_client=http,
                                      max_retries=0)
            try:
                return sdk.messages.create(**_split(sdk.messages.create, body))
            except anthropic.APIStatusError as e:
                return e
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=60) as http:
        client = openai.OpenAI(api_key="sk-test-not-a-key", base_url=f"https://{host}/v1", http_client=http,
                               max_retries=0)
        method = client.responses.create if dialect == "responses" else client.chat.completions.create
        try:
            return method(**_split(method, body))
        except openai.APIStatusError as e:
            return e


def received(upstream: MockUpstream, before: int) -> dict[str, Any]:
    [seen] = upstream.requests[before:]
    assert seen.status == 200, seen.reason
    return seen.json


def wait_for_more(proxy: Mitmdump, text: str, than: int, timeout: float = 20) -> int:
    """Wait until ``text`` occurs in mitmdump's output more than ``than`` times; how many times it does then."""
    deadline = time.monotonic() + timeout
    while (n := proxy.output().count(text)) <= than:
        assert time.monotonic() < deadline, f"{text!r} not printed again within {timeout} s:\n{proxy.output()[-3000:]}"
        time.sleep(0.05)
    return n


# ---------------------------------------------------------------------------------------- the cases


def claude_code(*blocks: dict[str, Any]) -> dict[str, Any]:
    """Claude Code's turn 2, its tool_result holding ``blocks`` instead of the screenshot it read."""
    body = copy.deepcopy(capture_json("claude-code/single_png__turn2.json"))
    body["messages"][3]["content"][0]["content"] = list(blocks)
    return body


def png_block(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": b64(data)}}


def codex(data: bytes, mime: str) -> dict[str, Any]:
    """Codex's turn 2, its view_image output holding this image."""
    body = copy.deepcopy(capture_json("codex/turn2_request.json"))
    body["input"][5]["output"][0]["image_url"] = f"data:{mime};base64,{b64(data)}"
    return body


def opencode(data: bytes, mime: str) -> dict[str, Any]:
    """opencode's Chat turn 2 (two PNGs read), its first image replaced."""
    body = copy.deepcopy(capture_json("opencode/chat__mock-vision__two_png__turn2.json"))
    parts = [p for m in body["messages"] if isinstance(m.get("content"), list) for p in m["content"]
             if p.get("type") == "image_url"]
    parts[0]["image_url"]["url"] = f"data:{mime};base64,{b64(data)}"
    return body


OVERSIZED = noise_png(1200, 1200)  # a 4.3 MB PNG: 5.8 MB of base64
CASES = {  # name: (dialect, host, body, the upstream's text without llmfix, the pixel limit)
    "oversized": ("messages", "api.anthropic.com", lambda: claude_code(png_block(OVERSIZED)),
                  "image exceeds 5 MB maximum", 8000),
    "too-wide": ("messages", "api.anthropic.com", lambda: claude_code(png_block(image_bytes("png", 1, (8400, 60)))),
                 "At least one of the image dimensions exceed max allowed size: 8000 pixels", 8000),
    "many": ("messages", "api.anthropic.com",
             lambda: claude_code(*(png_block(image_bytes("png", k, (2600 if k % 7 == 3 else 500, 40)))
                                   for k in range(23))),
             "exceed max allowed size for many-image requests: 2000 pixels", 2000),
    "undecodable": ("messages", "api.anthropic.com", lambda: claude_code(png_block(b"\x89PNG\r\n\x1a\n-truncated-")),
                    "Could not process image", 8000),
    "svg": ("responses", "api.openai.com", lambda: codex(SVG, "image/svg+xml"),
            "The image data you provided does not represent a valid image", None),
    "webp-to-xai": ("chat", "api.x.ai", lambda: opencode(image_bytes("webp", 4, (90, 30)), "image/webp"),
                    "does not contain a valid JPG or PNG image", None),
    "gif-to-xai": ("chat", "api.x.ai", lambda: opencode(image_bytes("gif", 5, (30, 90), frames=3), "image/gif"),
                   "does not contain a valid JPG or PNG image", None),
}


def inline_images(dialect: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(declared type, base64) of every inline image, in document order."""
    found: list[tuple[str, str]] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if v.get("type") == "image" and isinstance(v.get("source"), dict) and v["source"].get("type") == "base64":
                found.append((v["source"]["media_type"], v["source"]["data"]))
                return
            url = v.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if v.get("type") in ("image_url", "input_image") and isinstance(url, str) and url.startswith("data:"):
                head, _, data = url.partition(",")
                found.append((head[5:].split(";")[0], data))
                return
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(body["messages" if dialect != "responses" else "input"])
    return found


def opened(data: str) -> Image.Image:
    im = Image.open(io.BytesIO(base64.b64decode(data)))
    im.load()
    return im


@pytest.mark.parametrize("case", list(CASES))
def test_without_llmfix_the_upstream_refuses_the_image(bare: Mitmdump, upstream: MockUpstream, case: str) -> None:
    dialect, host, body, text, _ = CASES[case]
    got = send(bare, dialect, host, body())
    assert isinstance(got, openai.APIStatusError | anthropic.APIStatusError)
    assert got.status_code == 400 and text in json.dumps(got.body)


@pytest.mark.parametrize("case", list(CASES))
def test_with_llmfix_each_image_is_fitted_once_and_the_next_turn_gets_the_same_bytes(
        fixed: Mitmdump, upstream: MockUpstream, case: str) -> None:
    dialect, host, make, _, side = CASES[case]
    body = make()
    sent = inline_images(dialect, body)
    conversions, seen = fixed.output().count(CONVERTED), fixed.output().count("fit-images: ")
    before = len(upstream.requests)
    answer = send(fixed, dialect, host, body)
    assert not isinstance(answer, openai.APIStatusError | anthropic.APIStatusError), answer
    got = inline_images(dialect, received(upstream, before))
    changes = wait_for_more(fixed, "fit-images: ", seen)  # its change line follows its conversions' lines
    assert fixed.output().count(CONVERTED) > conversions
    if case == "undecodable":
        assert got == [] and "image omitted: it cannot be decoded" in json.dumps(received(upstream, before))
    else:
        assert len(got) == len(sent)
        for (mime, data), (sent_mime, sent_data) in zip(got, sent, strict=True):
            if data == sent_data:
                continue  # an image within the limits left as it was
            im, original = opened(data), opened(sent_data) if sent_mime != "image/svg+xml" else None
            assert f"image/{im.format.lower()}" == mime and mime in ("image/png", "image/jpeg")
            if side is not None:
                assert max(im.size) <= side
            if original is not None:
                assert abs(im.size[1] - original.size[1] * im.size[0] / original.size[0]) < 1  # aspect ratio
    # the next turn resends the history, plus the model's answer and a new question
    later = copy.deepcopy(body)
    if dialect == "responses":
        later["input"] += [{"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                                                  "text": "A rectangle."}]},
                           {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Thanks"}]}]
    else:
        later["messages"] += [{"role": "assistant", "content": "Seen."}, {"role": "user", "content": "Thanks"}]
    mark = fixed.output().count(CONVERTED)
    before = len(upstream.requests)
    assert not isinstance(send(fixed, dialect, host, later), openai.APIStatusError | anthropic.APIStatusError)
    assert inline_images(dialect, received(upstream, before)) == got  # the very same bytes
    wait_for_more(fixed, "fit-images: ", changes)  # this turn's change lines: any conversion is printed before them
    assert fixed.output().count(CONVERTED) == mark  # and nothing was converted again


def test_a_gateway_in_front_of_claude_learns_its_image_limits_once(fixed: Mitmdump, upstream: MockUpstream) -> None:
    """A host llmfix has no profile for, answering as Anthropic does: the first oversized screenshot goes as the
    client sent it (an unknown upstream is assumed to take it), is refused with Anthropic's text, and is fitted and
    resent once; the client sees the 200. The next screenshot is fitted up front: one request, no rejection."""
    host = "claude.gateway.test"  # the mock answers it with Anthropic's rules; llmfix knows nothing of it
    before = len(upstream.requests)
    answer = send(fixed, "messages", host, claude_code(png_block(OVERSIZED)))
    assert not isinstance(answer, anthropic.APIStatusError), answer
    first, resent = upstream.requests[before:]
    assert (first.status, first.reason, resent.status) == (400, "image-too-large", 200)
    [(_, data)] = inline_images("messages", resent.json)
    assert len(data) <= 5_242_880 and opened(data).size == (1200, 1200)
    deadline = time.monotonic() + 20
    while "learned image_limits_anthropic=true" not in fixed.output():
        assert time.monotonic() < deadline, fixed.output()[-3000:]
        time.sleep(0.05)
    later = claude_code(png_block(noise_png(1200, 1201)))  # another screenshot, as large
    before = len(upstream.requests)
    assert not isinstance(send(fixed, "messages", host, later), anthropic.APIStatusError)
    [seen] = upstream.requests[before:]
    assert seen.status == 200 and len(inline_images("messages", seen.json)[0][1]) <= 5_242_880


CONTROLS = {  # valid requests the upstream takes as they are: byte-identical through llmfix
    "twenty-large-to-anthropic": ("messages", "api.anthropic.com",
                                  lambda: claude_code(*(png_block(image_bytes("png", k, (7900, 30)))
                                                        for k in range(20)))),
    "just-under-5mb-to-anthropic": ("messages", "api.anthropic.com",
                                    lambda: claude_code(png_block(padded_png(5_242_880 // 4 * 3)))),
    "png-to-xai": ("chat", "api.x.ai", lambda: opencode(image_bytes("png", 6, (60, 40)), "image/png")),
    "claude-code-as-captured": ("messages", "api.anthropic.com",
                                lambda: capture_json("claude-code/single_png__turn2.json")),
    "codex-as-captured": ("responses", "api.openai.com", lambda: capture_json("codex/turn2_request.json")),
    "twenty-one-screenshots-to-an-unknown-host": (  # Gemini's OpenAI-compatible API: no Anthropic rule applies
        "chat", "generativelanguage.googleapis.com",
        lambda: {"model": "gemini-2.5-pro", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Compare these."},
            *({"type": "image_url", "image_url": {"url": data_url(image_bytes("png", k, (2560, 16)))}}
              for k in range(21))]}]}),
}


@pytest.mark.parametrize("case", list(CONTROLS))
def test_images_within_the_limits_leave_byte_identical(fixed: Mitmdump, upstream: MockUpstream, case: str) -> None:
    dialect, host, make = CONTROLS[case]
    body = make()
    before = len(upstream.requests)
    with httpx.Client(proxy=fixed.url, verify=fixed.ssl_context(), trust_env=False, timeout=60) as c:
        raw = json.dumps(body).encode()
        path = {"messages": "/v1/messages", "responses": "/v1/responses", "chat": "/v1/chat/completions"}[dialect]
        if host == "generativelanguage.googleapis.com":
            path = "/v1beta/openai/chat/completions"  # the door's own path (the host's mock knows no other)
        response = c.post(f"https://{host}{path}", content=raw, headers={"content-type": "application/json",
                                                                         "authorization": "Bearer sk-test-1"})
    assert response.status_code == 200, response.text
    [seen] = upstream.requests[before:]
    assert seen.body == raw
