"""Recognising a request that is an earlier request's first items plus new ones, so only the new items are parsed.

Why: an agent session (Codex, Claude Code, Droid, opencode) resends its whole history on every turn, and
request N+1 is request N with a few items appended to its message array (``input`` / ``messages``), or
with its last items changed and new ones after them. Parsing and type-validating megabytes of history
that llmfix validated a moment ago was most of its cost on the requests that need no repair (~10 ms of CPU
per MB of history, on every turn, when measured). A proxy serves many sessions at once (a team's, one
instance of a fleet), so what is kept per session must be small: not the body, not its parse.

What is kept (an :class:`Entry`, one per session, replaced by the session's next request): *marks*, each
``(offset, count, digest, probe)`` — the bytes ``P[:offset]`` of the body P hold exactly the first
``count`` items of its message array, ``digest`` is their 128-bit XXH3 hash (seeded per cache), ``probe``
the 16 bytes before ``offset``; the ``tail`` (from the ``]`` closing the array to the end); the top-level
members besides the array (parsed: the model, server state); the needle answers; the verdicts of the
certain checks (``repairs/settled.py``). Its weight grows with the session's item count (the ids the
checks carry), not with its bytes.

What is certain, and how it is checked. A later body B is an append of P at a mark when ``B`` ends with
P's tail, ``B[:offset]`` has the mark's digest, and the bytes between, ``X``, are empty or ``,`` + a list of
complete JSON values (``b"[" + X[1:] + b"]"`` parses, with the parser of the whole path). Then B parses to
P's object with its first ``count`` items followed by those values, and nothing else differs: the bytes
before the mark are P's own (a different prefix with the same 128-bit digest is a 2^-128 accident; the
seed is random, so it cannot be aimed at), the bytes after the array are P's own, and ``X`` only adds
elements to the open array.

Where marks are. The end of P's array is one: ``head`` is the ``]``'s offset without the whitespace before
it, found from P's parsed object (``locate.split``), never guessed. The end of each of P's last :data:`BACK`
items is one when it can be located exactly — the bytes right before it are ``,`` + the item's compact
JSON (``orjson.dumps`` of the parsed item, compared byte for byte: a client that writes its items
otherwise gets no mark for them) — so that a client that changes its last items on the next turn is
still recognised: Claude Code moves its one ``cache_control`` breakpoint to the new last message every
turn (opencode marks the last two), and a retried or regenerated turn replaces the last items. Marks an
entry was found from carry over to its successor (their bytes are the successor's). Only the newest
:data:`MAX_MARKS` are kept.

Finding the mark of a body without trying every session's: the candidates are indexed by tail and offset.
For each distinct tail length the body's own tail is looked up (a dict of bytes); then the offsets of that
tail's marks are tried from the body's end backwards, at the ``}`` that end its items, so a hit at the
newest mark costs what the new items hold, whatever the number of sessions; the first one whose probe and
digest match is the newest mark that fits (the longest known prefix).

The byte questions asked before parsing (``needle in body``, which repairs could apply) are answered from
P's answers and B's new bytes alone (:class:`Answers`).

The cache is bounded by entry count and by their estimated weight, shared by every flow and thread.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import xxhash

from llmfix.body.answers import Answers
from llmfix.body.locate import BACK, between, own_marks

MAX_ENTRIES = 1024
MAX_WEIGHT = 96 * 1024 * 1024
"""What the entries may hold, estimated (:func:`weight`): a session of 1 MB and ~1,000 items weighs ~0.2 MB."""
MIN_SIZE = 16 * 1024
"""Smaller bodies parse in well under a millisecond: not worth a cache entry."""

MAX_MARKS = 8
"""Marks kept per entry (the newest); a body's own last :data:`llmfix.body.locate.BACK` items are given one."""
PROBE = 16
"""Bytes before a mark compared before its digest is computed."""
WALK = 512
"""Steps of the walk back from a body's end to the mark it continues (each a mark tried or a stretch of bytes
skipped); a mark further back is not found (the body is parsed whole, as a first sight)."""
PER_ITEM = 160
"""Weight per item of a kept session: the call ids its checks carry (two or three sets of them)."""


@dataclass(frozen=True, slots=True)
class Mark:
    offset: int  # ``data[:offset]`` holds the array's first ``count`` items
    count: int
    digest: bytes  # XXH3-128 of ``data[:offset]``
    probe: bytes  # ``data[offset - PROBE : offset]``


@dataclass(slots=True)
class Entry:
    marks: tuple[Mark, ...]
    tail: bytes  # from the ] closing the message array to the end
    length: int  # the body's length
    count: int  # items in its message array
    top: dict[str, Any]  # the top-level members besides the message array, parsed (shared along a session)
    answers: dict[bytes, int]  # where each needle asked of this body first occurs, -1: nowhere (:class:`Answers`)
    verdicts: dict[int, Any]  # item count → a ``repairs.settled.Verdict`` for the first count items
    weight: int = 0
    key: tuple[str, int] = ("", 0)


@dataclass(frozen=True, slots=True)
class Hit:
    entry: Entry
    count: int  # how many of the entry's items the body starts with
    offset: int  # where in the body they end
    new: list[Any]  # the items after them, parsed JSON (not yet typed)
    hasher: Any = None  # an XXH3 state fed with ``data[:offset]`` (the next marks' digests continue it)

    @property
    def edited(self) -> bool:
        """Whether the body changed some of the entry's last items (found from a mark before the array's end)."""
        return self.count < self.entry.count


_SPACE = frozenset(b" \t\r\n")

def answers_for(data: bytes, hit: Hit | None) -> Answers:
    """The needle answers for ``data``: from the kept body it appends to when there is one."""
    if hit is None:
        return Answers(data)
    entry = hit.entry
    return Answers(data, entry.answers, (hit.offset, len(data) - len(entry.tail), entry.length - len(entry.tail)))


def weight(tail: bytes, count: int, verdicts: dict[int, Any]) -> int:
    """What an entry is counted as against :data:`MAX_WEIGHT`: its tail (the bytes and their parse), its
    items' share of the checks' id sets, and the media its observation records hold whole — each string once:
    the records of an entry's verdicts continue each other and share their media."""
    media: dict[int, int] = {}
    walked: set[int] = set()  # the records' media tuples and pieces already counted (shared, not copied)
    for v in verdicts.values():
        held = getattr(getattr(v, "observed", None), "media", ())
        if id(held) in walked:
            continue
        walked.add(id(held))
        for r in held:
            if id(r.pieces) in walked:
                continue
            walked.add(id(r.pieces))
            for p in r.pieces:
                if p.url:
                    media[id(p.url)] = len(p.url)
    return 3 * len(tail) + PER_ITEM * count + sum(media.values())


class _Tail:
    """The marks of the kept entries that share one tail, by offset and probe (sessions of one client may
    have marks at the same offsets: the probe tells them apart before any digest is computed)."""

    __slots__ = ("at", "offsets", "tail")

    def __init__(self, tail: bytes) -> None:
        self.tail = tail
        self.at: dict[int, dict[bytes, list[tuple[Entry, Mark]]]] = {}
        self.offsets: list[int] = []  # the keys of ``at``, ascending

    def add(self, entry: Entry) -> None:
        for m in entry.marks:
            if m.offset not in self.at:
                bisect.insort(self.offsets, m.offset)
            self.at.setdefault(m.offset, {}).setdefault(m.probe, []).append((entry, m))

    def remove(self, entry: Entry) -> None:
        for m in entry.marks:
            probes = self.at.get(m.offset)
            found = probes.get(m.probe) if probes is not None else None
            if found is None:
                continue
            found[:] = [(e, x) for e, x in found if e is not entry]
            if not found:
                del probes[m.probe]
                if not probes:
                    del self.at[m.offset]
                    i = bisect.bisect_left(self.offsets, m.offset)
                    if i < len(self.offsets) and self.offsets[i] == m.offset:
                        del self.offsets[i]

    def candidates(self, data: bytes, end: int) -> Iterator[int]:
        """The offsets of marks ``data`` may continue, from its array's end backwards: those right after a
        ``}`` (every item is an object). The walk alternates between the sorted offsets and the body's bytes
        (``rfind``, C speed), so it costs what lies between the end and the mark found — the new items, or
        the other sessions' marks there, whichever is fewer — and gives up after :data:`WALK` steps."""
        offsets = self.offsets
        pos = end
        for _ in range(WALK):
            i = bisect.bisect_right(offsets, pos)
            try:
                o = offsets[i - 1] if i else 0
            except IndexError:  # another thread removed marks meanwhile: a miss is always safe
                return
            if o == 0:
                return
            if o >= 1 and data[o - 1] == 0x7D:  # "}"
                yield o
                pos = o - 1
                continue
            j = data.rfind(b"}", 0, o - 1)  # the next "}" before o: offsets between cannot follow one
            if j < 0:
                return
            pos = j + 1


class PrefixCache:
    """Small states of recent valid bodies, per dialect; :meth:`find` recognises a body that continues one."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_weight: int = MAX_WEIGHT, min_size: int = MIN_SIZE,
                 seed: int | None = None) -> None:
        self.max_entries, self.max_weight, self.min_size = max_entries, max_weight, min_size
        self.seed = int.from_bytes(os.urandom(8)) if seed is None else seed
        self._entries: OrderedDict[tuple[str, int], Entry] = OrderedDict()
        self._tails: dict[tuple[str, int, int], _Tail] = {}  # (dialect, length, XXH3-64) of a tail → its marks
        self._lengths: dict[str, dict[int, int]] = {}  # dialect → tail length → how many tails have it
        self._weight = 0
        self._serial = 0
        self._lock = threading.Lock()
        self._peeked = threading.local()  # this thread's last peek: (data, hit), for find
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def weight(self) -> int:
        return self._weight

    def hasher(self) -> Any:
        return xxhash.xxh3_128(seed=self.seed)

    # -- finding --------------------------------------------------------------------------------

    def peek(self, dialect: str, data: bytes) -> Entry | None:
        """The kept entry ``data`` continues, if any; unlike :meth:`find`, counts and changes nothing."""
        hit = self._look(dialect, data)
        self._peeked.last = (data, hit)  # find() on the same body need not look again
        return hit.entry if hit is not None else None

    def find(self, dialect: str, data: bytes) -> Hit | None:
        peeked = getattr(self._peeked, "last", None)
        self._peeked.last = None
        if peeked is not None and peeked[0] is data and (peeked[1] is None or peeked[1].entry.key in self._entries):
            hit = peeked[1]
        else:
            hit = self._look(dialect, data)
        with self._lock:
            if hit is None:
                self.misses += 1
                return None
            self.hits += 1
            if hit.count >= hit.entry.count - BACK and 2 * hit.count > hit.entry.count:
                self._drop(hit.entry.key)  # the session moved on (not a new one that shares its first items)
        return hit

    def _look(self, dialect: str, data: bytes) -> Hit | None:
        n = len(data)
        if n < self.min_size:
            return None
        lengths = self._lengths.get(dialect)
        if not lengths:
            return None
        for t in sorted(lengths, reverse=True):  # a copy: another thread may add one meanwhile
            if t >= n:
                continue
            group = self._tails.get((dialect, t, xxhash.xxh3_64_intdigest(memoryview(data)[n - t :], self.seed)))
            if group is None or not data.endswith(group.tail):
                continue
            hit = self._at_marks(data, group, n - t)
            if hit is not None:
                return hit
        return None

    def _at_marks(self, data: bytes, group: _Tail, end: int) -> Hit | None:
        """The newest mark of ``group`` that ``data`` (whose array ends at ``end``) continues."""
        at = group.at
        view = memoryview(data)
        for offset in group.candidates(data, end):
            probes = at.get(offset)
            found = probes.get(data[offset - PROBE : offset]) if probes is not None else None
            if not found:
                continue
            hasher = self.hasher()
            hasher.update(view[:offset])
            digest = hasher.digest()
            for entry, mark in tuple(found):  # a copy: another thread may change it meanwhile
                if digest != mark.digest:
                    continue
                new = between(data, offset, end)
                if new is None:
                    break  # the same prefix for every entry here: the bytes after it are what fails
                return Hit(entry, mark.count, offset, new, hasher)
        return None

    # -- keeping --------------------------------------------------------------------------------

    def keep(self, dialect: str, data: bytes, end: int, count: int, raw: list[Any], first: int,
             top: dict[str, Any], answers: dict[bytes, int] | None = None, hit: Hit | None = None) -> Entry | None:
        """Remember ``data`` for the requests that continue it: its message array closes at ``end`` and holds
        ``count`` items, of which ``raw`` are the parsed ones from index ``first`` on (the last of them may get
        marks); ``top``: its top-level members besides the array; ``answers``: the needle answers given for it
        (:attr:`Answers.answers`, still filled in later); ``hit``: the entry ``data`` was found to continue
        (its marks and verdicts up to there carry over, and its hash state goes on)."""
        if len(data) < self.min_size or count == 0:
            return None
        head = end
        while head and data[head - 1] in _SPACE:  # pretty JSON indents the ]
            head -= 1
        since = hit.count if hit is not None else 0
        carried = [m for m in hit.entry.marks if m.count <= since] if hit is not None else []
        wanted = own_marks(data, raw, first, head, since)
        if not wanted or wanted[-1][1] < count:
            wanted.append((head, count))
        hasher = hit.hasher.copy() if hit is not None and hit.hasher is not None else self.hasher()
        done = hit.offset if hit is not None and hit.hasher is not None else 0
        view = memoryview(data)
        marks = list(carried)
        for offset, c in wanted:  # ascending: one pass of the hash over the body
            if c <= since or offset < done:  # the mark it was found from is carried
                continue
            hasher.update(view[done:offset])
            done = offset
            marks.append(Mark(offset, c, hasher.digest(), data[offset - PROBE : offset]))
        marks = marks[-MAX_MARKS:]
        verdicts = dict(sorted((c, v) for c, v in dict(hit.entry.verdicts).items() if c <= since)[-MAX_MARKS:]) \
            if hit is not None else {}  # a copy first: another flow may be adding to them meanwhile
        tail = data[end:]
        entry = Entry(tuple(marks), tail, len(data), count, top, answers if answers is not None else {}, verdicts)
        entry.weight = weight(tail, count, verdicts)
        if entry.weight > self.max_weight // 4:
            return None
        with self._lock:
            tail_key = (dialect, len(tail), xxhash.xxh3_64_intdigest(tail, self.seed))
            group = self._tails.get(tail_key)
            if group is not None and group.tail != tail:  # another tail with the same 64-bit hash: not kept
                return None
            if group is None:
                group = self._tails[tail_key] = _Tail(tail)
                lengths = self._lengths.setdefault(dialect, {})
                lengths[len(tail)] = lengths.get(len(tail), 0) + 1
            entry.tail = group.tail  # one bytes object per tail, whatever the number of sessions sharing it
            self._serial += 1
            entry.key = (dialect, self._serial)
            self._entries[entry.key] = entry
            group.add(entry)
            self._weight += entry.weight
            while self._entries and (len(self._entries) > self.max_entries or self._weight > self.max_weight):
                self._drop(next(iter(self._entries)))
        return entry

    def reweigh(self, entry: Entry) -> None:
        """Count ``entry`` again after verdicts were added to it (their observation records may hold media)."""
        w = weight(entry.tail, entry.count, dict(entry.verdicts))
        with self._lock:
            if entry.key in self._entries:
                self._weight += w - entry.weight
                entry.weight = w
                while self._entries and self._weight > self.max_weight:
                    self._drop(next(iter(self._entries)))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._tails.clear()
            self._lengths.clear()
            self._weight = 0

    def _drop(self, k: tuple[str, int]) -> None:
        entry = self._entries.pop(k, None)
        if entry is None:
            return
        self._weight -= entry.weight
        dialect = k[0]
        tail_key = (dialect, len(entry.tail), xxhash.xxh3_64_intdigest(entry.tail, self.seed))
        group = self._tails.get(tail_key)
        if group is None:
            return
        group.remove(entry)
        if not group.at:
            del self._tails[tail_key]
            lengths = self._lengths[dialect]
            lengths[len(entry.tail)] -= 1
            if not lengths[len(entry.tail)]:
                del lengths[len(entry.tail)]
