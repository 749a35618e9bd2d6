"""Whether a history needs no pairing, in one cheap pass that carries over from one turn to the next.

pair-tool-calls (:mod:`llmfix.repairs.pair_tool_calls`) builds the view of :mod:`llmfix.wire.toolpairs` only
when this pass is not certain; its ``extend`` check continues the pass over a session's new items
(:mod:`llmfix.repairs.settled`). The rules are the repair's: tests/property/test_pairing.py holds this pass
to its full passes, tests/property/test_settled.py to them over any split of a conversation.
"""

from __future__ import annotations

from typing import Any

from llmfix.idset import EMPTY
from llmfix.route import Dialect
from llmfix.wire import anthropic as an
from llmfix.wire import chat as ch
from llmfix.wire import responses as rs
from llmfix.wire.toolpairs import is_tool_chat

type Settled = tuple[Any, Any]
"""What :func:`settled` carries from a paired prefix to its append: the ids declared and the ids answered
(two :class:`llmfix.idset.Ids`)."""


def surely_paired(dialect: Dialect, items: list[Any]) -> bool:
    """True when one cheap pass shows nothing to pair (see :func:`settled`); False means "look closer".

    The common case — a valid agent history of hundreds of items — costs one isinstance pass, not the view."""
    return settled(dialect, items, 0, None) is not None


def settled(dialect: Dialect, items: list[Any], start: int, state: Settled | None) -> Settled | None:
    """The declared and answered ids of ``items`` when one pass over ``items[start:]`` shows nothing to pair
    in the whole list, given ``state``, what this returned for ``items[:start]`` (None when ``start`` is 0);
    None means "look closer" (the full view decides).

    Nothing to pair: every id non-empty and declared once, answered at most once, and (Chat) every call
    answered in its run, (Responses) every call answered and every answer declared, (Anthropic) the tool_use
    blocks of an assistant message answered exactly by the tool_result blocks that open the next message,
    a user one, and no tool_result anywhere else. Each rule looks only at an item and its neighbours, and a
    paired prefix never ends in an open turn (Chat: a call is answered inside the prefix; Anthropic: an
    assistant message with tool_use is never last), so a prefix's answer holds for every append of it."""
    declared, answered = state if state is not None else (EMPTY, EMPTY)
    check = _SETTLED.get(dialect)
    if check is None:
        return None
    got = check(items, start, declared, answered)
    if got is None:
        return None
    new_declared, new_answered = got
    return declared.plus(new_declared), answered.plus(new_answered)


def _responses_settled(items: list[Any], start: int, declared: Any, answered: Any) -> tuple[set[str], set[str]] | None:
    # a paired prefix has answered == declared: the appended ids must be new and pair among themselves
    n = len(items)
    if n > start and isinstance(last := items[n - 1], rs.TOOL_CALLS) and not any(
            isinstance(m, rs.ToolOutput) and m.call_id == last.call_id for m in items[start : n - 1]):
        return None  # what the walk would end with (a call no output answers), found with one isinstance per item
    nd: set[str] = set()
    na: set[str] = set()
    for m in items[start:]:
        if isinstance(m, rs.ToolOutput):
            if not m.call_id or m.call_id in na or m.call_id in answered:
                return None
            na.add(m.call_id)
        elif isinstance(m, rs.TOOL_CALLS):
            if not m.call_id or m.call_id in nd or m.call_id in declared:
                return None
            nd.add(m.call_id)
    return (nd, na) if na == nd else None


def _chat_settled(items: list[Any], start: int, declared: Any, answered: Any) -> tuple[set[str], set[str]] | None:
    n = len(items)
    if n > start and _open_chat(items[n - 1]):
        return None  # what the walk would end with (the calls' zone is empty), found without walking
    nd: set[str] = set()
    na: set[str] = set()
    for i in range(start, n):
        m = items[i]
        if not isinstance(m, ch.Message):
            continue
        if m.role == "tool" and m.tool_call_id is not None:
            if m.tool_call_id in na or m.tool_call_id in answered:
                return None
            na.add(m.tool_call_id)
        elif m.role == "assistant" and m.tool_calls:
            j, zone = i + 1, set()
            while j < n and is_tool_chat(items[j]):
                zone.add(items[j].tool_call_id)
                j += 1
            for tc in m.tool_calls:
                if not tc.id or tc.id in nd or tc.id in declared or tc.id not in zone:
                    return None
                nd.add(tc.id)
    return nd, na


def _open_chat(m: Any) -> bool:
    """Whether ``m``, a list's last item, leaves calls open: an assistant message with tool calls."""
    return isinstance(m, ch.Message) and m.role == "assistant" and bool(m.tool_calls)


def _open_anthropic(m: Any) -> bool:
    """Whether ``m``, a list's last item, leaves calls open: an assistant message with tool_use blocks."""
    return isinstance(m, an.Message) and m.role == "assistant" and isinstance(m.content, list) and any(
        isinstance(b, an.ToolUse) for b in m.content)


def _anthropic_settled(items: list[Any], start: int, declared: Any, answered: Any
                       ) -> tuple[set[str], set[str]] | None:
    n = len(items)
    if n > start and _open_anthropic(items[n - 1]):
        return None  # what the walk would end with (no results follow), found without walking
    nd: set[str] = set()
    na: set[str] = set()
    for i in range(start, n):
        m = items[i]
        if not isinstance(m, an.Message) or not isinstance(m.content, list):
            continue
        if m.role == "assistant":
            uses = [b.id for b in m.content if isinstance(b, an.ToolUse)]
            if not uses:
                continue
            for x in uses:
                if not x or x in nd or x in declared:
                    return None
                nd.add(x)
            nxt = items[i + 1] if i + 1 < n else None
            if not (isinstance(nxt, an.Message) and nxt.role == "user" and isinstance(nxt.content, list)):
                return None
            lead: list[str] = []
            for b in nxt.content:
                if not isinstance(b, an.ToolResult):
                    break
                lead.append(b.tool_use_id)
            if len(lead) != len(uses) or set(lead) != set(uses):
                return None
        elif m.role == "user":
            # at ``start`` the previous item is the prefix's last, not read (repairs/settled.py): a prefix found
            # paired never ends in an assistant message with tool_use (its results would be missing), so
            # no result may follow it there, as when it has none
            prev = items[i - 1] if i > start else None
            mine = {b.id for b in prev.content if isinstance(b, an.ToolUse)} if (
                isinstance(prev, an.Message) and prev.role == "assistant" and isinstance(prev.content, list)) \
                else set()
            other = False
            for b in m.content:
                if not isinstance(b, an.ToolResult):
                    other = True
                    continue
                x = b.tool_use_id
                if other or x not in mine or x in na or x in answered:
                    return None
                na.add(x)
    return nd, na


_SETTLED = {Dialect.RESPONSES: _responses_settled, Dialect.CHAT: _chat_settled, Dialect.MESSAGES: _anthropic_settled}
