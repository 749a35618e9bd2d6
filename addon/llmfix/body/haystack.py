"""Fast ``needle in body`` for large request bodies: the base64 payloads are skipped.

Before parsing, llmfix asks a few byte questions of every LLM request (``b'"tool"' in body``...) to decide
whether any repair could apply. CPython's substring search crawls through base64: its skip table is
useless on that alphabet, 2.5–6 ms per needle per 10 MB, and a request asks five. A :class:`Haystack`
searches only the spans between payloads; finding a payload's end is a ``find(b'"')``, a memchr.

Every search of more than one byte goes through StringZilla's SIMD substring search (:func:`find`), with
``bytes.find``'s exact answers: CPython's two-way search runs at ~1.3 GB/s, so each needle absent from a
1 MB body cost ~0.8 ms, and a first sight asks up to eight needles and three payload markers (measured:
2.5–4 ms of a 1 MB first sight); StringZilla answers the same question in ~0.05 ms.

Why skipping is exact: a payload marker (``;base64,`` of a data URL, or a ``…data":"`` key) can only be
where a JSON string value begins or continues, and in raw JSON every ``"`` inside a string is escaped, so
the bytes from the marker to the next ``"`` all lie inside one string. The needles name keys and values
(``"tool"``, ``_call_output``...): a match inside another string's content is a false positive anyway.
"""

from __future__ import annotations

import sys

from stringzilla import Str

_PAYLOAD_MARKERS = (b";base64,", b'data":"', b'data": "')  # data URLs; Anthropic "data", "file_data"
MIN_SIZE = 256 * 1024
"""Below this the plain ``bytes`` search is cheaper than finding the spans."""


class Haystack:
    """The spans of ``data`` outside base64 payloads; ``needle in haystack`` searches only those."""

    __slots__ = ("_view", "data", "spans")

    def __init__(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        """``start``: where to begin, outside every JSON string (0, or the end of an item); ``end``: where to stop."""
        self.data = data
        self._view = view = Str(data)
        spans: list[tuple[int, int]] = []
        pos, n = start, len(data) if end is None else min(end, len(data))
        while pos < n:
            first, marker = n, b""
            for m in _PAYLOAD_MARKERS:  # the earliest marker; each search bounded by the best so far
                j = view.find(m, pos, first)
                if j >= 0:
                    first, marker = j, m
            if not marker:
                break
            payload = first + len(marker)
            closing = data.find(b'"', payload)
            if closing < 0:
                break
            spans.append((pos, payload))
            pos = closing
        spans.append((pos, n))
        self.spans = spans

    def __contains__(self, needle: bytes) -> bool:
        return self.find(needle) >= 0

    def find(self, needle: bytes) -> int:
        """Where ``needle`` first occurs outside the payloads, or -1."""
        view = self._view
        for a, b in self.spans:
            j = view.find(needle, a, b)
            if j >= 0:
                return j
        return -1


Searchable = bytes | Haystack


def find(data: bytes, needle: bytes, start: int = 0, end: int = sys.maxsize) -> int:
    """``data.find(needle, start, end)``, the same answer, by SIMD (see the module docstring); ``start`` and
    ``end`` are not negative."""
    return Str(data).find(needle, start, end)


def find_outside_payloads(data: bytes, needle: bytes, start: int, end: int) -> int:
    """Where ``needle`` first occurs in ``data[start:end]`` as ``haystack(data)`` would find it (payloads skipped
    in a large body), or -1; ``start`` must be outside every JSON string."""
    if len(data) < MIN_SIZE:
        return find(data, needle, start, end)
    return Haystack(data, start, end).find(needle)


def haystack(data: bytes) -> Searchable:
    """``data`` itself when small, else a :class:`Haystack` over it."""
    return Haystack(data) if len(data) >= MIN_SIZE else data
