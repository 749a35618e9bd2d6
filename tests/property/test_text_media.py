"""Media for text-only models under generated input: text-only models never receive a media part;
restore-text-media restores exactly the recognised shapes and never changes a near-miss.

- Conversations generated as in ``test_promises`` (images, files and audio in tool results and user
  messages, Droid's interleaving, Anthropic image/document blocks), sent turn by turn to a model the
  profile, the catalogue or a profiles-file ``input = ["text"]`` says is text-only: no media part reaches
  the upstream, every text does, each media part has a ``dropped`` record naming its hash, DeepSeek's strict
  rules accept the Chat output, and it is idempotent, deterministic and prefix-stable.
- A generated serialized part array (AI SDK, OpenAI Chat/Responses, Anthropic shapes, mixed) or data URL in
  a tool result comes back as image parts with exactly the payloads it held, once, in order; any mutation
  of it (a stray character, an extra or missing key, an unknown type, a broken payload, no image left,
  pretty-printing) leaves the request byte-identical.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from llmfix import engine
from llmfix.body.media import digest
from llmfix.dialects.registry import named
from llmfix.engine import Request, Settings
from llmfix.profiles import parse_table
from llmfix.repairs.text_media import recognise
from tests.images import b64, image_bytes
from tests.property import promises
from tests.property.budget import BUDGET
from tests.property.strategies import CONVERSATIONS, HOSTS, PATHS

TEXT_ONLY_TABLE = parse_table({"models": {"my-text-model": {"input": ["text"]}}})
TARGETS = {  # (host, model, table): text-only by profile flag, by catalogue, by profiles file
    "deepseek-flag": (HOSTS["deepseek"], "deepseek-flash", None),
    "xai-catalogue": (HOSTS["xai"], "grok-4", None),
    "openai-profiles-file": (HOSTS["openai"], "my-text-model", TEXT_ONLY_TABLE),
}


def send(settings: Settings, dialect: str, host: str, raw: bytes) -> engine.Outcome:
    return engine.process(Request(named(dialect), host, 443, raw), settings)


def payload_digests(value: Any) -> list[str]:
    return [digest(promises.payload(p)) for p in promises.media(value)]


# DeepSeek's `media_input = false` is its Chat API's: its Anthropic endpoint takes images (profile
# deepseek-anthropic), so the flag target has no Messages case.
CASES = [(d, t) for t in TARGETS for d in CONVERSATIONS if not (t == "deepseek-flag" and d == "messages")]


@pytest.mark.parametrize(("dialect", "target"), CASES)
@BUDGET
@given(data=st.data())
def test_text_only_models_never_receive_a_media_part(dialect: str, target: str, data: st.DataObject) -> None:
    host, model, table = TARGETS[target]
    generated = data.draw(CONVERSATIONS[dialect]("openai"), label="conversation")  # media everywhere
    conv = dataclasses.replace(generated, host=host, model=model)
    settings = Settings(table=table) if table is not None else Settings()
    previous: list[Any] | None = None
    for turns in range(1, len(conv.chunks) + 1):
        raw, sent = conv.raw(turns), conv.body(turns)
        outcome = send(settings, dialect, host.name, raw)
        assert outcome.status != "failed", outcome.reason
        event(f"{dialect}/{target}: {'+'.join(outcome.repairs) or 'untouched'}")
        out, got = promises.body_of(raw, outcome)
        assert not list(promises.media(got)), f"a media part reached text-only {model}"
        out_strings = list(promises.strings(got))
        for text in promises.strings(sent):
            assert any(text in s for s in out_strings), f"text {text!r} is missing"
        dropped = " ".join(d for c in outcome.changes for d in c.dropped)
        for h in payload_digests(sent):
            assert f"sha256:{h}" in dropped, "a media part vanished without a dropped record"
        if dialect == "chat" and host.rules == "deepseek":
            promises.accepted("deepseek", PATHS[dialect], got)
        assert send(settings, dialect, host.name, out).status == "untouched", "not idempotent"
        assert promises.body_of(raw, send(settings, dialect, host.name, raw))[0] == out, "not deterministic"
        items = got[conv.key]
        if previous is not None:
            promises.is_prefix(previous, items)
        previous = items


# ------------------------------------------------------------------------------------ restore-text-media

images_ = st.tuples(st.sampled_from(["png", "jpeg", "webp", "gif"]), st.integers(0, 4095)).map(
    lambda f: (f"image/{f[0]}", b64(image_bytes(*f))))  # real images: every strict upstream decodes them
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@st.composite
def image_part(draw: Any) -> tuple[dict[str, Any], str, str]:
    """(part, mime, payload) in one of the recognised shapes."""
    mime, data = draw(images_)
    shape = draw(st.sampled_from(["image-data", "media", "file-data", "file", "image_url", "input_image", "image"]))
    if shape in ("image-data", "media", "file-data", "file"):
        part: dict[str, Any] = {"type": shape, "data": data, "mediaType": mime}
        if shape in ("file-data", "file") and draw(st.booleans()):
            part["filename"] = draw(st.sampled_from(["a.png", "shot 1.png"]))
    elif shape == "image_url":
        part = {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
    elif shape == "input_image":
        part = {"type": "input_image", "image_url": f"data:{mime};base64,{data}", "detail": "auto"}
    else:
        part = {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}
    return part, mime, data


@st.composite
def serialized(draw: Any) -> tuple[str, list[dict[str, Any]], list[str]]:
    """(the text, its parts, the data URLs of its images in order)."""
    if draw(st.integers(0, 5)) == 0:
        _, mime, data = draw(image_part())
        url = f"data:{mime};base64,{data}"
        return url, [], [url]
    images = draw(st.lists(image_part(), min_size=1, max_size=3))
    parts: list[dict[str, Any]] = [p for p, _, _ in images]
    for _ in range(draw(st.integers(0, 2))):
        text_type = draw(st.sampled_from(["text", "input_text"]))
        parts.insert(draw(st.integers(0, len(parts))), {"type": text_type, "text": draw(texts)})
    urls = [f"data:{m};base64,{d}" for _, m, d in images]
    return json.dumps(parts, separators=(",", ":"), ensure_ascii=draw(st.booleans())), parts, urls


def chat_body(content: str, model: str = "gpt-4.1") -> bytes:
    return json.dumps({"model": model, "messages": [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": content}]}).encode()


@BUDGET
@given(shape=serialized(), host=st.sampled_from(["api.openai.com", "api.x.ai", "llm.internal.example"]))
def test_recognised_shapes_come_back_as_exactly_their_images(shape: tuple[str, list[Any], list[str]],
                                                             host: str) -> None:
    text, parts, urls = shape
    outcome = send(Settings(), "chat", host, chat_body(text, "grok-4.3" if host == "api.x.ai" else "gpt-4.1"))
    got = json.loads(outcome.body)
    # xAI takes no WebP or GIF: fit-images sends such an image as a PNG, and says so
    fitted = {c.before["image_url"]["url"]: c.after["image_url"]["url"] for c in outcome.changes
              if c.repair == "fit-images"}
    refused = ("data:image/webp", "data:image/gif")
    assert set(fitted) <= {u for u in urls if host == "api.x.ai" and u.startswith(refused)}
    assert [p["image_url"]["url"] for p in promises.media(got)] == [fitted.get(u, u) for u in urls]  # once, in order
    kept = list(promises.strings(got))
    for p in parts:
        if p["type"] in ("text", "input_text"):
            assert any(p["text"] in s for s in kept)
    assert not any(u.partition(",")[2] in s for u in urls for s in kept), "base64 left in a text"
    assert send(Settings(), "chat", host, outcome.body).status == "untouched"


def _mutations(text: str, parts: list[dict[str, Any]], urls: list[str]) -> st.SearchStrategy[str]:
    """Texts that differ from a recognised shape in one way that must make it unrecognised."""
    compact = (",", ":")
    options: list[st.SearchStrategy[str]] = [
        st.sampled_from([" ", "\n", "x", "[", "]", "\ufeff", "0"]).map(lambda c: c + text),
        st.sampled_from([" ", "\n", "x", ",", "}", "0"]).map(lambda c: text + c),
        st.just(text.replace(urls[0].partition(",")[2], "!" + urls[0].partition(",")[2][1:])),  # broken payload
    ]
    if parts:
        n = len(parts)
        options += [
            st.integers(0, n - 1).map(lambda i: json.dumps([{**p, "x": 1} if k == i else p
                                                            for k, p in enumerate(parts)], separators=compact)),
            st.integers(0, n - 1).map(lambda i: json.dumps([{**p, "type": "image-blob"} if k == i else p
                                                            for k, p in enumerate(parts)], separators=compact)),
            st.just(json.dumps([p for p in parts if p["type"] in ("text", "input_text")], separators=compact)),
            st.just(json.dumps(parts, indent=1)),
            st.just(json.dumps({"parts": parts}, separators=compact)),
            st.just(json.dumps([parts], separators=compact)),
        ]
        for i, p in enumerate(parts):  # a required key missing
            for key in [k for k in p if k not in ("type", "detail", "filename")]:  # not the optional ones
                options.append(st.just(json.dumps([{k: v for k, v in q.items() if k != key} if j == i else q
                                                   for j, q in enumerate(parts)], separators=compact)))
    else:
        options += [st.just(urls[0].replace("data:image/", "data:application/", 1)),
                    st.just(urls[0].replace(";base64,", ",", 1))]
    return st.one_of(options)


@BUDGET
@given(data=st.data())
def test_near_misses_are_never_changed(data: st.DataObject) -> None:
    text, parts, urls = data.draw(serialized(), label="recognised shape")
    mutated = data.draw(_mutations(text, parts, urls), label="near miss")
    assert recognise(mutated) is None, mutated[:200]
    for host, model in (("api.openai.com", "gpt-4.1"), ("api.x.ai", "grok-4.3"), ("api.deepseek.com", "deepseek-chat")):
        assert send(Settings(), "chat", host, chat_body(mutated, model)).status == "untouched"
