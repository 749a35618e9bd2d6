"""An immutable set of strings grown by appending, for what llmfix carries from one turn of a session to the next
(the call ids a history declared and answered, :mod:`llmfix.repairs.settled`; where its tool results sit,
:mod:`llmfix.memory.observations`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class Ids:
    """An immutable set of strings (each with an optional value, the newest one kept) grown by appending,
    without copying what it holds.

    Chunks are dicts, merged as a binary counter merges (a chunk at most twice the size of the one after
    it is merged with it), so a set of n ids has O(log n) chunks and each id is copied O(log n) times over
    its life: membership costs a few lookups, a turn's extension costs what the turn adds."""

    __slots__ = ("_chunks", "size")  # size: entries over all chunks (an id added twice may count twice)

    def __init__(self, chunks: tuple[dict[str, Any], ...] = ()) -> None:
        self._chunks = chunks
        self.size = sum(len(c) for c in chunks)

    def __contains__(self, x: object) -> bool:
        return any(x in c for c in self._chunks)

    def get(self, x: str) -> Any:
        """The newest value given with ``x`` (None when it has none or is not held)."""
        for c in reversed(self._chunks):
            if x in c:
                return c[x]
        return None

    def plus(self, more: Iterable[str] | Mapping[str, Any]) -> Ids:
        # a dict first: isinstance against the Mapping ABC is a Python-level call, on every turn of every session
        add = dict(more) if type(more) is dict or isinstance(more, Mapping) else dict.fromkeys(more)
        if not add:
            return self
        chunks = [*self._chunks, add]
        while len(chunks) > 1 and len(chunks[-2]) <= 2 * len(chunks[-1]):
            last = chunks.pop()
            chunks[-1] = {**chunks[-1], **last}
        return Ids(tuple(chunks))

    def common(self, keys: Any) -> list[str]:
        """The members of ``keys`` (a set or a dict's keys) held here, walking whichever side is smaller."""
        if len(keys) <= self.size:
            return [k for k in keys if k in self]
        return list(dict.fromkeys(k for c in self._chunks for k in c if k in keys))


EMPTY = Ids()
