"""Media parts in a form fit for logs: ``<image/png 1.2 KB sha256:1a2b3c4d>``, never the payload.

A :class:`MediaRef` names one image, file or audio part by kind, MIME type, size and a short hash of
its payload (the base64 text of a data URL, the URL itself, or the file id), so two parts with the
same payload get the same name and a log can say which part went where without carrying it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class MediaRef:
    kind: str  # "image" | "file" | "audio" | "document"
    mime: str | None
    size: int | None  # decoded bytes, when known
    digest: str  # first 8 hex digits of sha256 of the payload text
    where: str = "inline"  # "inline" (data/base64) | "url" | "file_id"
    host: str | None = None

    def __str__(self) -> str:
        mime = self.mime or self.kind
        if self.where == "url":
            return f"<{mime} url {self.host or '?'} sha256:{self.digest}>"
        if self.where == "file_id":
            return f"<{mime} file_id sha256:{self.digest}>"
        return f"<{mime} {human_size(self.size)} sha256:{self.digest}>"


def human_size(n: int | None) -> str:
    if n is None:
        return "? B"
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def base64_size(b64: str) -> int:
    n = len(b64.strip())
    pad = b64.count("=", max(0, n - 2))
    return max(0, n * 3 // 4 - pad)


_LARGE = 64 * 1024
_CACHE_MAX = 1024
_cache: dict[tuple[object, ...], tuple[str, MediaRef]] = {}
_cache_lock = threading.Lock()


def ref_for_url(url: str, kind: str = "image") -> MediaRef:
    """Describe an image/file URL: a data URL by MIME and decoded size, an http(s) URL by host only.

    A large URL's reference is remembered by the identity of its string: one request names the same image
    in its repairs, its diff lines and its change records, and hashing 10 MB costs ~20 ms each time. The
    cache holds at most a few strings and is emptied by :func:`forget` when each request is done.
    """
    if len(url) < _LARGE:
        return _ref_for_url(url, kind)
    return _remembered(url, (id(url), kind), lambda: _ref_for_url(url, kind))


def _remembered(text: str, key: tuple[object, ...], make: Callable[[], MediaRef]) -> MediaRef:
    """``make()``, remembered by the identity of the large string ``text`` until :func:`forget`."""
    hit = _cache.get(key)
    if hit is not None and hit[0] is text:
        return hit[1]
    ref = make()
    with _cache_lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[key] = (text, ref)
    return ref


def forget() -> None:
    """Drop the remembered references and digests (and with them the strings they keep alive)."""
    with _cache_lock:
        _cache.clear()
        _digests.clear()


_SLICE = 1 << 20
_digests: dict[tuple[int, int], tuple[str, bytes, int]] = {}


def payload_digest(text: str, start: int = 0) -> tuple[bytes, int]:
    """The SHA-256 of ``text[start:]`` as UTF-8, and its length in bytes, hashed a slice at a time (never one 10 MB
    copy holding the GIL). A large one is remembered by the identity of ``text`` until :func:`forget`: one request
    hashes each image once, for the image cache (``llmfix.images.identify``), its diff lines and its records."""
    if len(text) - start < _LARGE:
        piece = text[start:].encode("utf-8", "surrogatepass")
        return hashlib.sha256(piece).digest(), len(piece)
    key = (id(text), start)
    hit = _digests.get(key)
    if hit is not None and hit[0] is text:
        return hit[1], hit[2]
    h, n = hashlib.sha256(), 0
    for i in range(start, len(text), _SLICE):
        piece = text[i : i + _SLICE].encode("utf-8", "surrogatepass")
        h.update(piece)
        n += len(piece)
    with _cache_lock:
        if len(_digests) >= _CACHE_MAX:
            _digests.clear()
        _digests[key] = (text, h.digest(), n)
    return _digests[key][1], n


def _ref_for_url(url: str, kind: str) -> MediaRef:
    if url.startswith("data:"):
        comma = url.find(",", 0, 1024)
        if comma < 0:
            comma = len(url)
        meta = url[5:comma]
        if not meta.isascii():
            meta = meta.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        sha, n = payload_digest(url, comma + 1)
        size = max(0, n * 3 // 4 - url[-2:].count("=")) if ";base64" in meta else n
        return MediaRef(kind, meta.split(";", 1)[0] or None, size, sha.hex()[:8])
    host = urlsplit(url).hostname if "://" in url else None
    return MediaRef(kind, None, None, digest(url), where="url", host=host)


def ref_for_base64(data: str, mime: str | None, kind: str = "image") -> MediaRef:
    """Describe a base64 payload (an Anthropic image block's ``data``); remembered like :func:`ref_for_url`."""
    if len(data) < _LARGE:
        return MediaRef(kind, mime, base64_size(data), digest(data))
    return _remembered(data, (id(data), kind, mime),
                       lambda: MediaRef(kind, mime, base64_size(data), payload_digest(data)[0].hex()[:8]))


def ref_for_file_id(file_id: str, kind: str = "image") -> MediaRef:
    return MediaRef(kind, None, None, digest(file_id), where="file_id")
