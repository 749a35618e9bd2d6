"""Needle answers that a body extending a known one can give from the known one's and its own new bytes.

The repairs ask ``needle in body`` before parsing (``body/haystack.py``); for a session's next request
most answers are already known from its previous one, and only the new items' bytes are searched.
"""

from __future__ import annotations

from llmfix.body.haystack import Haystack, Searchable, find, find_outside_payloads, haystack

MARGIN = 64
"""Needles longer than this are searched in the whole body (none of llmfix's is)."""


class Answers:
    """``needle in body`` (as :func:`llmfix.body.haystack.haystack` answers it), remembering where each needle
    first occurs (-1: nowhere) so that a body extending this one can answer from it.

    For B, found as P's first ``count`` items (ending at ``a``) + new items + P's tail (starting at ``b`` in
    B): a needle whose first match in P ends before ``a`` is in B there (the same bytes); one whose first
    match is in P's tail is in B's; one P has nowhere can only be in B's new bytes, searched with
    :data:`MARGIN` bytes of context on each side; and one whose first match in P was in the items B replaced
    (Claude Code's moving breakpoint) is searched in all of B from ``a``. Searched by the haystack's rule
    (base64 payloads skipped in a large body), so the answer is the haystack's — but for a match that
    straddles ``a`` inside a payload, which the raw bytes around ``a`` answer (llmfix's needles are key and
    value bytes; only ``mediaType`` is even made of base64 letters).
    """

    __slots__ = ("_data", "_hay", "_known", "_region", "answers")

    def __init__(self, data: bytes, known: dict[bytes, int] | None = None,
                 region: tuple[int, int, int] = (0, 0, 0)) -> None:
        self._data = data
        self._hay: Searchable | None = None
        self._known = known
        self._region = region  # (a, b, where P's tail starts in P)
        self.answers: dict[bytes, int] = {}

    def __contains__(self, needle: bytes) -> bool:
        got = self.answers.get(needle)
        if got is None:
            known = self._known
            if known is not None and len(needle) <= MARGIN and needle in known:
                got = self._from_known(needle, known[needle])
            else:
                if self._hay is None:
                    self._hay = haystack(self._data)
                hay = self._hay  # bytes (a small body), or a Haystack: outside base64 payloads
                got = hay.find(needle) if isinstance(hay, Haystack) else find(hay, needle)
            self.answers[needle] = got
        return got >= 0

    def _from_known(self, needle: bytes, pos: int) -> int:
        a, b, tail = self._region
        if pos >= 0 and pos + len(needle) <= a:
            return pos
        if pos >= tail:
            return pos - tail + b
        data = self._data
        end = b + MARGIN if pos < 0 else len(data)
        # from a on, the haystack's own rule (``a`` ends an item: outside every string, so its payload spans are
        # the whole body's); a match straddling ``a`` is looked for in the raw bytes around it
        near = data.find(needle, max(0, a - len(needle) + 1), min(a + len(needle) - 1, end))
        return near if near >= 0 else find_outside_payloads(data, needle, a, end)
