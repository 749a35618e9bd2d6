"""Content-Encoding in one place: request bodies decoded strictly and re-encoded as mitmproxy would, streams piecewise.

Why not ``mitmproxy.net.encoding``: it keeps one module-wide decode cache that is not thread-safe
(two threads can get each other's body), and llmfix decodes large bodies in worker threads; its gzip
decoder also accepts a truncated body silently. Here a truncated, corrupt or stacked encoding raises
:class:`CodecError`, so the request passes unchanged with a warning instead of being half-read.
Encoding mirrors mitmproxy's ``set_content`` (gzip level 1 with mtime 0, brotli quality 0, zstd level 1)
so a repaired body leaves with the Content-Encoding it came with. :func:`stream_decoders` decode a
streamed (SSE) answer chunk by chunk for the learners, in pieces of bounded size.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from typing import Any, Protocol

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


# -- streams: decoded piece by piece ----------------------------------------------------------------


class StreamDecoder(Protocol):
    """Decodes one Content-Encoding of a stream fed piece by piece (SSE answers), output in bounded pieces."""

    def decode(self, data: bytes) -> Iterator[bytes]: ...


class _ZlibDecoder:
    """gzip (possibly multi-member) or zlib/raw deflate, output in pieces of at most ``limit`` bytes."""

    def __init__(self, encoding: str, limit: int) -> None:
        self._gzip = encoding in ("gzip", "x-gzip")
        self._limit = limit
        self._head = b""  # deflate: bytes held until the zlib header can be recognised
        self._d: Any = zlib.decompressobj(47) if self._gzip else None

    def decode(self, data: bytes) -> Iterator[bytes]:
        if self._d is None:
            self._head += data
            if len(self._head) < 2 and data:
                return
            data, self._head = self._head, b""
            cmf_flg = int.from_bytes(data[:2]) if len(data) >= 2 else 0
            is_zlib = data[:1] and data[0] & 0x0F == 8 and cmf_flg % 31 == 0
            self._d = zlib.decompressobj(15 if is_zlib else -15)
        while data:
            out = self._d.decompress(data, self._limit)
            if out:
                yield out
            if self._d.eof:  # end of a gzip member; another may follow
                data = self._d.unused_data
                if data and self._gzip:
                    self._d = zlib.decompressobj(47)
                    continue
                return
            data = self._d.unconsumed_tail


class _BrotliDecoder:
    """br. The output limit is soft (brotli hands out at least ~32 KiB at a time)."""

    def __init__(self, limit: int) -> None:
        self._d = brotli.Decompressor()
        self._limit = limit

    def decode(self, data: bytes) -> Iterator[bytes]:
        if not data:
            return
        if self._d.is_finished():
            raise ValueError("data after the end of the brotli stream")
        out = self._d.process(data, output_buffer_limit=self._limit)
        # can_accept_more_data() only reports buffered *input*; output held back by the limit is
        # drained with empty input until none is left (brotli 1.2).
        while out:
            yield out
            out = self._d.process(b"", output_buffer_limit=self._limit) if not self._d.is_finished() else b""


class _ZstdDecoder:
    """zstd, possibly several frames."""

    def __init__(self, limit: int) -> None:
        self._new = zstd.ZstdDecompressor
        self._d = zstd.ZstdDecompressor()
        self._limit = limit

    def decode(self, data: bytes) -> Iterator[bytes]:
        while data:
            yield self._d.decompress(data, self._limit)
            while not self._d.needs_input and not self._d.eof:
                yield self._d.decompress(b"", self._limit)
            if not self._d.eof:
                return
            data = self._d.unused_data
            self._d = self._new()


def stream_decoders(content_encoding: str | None, limit: int) -> list[StreamDecoder]:
    """Decoders to apply in order (the reverse of the encodings listed); ValueError if unknown."""
    decoders: list[StreamDecoder] = []
    for enc in reversed([e.strip().lower() for e in (content_encoding or "").split(",")]):
        if enc in ("", "identity"):
            continue
        try:
            if enc in ("gzip", "x-gzip", "deflate"):
                decoders.append(_ZlibDecoder(enc, limit))
            elif enc == "br":
                decoders.append(_BrotliDecoder(limit))
            elif enc == "zstd":
                decoders.append(_ZstdDecoder(limit))
            else:
                raise ValueError(f"unsupported content-encoding {enc!r}")
        except ImportError as e:
            raise ValueError(f"no decoder for content-encoding {enc!r}: {e}") from e
    return decoders


def decode_pieces(decoders: list[StreamDecoder], data: bytes) -> Iterator[bytes]:
    if not decoders:
        if data:
            yield data
        return
    first, rest = decoders[0], decoders[1:]
    for piece in first.decode(data):
        if piece:
            yield from decode_pieces(rest, piece)
