"""Recognising a request that is an earlier request plus new items, so only the new items are parsed.

Why: an agent session (Codex, Claude Code, Droid, opencode) resends its whole history on every turn, and
request N+1 is request N with a few items appended to its message array (``input`` / ``messages``). Parsing
and type-validating megabytes of history that llmfix validated a moment ago was most of its cost on the
requests that need no repair (~10 ms of CPU per MB of history, on every turn, when measured).

What is certain, and how it is checked. For a body P that parsed into a valid conversation, :func:`split`
finds ``e``, the offset of the ``]`` that closes P's message array, and keeps ``head = P[:e]`` (without
the whitespace before the ``]``) and ``tail = P[e:]`` (the ``]``, the top-level members after the array,
the final ``}``). A later body B is an append of P when ``B.startswith(head)``, ``B.endswith(tail)`` and
the bytes between, ``X``, are empty or ``,`` + a list of complete JSON values (``b"[" + X[1:] + b"]"``
parses, with the parser of the whole path). Then B parses
to P's object with those values appended to the message array, and nothing else differs: the bytes
before the array's end and after it are P's own, and ``X`` only adds elements to the open array.

``e`` itself is found from P's parsed object, never guessed: the tail must parse (as ``{`` + its
members) to exactly P's members after the message array, which puts ``e`` at the end of a top-level
member (a ``]`` inside a string or a nested value leaves the tail unbalanced); among the candidates the
leftmost one is taken, and P is not kept when a top-level member before the array is itself an array or
the tail names the array's key (the only ways a duplicate top-level key could make that member another
one). A body whose tail is not found is simply not kept: the full path handles it, as before.

Not only the end of P's array: a client may also change P's last items on the next turn. Claude Code
puts its one ``cache_control`` breakpoint on the last block of the last message, so on every turn the
message that was last loses it (opencode marks the last two messages): request N + 1 is request N up to
one of its last items, then new items. So an entry keeps *marks*, ``(offset, count)``: the bytes
``P[:offset]`` hold exactly the first ``count`` items of P's array. The end of the array is one; P's own
last few items are given marks when they can be located exactly — when the bytes right before the
array's end are ``,`` + their compact JSON (``orjson.dumps`` of each parsed item, compared byte for byte:
a client that writes them otherwise just gets no mark) — and the marks an entry was found from carry over
to its successor (their bytes are the successor's). B is ``P[:offset]`` + ``,`` + complete values + the
tail, checked as above, for the newest mark that fits; B's items are P's first ``count`` items, then those
values. An edited or removed item before every mark, or any other change, is a miss as before.

The byte questions asked before parsing (``needle in body``, which repairs could apply) are answered from
P's answers and B's new bytes alone (:class:`Answers`).

The cache holds a few recent bodies (bounded by count and bytes), shared by every flow and thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson
import pydantic_core

from llmfix.body.haystack import Searchable, find_outside_payloads, haystack

MAX_ENTRIES = 16
MAX_BYTES = 48 * 1024 * 1024
"""Memory the kept bodies may hold, counted as twice their raw size (the bytes, and the parsed strings:
what dominates, base64 images and tool outputs, is held once in each). A body over a quarter of this is
not kept; a session's entry is replaced by its next request's, so a few concurrent sessions fit."""
MIN_SIZE = 16 * 1024
"""Smaller bodies parse in well under a millisecond: not worth a cache entry."""


MAX_MARKS = 8
BACK = 4
"""Marks kept per entry (the newest), and how many of a body's own last items are given one."""


@dataclass(slots=True)
class Entry:
    data: bytes  # the body
    marks: tuple[tuple[int, int], ...]  # (offset, count): ``data[:offset]`` holds the array's first count items
    tail: bytes  # from the ] closing the message array to the end
    body: dict[str, Any]  # the parsed top-level object (its message array: ``raw``)
    raw: list[Any]  # the message array as parsed JSON
    items: list[Any]  # the same, typed (frozen wire models)
    size: int  # what it counts against MAX_BYTES: twice the body's length
    answers: dict[bytes, int]  # where each needle asked of this body first occurs, -1: nowhere (:class:`Answers`)
    verdicts: dict[int, Any]  # item count → a ``repairs.settled.Verdict`` for the first count items


@dataclass(frozen=True, slots=True)
class Hit:
    entry: Entry
    count: int  # how many of the entry's items the body starts with
    offset: int  # where in the body they end
    new: list[Any]  # the items after them, parsed JSON (not yet typed)

    @property
    def edited(self) -> bool:
        """Whether the body changed some of the entry's last items (found from a mark before the array's end):
        a client that does so (Claude Code, opencode) is worth marks and verdicts before its own last items."""
        return self.count < len(self.entry.raw)


def _loads(data: bytes) -> Any:
    """The parser of the full path (``body.conversation.loads``), so both read a body alike."""
    return pydantic_core.from_json(data, allow_inf_nan=False)


def _tail_candidates(data: bytes, first_tail_key: str | None) -> list[int]:
    """Offsets of ``]`` that may close the message array, leftmost first."""
    if first_tail_key is None:  # the array is the last member: ``]`` then only whitespace and ``}``
        end = len(data.rstrip())
        if end and data[end - 1 : end] == b"}":
            inner = len(data[: end - 1].rstrip())
            if inner and data[inner - 1 : inner] == b"]":
                return [inner - 1]
        return []
    key = orjson.dumps(first_tail_key)
    out: list[int] = []
    pos = data.find(key)
    while pos >= 0 and len(out) < 8:  # each ``"key"`` preceded by ``]``, ``,`` and whitespace only
        before = data[max(0, pos - 64) : pos].rstrip()
        if before.endswith(b","):
            before = before[:-1].rstrip()
            if before.endswith(b"]"):
                out.append(max(0, pos - 64) + len(before) - 1)
        pos = data.find(key, pos + 1)
    return out


def split(data: bytes, body: dict[str, Any], key: str) -> int | None:
    """The offset of the ``]`` closing ``body[key]`` in ``data`` (see the module docstring), or None."""
    keys = list(body)
    if key not in body or not isinstance(body[key], list) or not body[key]:
        return None
    at = keys.index(key)
    if any(isinstance(body[k], list) for k in keys[:at]):
        return None
    after = keys[at + 1 :]
    want = {k: body[k] for k in after}
    for e in _tail_candidates(data, after[0] if after else None):
        rest = data[e + 1 :].lstrip()
        if not after:
            return e
        if not rest.startswith(b","):
            continue
        if orjson.dumps(key) in rest:
            return None
        try:
            got = _loads(b"{" + rest[1:])
        except ValueError:
            continue
        if got == want and list(got) == after:
            return e
    return None


def appended(data: bytes, entry: Entry) -> tuple[int, int, list[Any]] | None:
    """``(count, offset, items)`` when ``data`` is the entry's first ``count`` items (ending at ``offset``)
    followed by ``items``, for the newest mark that fits; None when it is no such append."""
    t = len(entry.tail)
    if not data.endswith(entry.tail):
        return None
    view = memoryview(entry.data)
    for offset, count in reversed(entry.marks):
        if len(data) < offset + t or not data.startswith(view[:offset]):
            continue
        middle = data[offset : len(data) - t].strip()
        if not middle:
            return count, offset, []
        if not middle.startswith(b","):
            continue
        try:
            new = _loads(b"[" + middle[1:] + b"]")
        except ValueError:
            continue
        if isinstance(new, list) and new:  # a lone "," before the "]" is no value: invalid JSON, not an append
            return count, offset, new
    return None


def _own_marks(data: bytes, raw: list[Any], head: int, since: int) -> list[tuple[int, int]]:
    """Marks for the last :data:`BACK` items of ``raw`` after the first ``since``: the offset where each one's
    ``,`` starts, found by comparing the bytes before ``head`` with their compact JSON."""
    out: list[tuple[int, int]] = []
    pos = head
    for j in range(len(raw) - 1, max(since, len(raw) - BACK), -1):
        try:
            item = orjson.dumps(raw[j])
        except TypeError:  # a value orjson cannot write (an integer beyond 64 bits): no mark
            break
        start = pos - len(item)
        if start < 1 or data[start:pos] != item or data[start - 1 : start] != b",":
            break
        pos = start - 1
        out.append((pos, j))
    return out[::-1]


_SPACE = frozenset(b" \t\r\n")

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
                got = self._hay.find(needle)  # bytes, or a Haystack: outside base64 payloads
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


def answers_for(data: bytes, hit: Hit | None) -> Answers:
    """The needle answers for ``data``: from the kept body it appends to when there is one."""
    if hit is None:
        return Answers(data)
    entry = hit.entry
    return Answers(data, entry.answers, (hit.offset, len(data) - len(entry.tail), len(entry.data) - len(entry.tail)))


class PrefixCache:
    """Recent valid bodies, per dialect; :meth:`find` recognises an append of one of them."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES, min_size: int = MIN_SIZE) -> None:
        self.max_entries, self.max_bytes, self.min_size = max_entries, max_bytes, min_size
        self._entries: OrderedDict[tuple[str, int], Entry] = OrderedDict()
        self._bytes = 0
        self._serial = 0
        self._lock = threading.Lock()
        self._peeked = threading.local()  # this thread's last peek: (data, entry, what it appends), for find
        self.hits = self.misses = 0

    def peek(self, dialect: str, data: bytes) -> Entry | None:
        """The kept body ``data`` appends to, if any; unlike :meth:`find`, counts and changes nothing."""
        if len(data) < self.min_size:
            return None
        with self._lock:
            entries = [e for k, e in reversed(self._entries.items()) if k[0] == dialect]
        for entry in entries:
            found = appended(data, entry)
            if found is not None:
                self._peeked.last = (data, entry, found)  # find() on the same body need not look again
                return entry
        return None

    def find(self, dialect: str, data: bytes) -> Hit | None:
        if len(data) < self.min_size:
            return None
        with self._lock:
            entries = [(k, e) for k, e in reversed(self._entries.items()) if k[0] == dialect]
        peeked = getattr(self._peeked, "last", None)
        self._peeked.last = None
        for k, entry in entries:
            found = peeked[2] if peeked is not None and peeked[0] is data and peeked[1] is entry else \
                appended(data, entry)
            if found is not None:
                with self._lock:
                    self.hits += 1
                    self._drop(k)  # the session moved on: its next request replaces this entry
                return Hit(entry, *found)
        with self._lock:
            self.misses += 1
        return None

    def keep(self, dialect: str, data: bytes, body: dict[str, Any], key: str, items: list[Any],
             end: int | None = None, answers: dict[bytes, int] | None = None, hit: Hit | None = None
             ) -> Entry | None:
        """Remember ``data`` (parsed to ``body``, its ``body[key]`` typed as ``items``) for later appends.
        ``end``: the array's closing offset when the caller knows it (an append of a kept body);
        ``answers``: the needle answers given for ``data`` (:attr:`Answers.answers`, still filled in later);
        ``hit``: the kept body ``data`` was found to extend (its marks and verdicts up to there carry over)."""
        if len(data) < self.min_size or 2 * len(data) > self.max_bytes // 2:
            return None
        if end is None:
            end = split(data, body, key)
            if end is None:
                return None
        head = end
        while head and data[head - 1] in _SPACE:  # pretty JSON indents the ]
            head -= 1
        raw = body[key]
        since = hit.count if hit is not None else 0
        marks = [m for m in hit.entry.marks if m[1] <= since] if hit is not None else []
        if hit is None or hit.edited:  # a client that appends byte for byte (Codex, Droid) never needs them
            marks += _own_marks(data, raw, head, since)
        if not marks or marks[-1][1] < len(raw):
            marks.append((head, len(raw)))
        verdicts = dict(sorted((c, v) for c, v in dict(hit.entry.verdicts).items() if c <= since)[-MAX_MARKS:]) \
            if hit is not None else {}  # a copy first: another flow may be adding to them meanwhile
        entry = Entry(data, tuple(marks[-MAX_MARKS:]), data[end:], body, raw, items, 2 * len(data),
                      answers if answers is not None else {}, verdicts)
        with self._lock:
            self._serial += 1
            k = (dialect, self._serial)
            self._entries[k] = entry
            self._bytes += entry.size
            while self._entries and (len(self._entries) > self.max_entries or self._bytes > self.max_bytes):
                self._drop(next(iter(self._entries)))
        return entry

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _drop(self, k: tuple[str, int]) -> None:
        entry = self._entries.pop(k, None)
        if entry is not None:
            self._bytes -= entry.size
