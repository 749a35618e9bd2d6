"""Request body Content-Encoding: strict decoding, and encoding back to the same encoding."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest

from llmfix.body import codec

try:
    from compression import zstd  # type: ignore[import-not-found]
except ImportError:
    from backports import zstd  # type: ignore[no-redef]

BODY = b'{"model": "m", "input": []}' * 50


@pytest.mark.parametrize("ce", ["gzip", "x-gzip", "deflate", "br", "zstd", "identity", "", " GZIP "])
def test_round_trip(ce: str) -> None:
    assert codec.decode(codec.encode(BODY, ce), ce) == BODY


@pytest.mark.parametrize(
    ("raw", "ce"),
    [
        (gzip.compress(BODY, mtime=0) + gzip.compress(b"more", mtime=0), "gzip"),  # two members
        (zlib.compress(BODY)[2:-4], "deflate"),  # raw deflate, no zlib wrapper
        (zstd.compress(BODY) + zstd.compress(b"more"), "zstd"),  # two frames
    ],
)
def test_valid_variants_decode(raw: bytes, ce: str) -> None:
    assert codec.decode(raw, ce).startswith(BODY)


def test_zstd_frame_without_content_size_decodes() -> None:
    c = zstd.ZstdCompressor()
    frame = c.compress(BODY, zstd.ZstdCompressor.FLUSH_FRAME)  # streaming: no content size in the header
    assert codec.decode(frame, "zstd") == BODY


@pytest.mark.parametrize(
    ("raw", "ce", "reason"),
    [
        (gzip.compress(BODY, mtime=0)[:-12], "gzip", "truncated"),
        (b"\x1f\x8b\x08\x00garbage", "gzip", "cannot decode"),
        (brotli.compress(BODY)[:-3], "br", "cannot decode|truncated"),
        (zstd.compress(BODY)[:-5], "zstd", "cannot decode|truncated"),
        (b"not deflate", "deflate", "deflate"),
        (BODY, "gzip, br", "stacked"),
        (BODY, "snappy", "unknown"),
    ],
)
def test_broken_bodies_raise_with_the_reason(raw: bytes, ce: str, reason: str) -> None:
    with pytest.raises(codec.CodecError, match=reason):
        codec.decode(raw, ce)
