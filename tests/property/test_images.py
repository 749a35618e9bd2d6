"""fit-images under generated histories of generated images (Chat, Responses, Messages; Anthropic, OpenAI, xAI, an
unknown host, and an unknown host that learned Anthropic's or OpenAI's limits from a rejection): images that fit,
too wide, wide enough to matter only past 20 images, truncated, SVG, BMP, animated GIF, WebP, mislabelled, by URL,
in user messages and tool results, up to 24 in one request.

Which images an upstream refuses is decided here from the upstreams' published rules (independently of llmfix's
code), and for every request: only those images change; each is still there, decoding, within the limits, its
aspect ratio kept within a pixel — or, when that upstream refuses what it cannot decode, a placeholder with a
``dropped`` record; every other byte of the request is kept; the strict mock accepts it (an unknown host: only
what no upstream takes is converted, the rest is as sent); the same request gives the same bytes with an empty
image cache; the output sent again is untouched.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from PIL import Image

from llmfix import engine, images
from llmfix.body.media import digest
from llmfix.dialects.registry import named
from llmfix.engine import Request, Settings
from llmfix.retry.decide import Fixed
from tests.images import b64, image_bytes
from tests.property.budget import BUDGET
from tests.upstreams import rules

SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20"/></svg>'


@dataclass(frozen=True)
class Kind:
    name: str
    fmt: str  # what the bytes are ("bad": none)
    declared: str  # the MIME type the client declares
    size: tuple[int, int] = (3, 2)
    frames: int = 1

    def data(self, seed: int) -> bytes:
        if self.fmt == "bad":
            return image_bytes("png", seed)[: 12 + seed % 20]
        if self.fmt == "svg":
            return SVG
        return image_bytes(self.fmt, seed, self.size, frames=self.frames)


KINDS = {k.name: k for k in (
    Kind("fits", "png", "image/png"), Kind("fits-jpeg", "jpeg", "image/jpeg"),
    Kind("wide", "png", "image/png", (8200, 2)), Kind("mid", "jpeg", "image/jpeg", (2400, 3)),
    Kind("broken", "bad", "image/png"), Kind("svg", "svg", "image/svg+xml"),
    Kind("animated", "gif", "image/gif", (4, 4), 3), Kind("webp", "webp", "image/webp"),
    Kind("mislabelled", "jpeg", "image/png"), Kind("url", "url", ""), Kind("bmp", "bmp", "image/bmp"),
)}


@dataclass(frozen=True)
class Upstream:
    host: str
    vendor: str | None  # whose image rules it keeps (None: unknown, assumed to take what the client sends)
    dialects: tuple[str, ...]
    learned: tuple[tuple[str, bool], ...] = ()  # flags learned from its rejections (repair-and-retry)


UNKNOWN = "llm.internal.example"
UPSTREAMS = {u.host if not u.learned else f"{u.host}+{u.vendor}": u for u in (
    Upstream("api.anthropic.com", "anthropic", ("messages",)),
    Upstream("api.openai.com", "openai", ("chat", "responses")),
    Upstream("api.x.ai", "xai", ("chat",)),
    Upstream(UNKNOWN, None, ("chat", "responses", "messages")),
    Upstream(UNKNOWN, "anthropic", ("messages",), (("image_limits_anthropic", True),)),
    Upstream(UNKNOWN, "openai", ("chat", "responses"), (("image_limits_openai", True),)),
)}
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def refused(kind: Kind, vendor: str | None, count: int) -> bool:
    """Whether this upstream refuses the image (``count``: images in the request, as the upstream counts them),
    from the published rules (session-killers.md §4). An unknown host is not held to any vendor's rules: only
    what no upstream takes (SVG, BMP) is converted for it."""
    if kind.name == "url":
        return False
    if kind.name in ("svg", "bmp"):
        return True
    if vendor is None:
        return False
    if kind.name == "broken":
        return True
    if kind.name == "animated":
        return vendor != "anthropic"
    if kind.name == "webp":
        return vendor == "xai"
    if kind.name in ("mislabelled", "wide"):
        return vendor == "anthropic"
    if kind.name == "mid":
        return vendor == "anthropic" and count > 20
    return False


def _part(dialect: str, kind: Kind, seed: int) -> dict[str, Any]:
    if kind.name == "url":
        url = f"https://img.example/{seed}.png"
        if dialect == "messages":
            return {"type": "image", "source": {"type": "url", "url": url}}
        return {"type": "image_url", "image_url": {"url": url}} if dialect == "chat" else \
            {"type": "input_image", "image_url": url, "detail": "auto"}
    data = b64(kind.data(seed))
    if dialect == "messages":
        return {"type": "image", "source": {"type": "base64", "media_type": kind.declared, "data": data}}
    url = f"data:{kind.declared};base64,{data}"
    if dialect == "chat":
        return {"type": "image_url", "image_url": {"url": url, "detail": "high"}}
    return {"type": "input_image", "image_url": url, "detail": "auto"}


@st.composite
def histories(draw: st.DrawFn, dialect: str, host: str) -> tuple[dict[str, Any], list[tuple[Kind, int]]]:
    """A request whose images are drawn kinds; (the body, each image's kind and seed in document order)."""
    kinds = list(KINDS.values())
    groups = draw(st.lists(st.lists(st.tuples(st.sampled_from(kinds), st.integers(0, 63)), min_size=1, max_size=6),
                           min_size=1, max_size=6))
    drawn: list[tuple[Kind, int]] = []
    items: list[dict[str, Any]] = [{"role": "user", "content": "Look at these."}]
    for n, group in enumerate(groups):
        parts = [_part(dialect, k, s) for k, s in group]
        drawn += group
        in_tool = dialect != "chat" and draw(st.booleans())
        if dialect == "messages" and in_tool:
            items.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "Read",
                                                            "input": {"file_path": f"{n}.png"}}]})
            items.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}",
                                                       "content": [{"type": "text", "text": f"file {n}"}, *parts]},
                                                      {"type": "text", "text": f"and {n}?"}]})
        elif dialect == "responses" and in_tool:
            items.append({"type": "function_call", "call_id": f"call_{n}", "name": "view_image",
                          "arguments": json.dumps({"path": f"{n}.png"})})
            items.append({"type": "function_call_output", "call_id": f"call_{n}", "output": parts})
        else:
            text = {"messages": "text", "chat": "text", "responses": "input_text"}[dialect]
            items.append({"role": "user", "content": [{"type": text, "text": f"image set {n}"}, *parts]})
        if dialect != "responses":
            items.append({"role": "assistant", "content": f"seen {n}"})
    key = "input" if dialect == "responses" else "messages"
    return {"model": draw(st.sampled_from(["claude-sonnet-4-5", "gpt-5", "grok-4.3", "mock-model"])), key: items,
            "max_tokens": 64}, drawn


def image_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Where every image part is, in document order."""
    if isinstance(value, dict):
        if value.get("type") in ("image", "image_url", "input_image"):
            return [path]
        return [p for k, v in value.items() for p in image_paths(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in image_paths(v, (*path, i))]
    return []


def at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def inline(part: dict[str, Any]) -> tuple[str, str] | None:
    if part["type"] == "image":
        src = part["source"]
        return (src["media_type"], src["data"]) if src["type"] == "base64" else None
    url = part["image_url"]["url"] if part["type"] == "image_url" else part["image_url"]
    if not url.startswith("data:"):
        return None
    head, _, data = url.partition(",")
    return head[5:].split(";")[0], data


def masked(body: Any, paths: list[tuple[Any, ...]]) -> Any:
    """``body`` with every image part replaced by a marker: what must stay byte-identical."""
    copy = json.loads(json.dumps(body))
    for p in paths:
        at(copy, p[:-1])[p[-1]] = "<image>"
    return copy


def send(dialect: str, upstream: Upstream, raw: bytes) -> engine.Outcome:
    return engine.process(Request(named(dialect), upstream.host, 443, raw), Settings(quirks=Fixed(upstream.learned)))


CASES = [(d, name) for name, u in UPSTREAMS.items() for d in u.dialects]


@pytest.mark.parametrize(("dialect", "name"), CASES)
@BUDGET
@given(data=st.data())
def test_only_refused_images_change_and_each_is_still_there(dialect: str, name: str, data: st.DataObject) -> None:
    upstream = UPSTREAMS[name]
    vendor = upstream.vendor
    body, drawn = data.draw(histories(dialect, upstream.host), label="request")
    raw = json.dumps(body).encode()
    outcome = send(dialect, upstream, raw)
    assert outcome.status in ("untouched", "repaired"), outcome.reason
    got = json.loads(outcome.body) if outcome.status == "repaired" else body
    paths = image_paths(body)
    assert len(paths) == len(drawn)
    count = sum(1 for kind, _ in drawn if kind.name != "broken" or vendor is None)  # what the upstream receives
    limit = 2000 if count > 20 and vendor == "anthropic" else 8000
    dropped = [d for c in outcome.changes for d in c.dropped]
    changed = 0
    for path, (kind, _seed) in zip(paths, drawn, strict=True):
        sent, out = at(body, path), at(got, path)
        if not refused(kind, vendor, count):
            assert out == sent, f"{kind.name} changed for {name}"
            continue
        changed += 1
        if kind.name == "broken":
            assert out["type"] in ("text", "input_text") and " omitted: it cannot be decoded" in out["text"]
            assert any(f"sha256:{digest(inline(sent)[1])}" in d for d in dropped)  # type: ignore[index]
            continue
        mime, payload = inline(out)  # type: ignore[misc]
        im = Image.open(io.BytesIO(base64.b64decode(payload)))
        im.load()
        assert mime == f"image/{im.format.lower()}" and mime in ("image/png", "image/jpeg"), (kind.name, mime)
        assert getattr(im, "n_frames", 1) == 1
        if vendor == "anthropic":
            assert max(im.size) <= limit and len(payload) <= 5_242_880
        if kind.fmt != "svg":
            w, h = kind.size
            assert abs(im.size[1] - h * im.size[0] / w) < 1, "aspect ratio not kept"
        if kind.name == "mislabelled":
            assert payload == inline(sent)[1]  # type: ignore[index]  # only its declared type changed
    event(f"{changed} image(s) fitted" if changed else "nothing to fit")
    assert (outcome.status == "repaired") == bool(changed)
    assert masked(got, paths) == masked(body, paths), "something other than an image changed"
    if vendor is not None:
        rejection = rules.check(vendor, PATHS[dialect], got)
        assert rejection is None, rejection
    images.CACHE.clear()
    assert send(dialect, upstream, raw).body == outcome.body, "not deterministic"
    if outcome.status == "repaired":
        assert outcome.body is not None
        assert send(dialect, upstream, outcome.body).status == "untouched", "not idempotent"
