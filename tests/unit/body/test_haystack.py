"""`Haystack` answers ``needle in body`` like ``bytes`` does wherever a needle can mean something."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfix.body.haystack import _PAYLOAD_MARKERS, MIN_SIZE, Haystack, find, haystack
from llmfix.dialects.registry import DIALECTS
from llmfix.repairs import pipeline
from tests.conftest import FIXTURES

NEEDLES = sorted({n for r in pipeline.PIPELINE for d in DIALECTS for n in r.needles_for(d) or ()}
                 | {n for d in DIALECTS for n in (*d.tools.DECLARES, *d.tools.ANSWERS)})
BIG_PNG = "data:image/png;base64," + base64.b64encode(os.urandom(MIN_SIZE)).decode()
CAPTURES = sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*.json"))


def _grow(value: Any) -> Any:
    """``value`` with every image URL and base64 ``data`` replaced by a large payload (forces a Haystack)."""
    if isinstance(value, dict):
        out = {k: _grow(v) for k, v in value.items()}
        if isinstance(out.get("image_url"), str) or isinstance(out.get("url"), str):
            key = "image_url" if "image_url" in out else "url"
            out[key] = BIG_PNG
        if out.get("type") == "base64" and isinstance(out.get("data"), str):
            out["data"] = BIG_PNG.split(",", 1)[1]
        return out
    if isinstance(value, list):
        return [_grow(v) for v in value]
    return value


def test_needles_are_what_the_engine_and_repairs_ask() -> None:
    assert b'"tool"' in NEEDLES and b"_call_output" in NEEDLES and b"tool_use" in NEEDLES


@pytest.mark.parametrize("name", CAPTURES)
@pytest.mark.parametrize("style", ["compact", "spaced"])
def test_every_capture_answers_as_bytes_do(name: str, style: str) -> None:
    data = _grow(json.loads((FIXTURES / name).read_bytes()))
    body = orjson.dumps(data) if style == "compact" else json.dumps(data, indent=1).encode()
    hay = Haystack(body)  # whatever the size: the captures without images are small
    assert {n: n in hay for n in NEEDLES} == {n: n in body for n in NEEDLES}


def test_payloads_are_skipped_and_what_follows_them_is_searched() -> None:
    payload = "AAAA_call_output" + "B" * 100  # a needle inside base64url is not a token
    body = json.dumps({"input": [{"type": "input_image", "image_url": f"data:image/png;base64,{payload}"},
                                 {"type": "function_call_output", "call_id": "c", "output": "x"}]}).encode()
    hay = Haystack(body)
    assert b"_call_output" in hay
    only_payload = Haystack(json.dumps({"image_url": f"data:image/png;base64,{payload}"}).encode())
    assert b"_call_output" not in only_payload
    assert b"_call_output" not in Haystack(json.dumps({"source": {"data": payload}}).encode())


def test_an_escaped_quote_in_a_data_string_ends_the_skip_early_and_nothing_after_it_is_missed() -> None:
    body = json.dumps({"metadata": 'say "hi"', "messages": [{"role": "tool", "content": "x"}]},
                      separators=(",", ":")).encode()
    assert b'"tool"' in Haystack(body)


def test_small_bodies_are_searched_as_bytes() -> None:
    assert haystack(b'{"role":"tool"}') == b'{"role":"tool"}'


_KEYS = st.sampled_from(["data", "file_data", "metadata", "url", "image_url", "role", "type", "content", "x"])
_PIECES = [*'ab"\\:; ,_', "tool", "_call_output", ";base64,", 'data":"', "data:image/png;base64,", "tool_use"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=6).map("".join)
_JSON = st.recursive(st.none() | st.integers() | _TEXT,
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS | _TEXT, inner, max_size=4),
                     max_leaves=20)


def _must_find(value: Any, under: str | None = None) -> list[bytes]:
    """The JSON encodings of every key and string value that is not (part of) a payload llmfix may skip."""
    out: list[bytes] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if ";base64," not in k:
                out.append(json.dumps(k).encode())
            out += _must_find(v, k)
    elif isinstance(value, list):
        for v in value:
            out += _must_find(v)
    elif isinstance(value, str) and ";base64," not in value and not (under or "").endswith("data"):
        out.append(json.dumps(value).encode())
    return out


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(value=_JSON, spaced=st.booleans())
def test_generated_json_a_needle_found_is_there_and_a_token_outside_payloads_is_found(value: Any,
                                                                                         spaced: bool) -> None:
    body = json.dumps(value, separators=(", ", ": ") if spaced else (",", ":")).encode()
    hay = Haystack(body)
    for needle in NEEDLES:
        if needle in hay:
            assert needle in body
        if any(needle in token for token in _must_find(value)):
            assert needle in hay, (needle, body)


_BYTES = st.lists(st.sampled_from([b"a", b"b", b'"', b",", b";base64,", b'data":"', b'data": "', b"tool", b"\xff"]),
                  max_size=40).map(b"".join)


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(data=_BYTES, needle=_BYTES.map(lambda b: b[:12]), start=st.integers(0, 80), end=st.integers(0, 80))
def test_the_simd_search_answers_as_bytes_find_does(data: bytes, needle: bytes, start: int, end: int) -> None:
    assert find(data, needle) == data.find(needle)
    assert find(data, needle, start) == data.find(needle, start)
    assert find(data, needle, start, end) == data.find(needle, start, end)


def _reference_spans(data: bytes, start: int, n: int) -> list[tuple[int, int]]:
    """The spans outside payloads, found with ``bytes.find`` alone (what the haystack computed before SIMD)."""
    spans, pos = [], start
    while pos < n:
        found = [(j, m) for m in _PAYLOAD_MARKERS if (j := data.find(m, pos, n)) >= 0]
        if not found:
            break
        first, marker = min(found)
        closing = data.find(b'"', first + len(marker))
        if closing < 0:
            break
        spans.append((pos, first + len(marker)))
        pos = closing
    spans.append((pos, n))
    return spans


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(data=_BYTES, start=st.integers(0, 60), end=st.none() | st.integers(0, 80))
def test_the_spans_are_those_bytes_find_gives(data: bytes, start: int, end: int | None) -> None:
    hay = Haystack(data, start, end)
    n = len(data) if end is None else min(end, len(data))
    assert hay.spans == _reference_spans(data, start, n)
    for needle in (b"tool", b'"', b"a", b"ab", b";base64,"):
        want = next((j for a, b in hay.spans if (j := data.find(needle, a, b)) >= 0), -1)
        assert hay.find(needle) == want
