"""A data URL's reference: MIME type, decoded size and the sha256 of its payload, computed a slice at a time."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest

from llmfix.body.media import _ref_for_url


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 100, (1 << 20) - 1, 3 << 20])
def test_a_base64_data_url_has_its_true_size_and_hash(n: int) -> None:
    raw = os.urandom(n)
    payload = base64.b64encode(raw).decode()
    ref = _ref_for_url(f"data:image/png;base64,{payload}", "image")
    assert (ref.mime, ref.size) == ("image/png", n)
    assert ref.digest == hashlib.sha256(payload.encode()).hexdigest()[:8]


def test_a_non_ascii_data_url_is_hashed_from_its_utf8_bytes() -> None:
    ref = _ref_for_url("data:text/plain,héllo", "file")
    assert ref.mime == "text/plain" and ref.size == len("héllo".encode())
    assert ref.digest == hashlib.sha256("héllo".encode()).hexdigest()[:8]
