"""fit-images on the captured Claude Code and Codex requests, their images replaced by ones the upstream refuses,
judged by the strict upstream rules (tests/upstreams/image_rules.py): refused as sent, accepted as repaired, and
nothing but the offending images changed."""

from __future__ import annotations

import asyncio
import base64
import copy
import io
import json
from typing import Any

import pytest
from PIL import Image

from llmfix import engine, images
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.profiles import parse_table
from llmfix.repairs import fit_images
from tests.conftest import fixture_json
from tests.images import b64, declared_png, image_bytes, noise_png
from tests.upstreams import rules

CLAUDE = "claude-code/single_png__turn2.json"  # messages[3].content[0]: a tool_result holding one image block
CODEX = "codex/turn2_request.json"  # input[5]: a function_call_output holding one input_image
BIG = noise_png(1200, 1200)  # 4.3 MB: 5.8 MB of base64, over Anthropic's 5242880
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 300 150"><circle cx="75" cy="75" r="60"/></svg>'


@pytest.fixture(autouse=True)
def fresh_cache():
    images.CACHE.clear()


def run(dialect: Dialect, host: str, body: dict[str, Any], table: Any = None) -> engine.Outcome:
    settings = engine.Settings(table=table) if table is not None else engine.Settings()
    return engine.process(engine.Request(dialect, host, 443, json.dumps(body).encode()), settings)


def block(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": b64(data)}}


def claude(*blocks: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(fixture_json(CLAUDE))
    body["messages"][3]["content"][0]["content"] = list(blocks)
    return body


def codex(data: bytes, mime: str) -> dict[str, Any]:
    body = copy.deepcopy(fixture_json(CODEX))
    body["input"][5]["output"][0]["image_url"] = f"data:{mime};base64,{b64(data)}"
    return body


def decoded(data: str) -> Image.Image:
    im = Image.open(io.BytesIO(base64.b64decode(data)))
    im.load()
    return im


def repaired(dialect: Dialect, host: str, body: dict[str, Any], rule_set: str) -> tuple[dict[str, Any], engine.Outcome]:
    path = {MESSAGES: "/v1/messages", RESPONSES: "/v1/responses", CHAT: "/v1/chat/completions"}
    assert rules.check(rule_set, path[dialect], body) is not None, "the strict upstream takes it as it is"
    outcome = run(dialect, host, body)
    assert outcome.status == "repaired", outcome.reason
    got = json.loads(outcome.body or b"")
    assert rules.check(rule_set, path[dialect], got) is None
    return got, outcome


def test_claude_code_oversized_screenshot_is_re_encoded_under_five_mb_of_base64() -> None:
    body = claude(block(BIG))
    rejection = rules.check("anthropic", "/v1/messages", body)
    assert rejection is not None and rejection.message == (
        f"messages.3.content.0.content.0.image.source.base64: image exceeds 5 MB maximum: {len(b64(BIG))} bytes > "
        "5242880 bytes")
    got, outcome = repaired(MESSAGES, "api.anthropic.com", body, "anthropic")
    source = got["messages"][3]["content"][0]["content"][0]["source"]
    assert source["media_type"] == "image/jpeg" and len(source["data"]) <= 5_242_880
    assert decoded(source["data"]).size == (1200, 1200)
    [change] = outcome.changes
    assert change.repair == "fit-images" and change.location == "messages[3].content[0].content[0]"
    assert "PNG 1200×1200" in change.summary and "→ JPEG 1200×1200" in change.summary
    assert f"{len(b64(BIG))} characters of base64 > 5242880" in change.summary
    assert b64(BIG)[100:140] not in json.dumps(change.record()) + change.line()  # never the base64
    assert got["messages"][:3] == body["messages"][:3] and got["messages"][4:] == body["messages"][4:]


def test_too_wide_is_downscaled_keeping_the_aspect_ratio() -> None:
    body = claude(block(image_bytes("png", 1, (8600, 43))))
    got, _ = repaired(MESSAGES, "api.anthropic.com", body, "anthropic")
    im = decoded(got["messages"][3]["content"][0]["content"][0]["source"]["data"])
    assert im.size == (8000, 40) and abs(im.size[1] - 43 * 8000 / 8600) < 1


def many(n: int, wide: set[int], width: int = 2400) -> dict[str, Any]:
    """Claude Code's request with ``n`` screenshots in its tool result, those in ``wide`` ``width`` px wide."""
    return claude(*(block(image_bytes("png", k, (width if k in wide else 600, 30))) for k in range(n)))


def test_past_twenty_images_each_is_held_to_2000_px_and_only_those_over_it_change() -> None:
    body = many(22, wide={3, 17})
    assert rules.check("anthropic", "/v1/messages", body).message.endswith(  # type: ignore[union-attr]
        "exceed max allowed size for many-image requests: 2000 pixels")
    got, outcome = repaired(MESSAGES, "api.anthropic.com", body, "anthropic")
    sent, out = body["messages"][3]["content"][0]["content"], got["messages"][3]["content"][0]["content"]
    assert [k for k in range(22) if sent[k] != out[k]] == [3, 17]
    assert decoded(out[3]["source"]["data"]).size == (2000, 25)
    assert all("the request holds 22 images: more than 20" in c.summary for c in outcome.changes)


def test_twenty_large_images_are_a_valid_request_left_byte_identical() -> None:
    body = many(20, wide=set(range(20)), width=7900)
    assert rules.check("anthropic", "/v1/messages", body) is None
    assert run(MESSAGES, "api.anthropic.com", body).status == "untouched"


def test_the_count_is_of_what_the_upstream_receives() -> None:
    """21 images, one of which cannot be decoded: its placeholder leaves 20, under the many-image rule."""
    body = claude(*(block(image_bytes("png", k, (2400, 30))) for k in range(20)), block(b"garbage"))
    got, outcome = repaired(MESSAGES, "api.anthropic.com", body, "anthropic")
    [change] = outcome.changes
    assert change.dropped and "cannot be decoded" in change.summary
    assert got["messages"][3]["content"][0]["content"][:20] == body["messages"][3]["content"][0]["content"][:20]


def test_an_undecodable_image_becomes_a_visible_placeholder_with_a_dropped_record() -> None:
    body = claude(block(b"\x89PNG\r\n\x1a\nnot really"))
    assert rules.check("anthropic", "/v1/messages", body).message == "Could not process image"  # type: ignore
    got, outcome = repaired(MESSAGES, "api.anthropic.com", body, "anthropic")
    [placeholder] = got["messages"][3]["content"][0]["content"]
    assert placeholder["type"] == "text" and placeholder["text"].startswith("[image omitted: it cannot be decoded")
    [change] = outcome.changes
    assert len(change.dropped) == 1 and "sha256:" in change.dropped[0]


def test_a_mislabelled_image_gets_its_true_media_type_and_keeps_its_bytes() -> None:
    jpeg = image_bytes("jpeg", 2, (40, 30))
    body = claude(block(jpeg, "image/png"))
    assert "Image does not match the provided media type image/png" in rules.check(  # type: ignore[union-attr]
        "anthropic", "/v1/messages", body).message
    got, _ = repaired(MESSAGES, "api.anthropic.com", body, "anthropic")
    source = got["messages"][3]["content"][0]["content"][0]["source"]
    assert source == {"type": "base64", "media_type": "image/jpeg", "data": b64(jpeg)}


def test_a_user_message_image_is_fitted_where_it_is() -> None:
    body = copy.deepcopy(fixture_json(CLAUDE))
    body["messages"].append({"role": "assistant", "content": [{"type": "text", "text": "Looked."}]})
    body["messages"].append({"role": "user", "content": [{"type": "text", "text": "And this?"},
                                                         block(image_bytes("webp", 1, (9000, 9)), "image/webp")]})
    got, outcome = repaired(MESSAGES, "api.anthropic.com", body, "anthropic")
    assert got["messages"][-1]["content"][1]["source"]["media_type"] == "image/png"  # lossless first
    assert decoded(got["messages"][-1]["content"][1]["source"]["data"]).size == (8000, 8)
    assert [c.location for c in outcome.changes] == [f"messages[{len(body['messages']) - 1}].content[1]"]


def test_codex_view_image_of_an_svg_is_rasterized_for_openai() -> None:
    body = codex(SVG, "image/svg+xml")
    assert "does not represent a valid image" in rules.check("openai", "/v1/responses", body).message  # type: ignore
    got, outcome = repaired(RESPONSES, "api.openai.com", body, "openai")
    part = got["input"][5]["output"][0]
    assert part["detail"] == "original" and part["image_url"].startswith("data:image/png;base64,")
    assert decoded(part["image_url"].partition(",")[2]).size == (300, 150)
    assert outcome.changes[0].location == "input[5].output[0]" and "rasterized" in outcome.changes[0].summary


def test_codex_animated_gif_goes_to_openai_as_a_still() -> None:
    got, outcome = repaired(RESPONSES, "api.openai.com",
                            codex(image_bytes("gif", 3, (8, 8), frames=5), "image/gif"), "openai")
    assert got["input"][5]["output"][0]["image_url"].startswith("data:image/png;base64,")
    assert "first frame of 5" in outcome.changes[0].summary


@pytest.mark.parametrize("fmt", ["webp", "gif"])
def test_xai_gets_png_for_a_webp_or_gif(fmt: str) -> None:
    body = fixture_json("opencode/chat__mock-vision__two_png__turn2.json")
    user = next(m for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                and any(p.get("type") == "image_url" for p in m["content"]))
    part = next(p for p in user["content"] if p.get("type") == "image_url")
    part["image_url"]["url"] = f"data:image/{fmt};base64,{b64(image_bytes(fmt, 1, (7, 3)))}"
    assert rules.check("xai", "/v1/chat/completions", body).message == (  # type: ignore[union-attr]
        "Invalid request content: Downloaded response does not contain a valid JPG or PNG image.")
    _, outcome = repaired(CHAT, "api.x.ai", body, "xai")
    assert len(outcome.changes) == 1 and "→ PNG 7×3" in outcome.changes[0].summary


@pytest.mark.parametrize(("name", "dialect", "host"), [
    (CLAUDE, MESSAGES, "api.anthropic.com"),
    (CODEX, RESPONSES, "api.openai.com"),
    ("opencode/chat__mock-vision__two_png__turn2.json", CHAT, "api.x.ai"),
    ("pi-ai/anthropic_messages.json", MESSAGES, "llm.internal.example"),
])
def test_captures_whose_images_fit_are_untouched(name: str, dialect: Dialect, host: str) -> None:
    assert run(dialect, host, fixture_json(name)).status == "untouched"


def test_a_png_whose_base64_is_just_under_five_mb_is_untouched() -> None:
    from tests.images import padded_png

    data = padded_png(5_242_880 // 4 * 3)
    assert len(b64(data)) == 5_242_880
    assert run(MESSAGES, "api.anthropic.com", claude(block(data))).status == "untouched"


def test_images_by_url_or_file_id_are_left_alone() -> None:
    body = claude({"type": "image", "source": {"type": "url", "url": "https://img.example/a.svg"}},
                  {"type": "image", "source": {"type": "file", "file_id": "file_1"}})
    assert run(MESSAGES, "api.anthropic.com", body).status == "untouched"


def interrupted_chat(image_url: str) -> dict[str, Any]:
    """A Chat request with an image and an interrupted tool call (no result): pair-tool-calls has work to do."""
    return {"model": "gpt-4.1", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "see"},
                                     {"type": "image_url", "image_url": {"url": image_url}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "user", "content": "interrupted; go on"}]}


def test_an_image_over_llmfixs_decoding_bound_stays_as_it_is_and_the_rest_is_repaired(caplog) -> None:
    bomb = f"data:image/png;base64,{b64(declared_png(9000, 9000))}"  # 81 megapixels once decoded
    big = f"data:image/svg+xml;base64,{b64(SVG)}"  # the other image: still fitted
    body = interrupted_chat(bomb)
    body["messages"][0]["content"].append({"type": "image_url", "image_url": {"url": big}})
    req = engine.Request(CHAT, "api.openai.com", 443, json.dumps(body).encode(), flow_id="f1a2b3c4-5678")
    with caplog.at_level("WARNING", logger="llmfix"):
        outcome = engine.process(req, engine.Settings())
    assert outcome.status == "repaired" and sorted(outcome.repairs) == ["fit-images", "pair-tool-calls"]
    got = json.loads(outcome.body or b"")
    assert got["messages"][0]["content"][1]["image_url"]["url"] == bomb  # byte for byte
    assert got["messages"][0]["content"][2]["image_url"]["url"].startswith("data:image/png;base64,")
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning.startswith("llmfix: flow f1a2b3c4 (api.openai.com:443/chat): fit-images: 1 image(s) left")
    assert "messages[0].content[1]: image of 9000×9000 px" in warning and "decoding bound" in warning


def test_a_long_strip_is_bounded_by_its_pixels_not_its_side() -> None:
    strip = image_bytes("png", 3, (41_000, 8), mode="L")  # 0.3 megapixels
    body = interrupted_chat(f"data:image/png;base64,{b64(strip)}")
    outcome = run(CHAT, "api.openai.com", body)
    assert outcome.repairs == ["pair-tool-calls"]  # OpenAI takes it as it is
    fitted = run(MESSAGES, "api.anthropic.com", claude(block(strip)))
    [change] = fitted.changes
    assert "→ PNG 8000×2" in change.summary  # Anthropic's 8000 px: downscaled


def test_a_profile_without_image_limits_does_not_look() -> None:
    table = parse_table({"hosts": {"gw.example": {"image_formats": [], "image_max_base64": 0, "image_max_side": 0,
                                                  "image_many_side": 0, "image_gif_animated": True,
                                                  "image_media_type_checked": False}}})
    assert run(MESSAGES, "gw.example", claude(block(BIG)), table).status == "untouched"
    assert fit_images.rules_of(table.resolve("gw.example", 443, None).profile) is None


def test_the_next_turn_gets_the_same_bytes_without_converting_again() -> None:
    body = claude(block(BIG))
    first = run(MESSAGES, "api.anthropic.com", body)
    converted = images.CACHE.converted
    body["messages"].append({"role": "assistant", "content": [{"type": "text", "text": "It is noise."}]})
    body["messages"].append({"role": "user", "content": [{"type": "text", "text": "Thanks."}]})
    second = run(MESSAGES, "api.anthropic.com", body)
    assert images.CACHE.converted == converted  # nothing decoded or converted for the turn
    before, after = json.loads(first.body or b""), json.loads(second.body or b"")
    assert after["messages"][: len(before["messages"])] == before["messages"]


def test_on_the_event_loop_image_work_is_deferred_not_done() -> None:
    body = codex(SVG, "image/svg+xml")

    async def on_loop() -> engine.Outcome:
        return run(RESPONSES, "api.openai.com", body)

    assert asyncio.run(on_loop()).status == "deferred"
    assert run(RESPONSES, "api.openai.com", body).status == "repaired"  # in a worker: done, remembered
    assert asyncio.run(on_loop()).status == "repaired"  # remembered: no work left for the loop


def test_the_certain_check_carries_the_image_count_from_turn_to_turn() -> None:
    """20 images of 2400 px are fine; the turn that brings the 21st is not (every earlier one must shrink), and
    the check knows it from its state alone, looking at the new items only."""
    from llmfix.body.conversation import loads, parse
    from llmfix.profiles import ProfileTable
    from llmfix.repairs.base import Context

    body = claude(*(block(image_bytes("png", k, (2400, 8))) for k in range(20)))
    profile = ProfileTable().resolve("api.anthropic.com", 443, None, MESSAGES).profile
    ctx = Context(MESSAGES, profile, None, None)
    items = parse(MESSAGES, loads(json.dumps(body).encode())).items  # type: ignore[union-attr]
    state = fit_images.REPAIR.extend(None, items, 0, ctx)  # type: ignore[misc]
    assert state == (20, 2400)
    more = [*items, *parse(MESSAGES, {"messages": [
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [block(image_bytes("png", 99, (30, 30)))]}]}).items]  # type: ignore[union-attr]
    assert fit_images.REPAIR.extend(state, more, len(items), ctx) is None  # type: ignore[misc]
    # the same turn after a history whose images are all at most 2000 px: 21 images are fine
    assert fit_images.REPAIR.extend((20, 1999), more, len(items), ctx) == (21, 1999)  # type: ignore[misc]


def test_an_image_that_cannot_be_made_small_enough_becomes_a_placeholder() -> None:
    table = parse_table({"hosts": {"tiny.example": {"base": "anthropic", "image_max_base64": 40}}})
    outcome = run(MESSAGES, "tiny.example", claude(block(noise_png(64, 64))), table)
    [change] = outcome.changes
    assert "cannot be made to fit" in change.summary and change.dropped


GEMINI = "llm.gateway.example"  # an upstream llmfix has no profile for: "spec"


def chat_with(*urls: str) -> dict[str, Any]:
    return {"model": "gemini-2.5-pro", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "compare"}, *({"type": "image_url", "image_url": {"url": u}} for u in urls)]}]}


def test_an_unknown_host_gets_the_images_the_client_sent() -> None:
    """21 screenshots of 2560 px, an animated GIF, a mislabelled JPEG, a HEIC photo and a truncated PNG: valid for
    Gemini (or a local server), whatever Anthropic's or OpenAI's limits are. Byte-identical."""
    shots = [f"data:image/png;base64,{b64(image_bytes('png', k, (2560, 16)))}" for k in range(21)]
    heic = b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + bytes(64)
    odd = [f"data:image/gif;base64,{b64(image_bytes('gif', 1, (64, 64), frames=3))}",
           f"data:image/png;base64,{b64(image_bytes('jpeg', 2, (30, 20)))}",
           f"data:image/heic;base64,{b64(heic)}",
           f"data:image/png;base64,{b64(image_bytes('png', 3, (300, 20))[:-30])}"]
    raw = json.dumps(chat_with(*shots, *odd)).encode()
    outcome = engine.process(engine.Request(CHAT, GEMINI, 443, raw), engine.Settings())
    assert outcome.status == "untouched" and outcome.profile == "spec"


@pytest.mark.parametrize("fmt", ["bmp", "tiff"])
def test_an_unknown_host_gets_what_no_upstream_takes_as_png(fmt: str) -> None:
    body = chat_with(f"data:image/{fmt};base64,{b64(image_bytes(fmt, 4, (33, 21)))}",
                     f"data:image/svg+xml;base64,{b64(SVG)}")
    outcome = run(CHAT, GEMINI, body)
    got = json.loads(outcome.body or b"")["messages"][0]["content"]
    for part, size in zip(got[1:], [(33, 21), (300, 150)], strict=True):
        head, _, data = part["image_url"]["url"].partition(",")
        assert head == "data:image/png;base64" and decoded(data).size == size
    assert got[0] == body["messages"][0]["content"][0]


def test_an_unknown_host_that_learned_anthropics_limits_is_fitted_to_them() -> None:
    from llmfix.retry.decide import Fixed

    body = claude(block(image_bytes("png", 5, (8400, 60))), block(b"\x89PNG\r\n\x1a\n-truncated-"))
    raw = json.dumps(body).encode()
    plain = engine.process(engine.Request(MESSAGES, "claude.gateway.test", 443, raw), engine.Settings())
    assert plain.status == "untouched"  # not known yet: as the client sent it
    assert rules.check("anthropic", "/v1/messages", body) is not None
    learned = engine.Settings(quirks=Fixed((("image_limits_anthropic", True),)))
    outcome = engine.process(engine.Request(MESSAGES, "claude.gateway.test", 443, raw), learned)
    assert outcome.profile == "spec+learned" and len(outcome.changes) == 2
    assert rules.check("anthropic", "/v1/messages", json.loads(outcome.body or b"")) is None


def test_the_next_turn_of_a_session_over_the_limits_hashes_each_image_once(monkeypatch) -> None:
    """A Claude Code session with three screenshots over 5 MB of base64 in its history: every turn is repaired
    again (from the image cache), and hashes each payload once — for the cache, the diff lines and the records
    alike — the three sent and the three fitted (there is no verdict to carry over a repaired turn)."""
    import hashlib

    shots = [b64(noise_png(1200, 1200, seed=k)) for k in range(3)]
    body = claude(*({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": d}}
                    for d in shots))
    first = run(MESSAGES, "api.anthropic.com", body)
    assert first.status == "repaired" and len(first.changes) == 3
    body["messages"] += [{"role": "assistant", "content": [{"type": "text", "text": "Three screenshots."}]},
                         {"role": "user", "content": [{"type": "text", "text": "And now?"}]}]
    hashed: list[int] = []
    real = hashlib.sha256

    class Counting:  # the bytes each large SHA-256 went over
        def __init__(self, data: bytes = b"") -> None:
            self.h, self.n = real(data), len(data)

        def update(self, data: bytes) -> None:
            self.h.update(data)
            self.n += len(data)

        def digest(self) -> bytes:
            if self.n > 65536:
                hashed.append(self.n)
            return self.h.digest()

        def hexdigest(self) -> str:
            return self.digest().hex()

    monkeypatch.setattr(hashlib, "sha256", Counting)
    second = run(MESSAGES, "api.anthropic.com", body)
    assert second.status == "repaired" and images.CACHE.hits >= 3
    fitted = [b["source"]["data"] for b in json.loads(second.body or b"")["messages"][3]["content"][0]["content"]]
    assert sorted(hashed) == sorted(len(d) for d in shots + fitted)


def test_a_request_of_many_large_images_hashes_each_no_more_often_than_one_of_a_few(monkeypatch) -> None:
    """Each large payload is hashed once a request for the image cache, its diff lines and its record, however
    many images the request holds (a long Claude Code session: more than 32 screenshots)."""
    import hashlib

    from llmfix.body import media

    real = hashlib.sha256
    calls: list[int] = []

    def counted(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(media, "hashlib", type("Hashlib", (), {"sha256": staticmethod(counted)}))

    def hashes(n: int) -> int:
        calls.clear()
        images.CACHE.clear()
        blocks = [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                               "data": b64(noise_png(3000, 12, seed=k))}} for k in range(n)]
        body = {"model": "claude-sonnet-4-5", "max_tokens": 10,
                "messages": [{"role": "user", "content": [*blocks, {"type": "text", "text": "what changed?"}]}]}
        out = engine.process(engine.Request(MESSAGES, "api.anthropic.com", 443, json.dumps(body).encode(),
                                            None, "flow"), engine.Settings(prefix=None))
        assert out.status == "repaired" and len(out.changes) == n  # each one over the many-image side limit
        return len(calls)

    assert hashes(40) / 40 == hashes(21) / 21
