"""`llmfix.body.dumps.dumps` is `orjson.dumps`, byte for byte, however its big strings are sliced."""

from __future__ import annotations

import base64
import os
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfix.body import dumps

_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ['"', "\\", "\n\t\x00\x1f", "é€😀", "\ue000llmfix-big-string:0:0\ue000", "</script>", "\u2028"])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(value=_JSON, big=st.integers(1, 12), slice_chars=st.integers(1, 7))
def test_same_bytes_as_orjson_for_any_threshold_and_slice(value: Any, big: int, slice_chars: int) -> None:
    assert dumps.dumps(value, big=big, slice_chars=slice_chars) == orjson.dumps(value)


def test_a_real_sized_image_body_and_the_input_left_as_it_was() -> None:
    url = "data:image/png;base64," + base64.b64encode(os.urandom(3 * dumps.BIG)).decode()
    body = {"model": "grok-4", "input": [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "two images"}, {"type": "input_image", "image_url": url},
        {"type": "input_image", "image_url": url[:-8] + "AAAAAAA="}]}], "stream": True}
    before = orjson.dumps(body)
    assert dumps.dumps(body) == before
    assert orjson.dumps(body) == before  # the containers along the way were copied, not changed


def test_nothing_big_is_plain_orjson() -> None:
    assert dumps.dumps({"a": ["b" * 100]}) == orjson.dumps({"a": ["b" * 100]})
