"""Content-Encoding for request bodies: decode strictly, encode as mitmproxy would.

Why not ``mitmproxy.net.encoding``: it keeps one module-wide decode cache that is not thread-safe
(two threads can get each other's body), and llmfix decodes large bodies in worker threads; its gzip
decoder also accepts a truncated body silently. Here a truncated, corrupt or stacked encoding raises
:class:`CodecError`, so the request passes unchanged with a warning instead of being half-read.
Encoding mirrors mitmproxy's ``set_content`` (gzip level 1 with mtime 0, brotli quality 0, zstd level 1)
so a repaired body leaves with the Content-Encoding it came with.
"""

from __future__ import annotations

import gzip
import io
import zlib

import brotli

try:
    from compression import zstd  # type: ignore[import-not-found]  # Python 3.14+
except ImportError:  # pragma: no cover - depends on the Python version
    from backports import zstd  # type: ignore[no-redef]


class CodecError(ValueError):
    """The body cannot be decoded as its Content-Encoding says; the message says why."""


IDENTITY = ("", "identity")


class TooLarge(CodecError):
    """The decoded body would exceed the limit; decoding stopped there (a compression bomb costs nothing)."""


def _check(out: bytearray, limit: int) -> None:
    if len(out) > limit:
        raise TooLarge(f"decoded body exceeds {limit} bytes")


def _gunzip(raw: bytes, limit: int) -> bytes:
    out = bytearray()
    data = raw
    while data:  # several gzip members may follow each other
        d = zlib.decompressobj(47)  # gzip or zlib header, auto-detected
        out += d.decompress(data, limit + 1 - len(out))
        _check(out, limit)
        out += d.flush()
        if not d.eof:
            _check(out, limit)
            raise CodecError("the compressed body is truncated")
        data = d.unused_data.lstrip(b"\x00")
    return bytes(out)


def _inflate(raw: bytes, limit: int) -> bytes:
    for wbits in (15, -15):  # zlib-wrapped, then raw deflate (both occur in the wild)
        d = zlib.decompressobj(wbits)
        try:
            out = bytearray(d.decompress(raw, limit + 1))
        except zlib.error:
            continue
        _check(out, limit)
        out += d.flush()
        if d.eof:
            return bytes(out)
    raise CodecError("not a complete deflate stream")


def _unzstd(raw: bytes, limit: int) -> bytes:
    out = bytearray()
    data = raw
    while data:  # frames without a content size and multi-frame bodies both decode here
        d = zstd.ZstdDecompressor()
        out += d.decompress(data, max_length=limit + 1 - len(out))
        _check(out, limit)
        if not d.eof:
            raise CodecError("the compressed body is truncated")
        data = d.unused_data
    return bytes(out)


def _unbrotli(raw: bytes, limit: int) -> bytes:
    d = brotli.Decompressor()
    out = bytearray(d.process(raw, output_buffer_limit=limit + 1))
    while not d.is_finished() and len(out) <= limit:  # output held back by the limit: drain it
        more = d.process(b"", output_buffer_limit=limit + 1 - len(out))
        if not more:
            break
        out += more
    _check(out, limit)
    if not d.is_finished():
        raise CodecError("the compressed body is truncated")
    return bytes(out)


_DECODERS = {"gzip": _gunzip, "x-gzip": _gunzip, "deflate": _inflate, "br": _unbrotli, "zstd": _unzstd}


def normalize(content_encoding: str | None) -> str:
    return (content_encoding or "").strip().lower()


def decode(raw: bytes, content_encoding: str | None, limit: int = 1 << 62) -> bytes:
    """``raw`` without its Content-Encoding; never inflates more than ``limit`` + 1 bytes."""
    ce = normalize(content_encoding)
    if ce in IDENTITY:
        return raw
    if "," in ce:
        raise CodecError(f"stacked Content-Encoding {ce!r} is not supported")
    decoder = _DECODERS.get(ce)
    if decoder is None:
        raise CodecError(f"unknown Content-Encoding {ce!r}")
    if not raw:
        return raw
    try:
        return decoder(raw, limit)
    except TooLarge:
        raise
    except CodecError as e:
        raise CodecError(f"cannot decode Content-Encoding {ce!r}: {e}") from None
    except Exception as e:  # zlib.error, brotli.error, zstd.ZstdError…
        raise CodecError(f"cannot decode Content-Encoding {ce!r}: {type(e).__name__}: {e}") from None


def encode(body: bytes, content_encoding: str | None) -> bytes:
    ce = normalize(content_encoding)
    if ce in IDENTITY:
        return body
    if ce in ("gzip", "x-gzip"):
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=1) as f:
            f.write(body)
        return buf.getvalue()
    if ce == "deflate":
        return zlib.compress(body)
    if ce == "br":
        return brotli.compress(body, quality=0)
    if ce == "zstd":
        return zstd.compress(body, level=1)
    raise CodecError(f"cannot encode Content-Encoding {ce!r}")
