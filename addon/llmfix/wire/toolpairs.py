"""Tool calls and their results in a dialect-neutral form, and the edits pair-tool-calls makes, per dialect.

The pairing repair reasons once over :class:`Call` and :class:`Answer` (a declared tool call, a tool
result), each naming its call id and where it sits: ``index`` is the item (Chat / Anthropic message,
Responses input item), ``sub`` its place inside the item (Chat ``tool_calls[k]``, Anthropic
``content[k]``; None for a whole item). The dialects only map in (``tools.calls``, ``tools.answers``) and out
(``tools.rename`` and their builders, :class:`llmfix.dialects.base.Tools`); how calls group with their answers
follows from where the dialect wants results (:class:`llmfix.dialects.base.Pairing`), so each rule is written
once per way of pairing, never per dialect:

- a *group* is what must be answered together, with the answers that count for it: Chat — one
  assistant message's ``tool_calls`` and the run of ``tool`` messages right after it; Responses — one
  call item and every output after it (OpenAI pairs by ``call_id`` anywhere later), its *run* being the
  consecutive call items from it on and the consecutive outputs right after them (a run never reaches
  into a later turn's calls, so where a missing output goes does not change when turns are appended);
  Anthropic — one assistant message's ``tool_use`` blocks
  and the ``tool_result`` blocks of the message right after it.
- server-side tool blocks (``server_tool_use``, ``web_search_tool_result``…) and ``item_reference``
  items are neither calls nor answers here: they pass untouched.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Iterable
from typing import Any

from llmfix.dialects.base import Answer, Call, Dialect, Group, Key, Pairing

__all__ = ["Answer", "Call", "Group", "Key", "Pairs", "fresh_id", "groups", "ids", "runs"]


class Pairs:
    """The calls, answers and groups of one item list, each computed once, when first asked for."""

    def __init__(self, dialect: Dialect, items: list[Any]) -> None:
        self.dialect, self.items = dialect, items
        self._calls: list[Call] | None = None
        self._answers: list[Answer] | None = None
        self._groups: list[Group] | None = None

    @property
    def calls(self) -> list[Call]:
        if self._calls is None:
            self._calls = self.dialect.tools.calls(self.items)
        return self._calls

    @property
    def answers(self) -> list[Answer]:
        if self._answers is None:
            self._answers = self.dialect.tools.answers(self.items)
        return self._answers

    @property
    def groups(self) -> list[Group]:
        if self._groups is None:
            self._groups = groups(self.dialect, self.items, self.calls, self.answers)
        return self._groups

    def runs(self) -> list[tuple[list[Call], list[Answer]]]:
        return runs(self.dialect, self.items, self.calls, self.answers)


def groups(dialect: Dialect, items: list[Any], every: list[Call] | None = None,
           results: list[Answer] | None = None) -> list[Group]:
    """Each group of calls with the answers that count for it (see the module docstring). One pass each way;
    ``every`` / ``results``: the dialect's calls / answers of ``items`` when the caller has them."""
    tools = dialect.tools
    every = tools.calls(items) if every is None else every
    results = tools.answers(items) if results is None else results
    at: dict[int, list[Answer]] = {}
    by_id: dict[str, list[Answer]] = {}
    for a in results:
        at.setdefault(a.index, []).append(a)
        by_id.setdefault(a.call_id, []).append(a)
    by_index: dict[int, list[Call]] = {}
    for c in every:
        by_index.setdefault(c.index, []).append(c)
    out: list[Group] = []
    pairing = tools.PAIRING
    for anchor, cs in by_index.items():
        ids = {c.call_id for c in cs}
        if pairing is Pairing.RUN_AFTER:
            end = anchor
            while end + 1 < len(items) and tools.is_answer_item(items[end + 1]):
                end += 1
            zone = [a for i in range(anchor + 1, end + 1) for a in at.get(i, ())]
        elif pairing is Pairing.LATER_BY_ID:
            end = anchor
            while end + 1 < len(items) and tools.is_call_item(items[end + 1]):
                end += 1
            while end + 1 < len(items) and tools.is_answer_item(items[end + 1]):
                end += 1
            zone = sorted((a for i in ids for a in by_id.get(i, ()) if a.index > anchor), key=lambda a: a.index)
        else:
            end = anchor + 1
            zone = list(at.get(anchor + 1, ()))
        out.append(Group(anchor, tuple(cs), tuple(a for a in zone if a.call_id in ids), end))
    return out


def runs(dialect: Dialect, items: list[Any], every: list[Call] | None = None,
         results: list[Answer] | None = None) -> list[tuple[list[Call], list[Answer]]]:
    """Each turn's calls with the answers sitting where that turn's answers belong, in order.

    Results in a run after the call (Chat): a calling message's calls and its run of result messages; in the
    next user turn (Anthropic): a turn's calls and the results of the message right after it; anywhere later
    by id (Responses): a block of consecutive call items and the block of consecutive outputs right after it."""
    tools = dialect.tools
    every = tools.calls(items) if every is None else every
    results = tools.answers(items) if results is None else results
    out: list[tuple[list[Call], list[Answer]]] = []
    if tools.PAIRING is Pairing.LATER_BY_ID:
        i = 0
        while i < len(items):
            if not tools.is_call_item(items[i]):
                i += 1
                continue
            start = i
            while i < len(items) and tools.is_call_item(items[i]):
                i += 1
            mid = i
            while i < len(items) and tools.is_answer_item(items[i]):
                i += 1
            out.append(([c for c in every if start <= c.index < mid], [a for a in results if mid <= a.index < i]))
        return out
    at: dict[int, list[Answer]] = {}
    for a in results:
        at.setdefault(a.index, []).append(a)
    for g in groups(dialect, items, every, results):
        last = g.end if tools.PAIRING is Pairing.RUN_AFTER else g.anchor + 1
        out.append((list(g.calls), [a for i in range(g.anchor + 1, last + 1) for a in at.get(i, ())]))
    return out


# --- ids ---------------------------------------------------------------------------------------------------

_B62 = string.digits + string.ascii_letters


def _b62(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = []
    while n:
        n, r = divmod(n, 62)
        out.append(_B62[r])
    return "".join(out) or "0"


def fresh_id(old: str, k: int, taken: set[str], prefix: str = "call_") -> str:
    """A new id for the ``k``-th use of ``old``, unused in ``taken``, deterministic, in ``old``'s format.

    Same length, and only the last (up to 4) letters and digits of ``old``'s final alphanumeric run
    replaced by others: 9 alphanumerics (Mistral's format) stay 9 alphanumerics, prefixes such as
    ``toolu_`` / ``call_`` stay, length limits (OpenAI: 40, Responses: 64) keep holding. Should that run
    be too short to find a free id, ``_`` and 6 characters are appended. An empty id becomes ``prefix`` and 24
    characters (the dialect's own: ``call_``, ``toolu_`` for Anthropic)."""
    for attempt in range(64):
        digest = _b62(hashlib.sha256(f"{old}\0{k}\0{attempt}".encode()).digest())
        if not old:
            new = prefix + digest[:24]
        elif attempt < 48 and (run := len(old) - len(old.rstrip(_B62))):
            cut = min(run, 4)
            new = old[: len(old) - cut] + digest[:cut]
        else:
            new = f"{old}_{digest[:6]}"
        if new not in taken:
            return new
    raise AssertionError("unreachable: 64 sha256 digests collided")


def ids(found: Iterable[Call | Answer]) -> str:
    return ", ".join(dict.fromkeys(x.call_id or "(empty)" for x in found))
