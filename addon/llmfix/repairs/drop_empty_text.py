"""drop-empty-text: blank text blocks, and the messages they leave empty, leave an Anthropic history.

Bug — an interrupted stream or a resume leaves an assistant turn with a ``tool_use`` and an empty text block, or an
empty assistant turn; a tool or a hook gives a blank text. The client keeps it, and Anthropic rejects every later
request with 400 ``messages: text content blocks must be non-empty``, ``messages: text content blocks must contain
non-whitespace text`` (anthropics/claude-code #23440, home-assistant/core #140005, HKUDS/nanobot #949),
``messages.30.content.2.text: cache_control cannot be set for empty text blocks`` or ``messages.0: all messages must
have non-empty content except for the optional final assistant message`` (anthropics/claude-code #3196). Seen with
Claude Code on resume, goose after Ctrl-C (aaif-goose/goose #1624), buzz in a permanent 400 loop (block/buzz #559,
whose ``" "`` filler the non-whitespace rule then rejects: no text may be invented, only blanks dropped).

What it does, on every Messages upstream, before the request leaves:

- a text block whose text is empty or only whitespace is dropped; its ``cache_control`` moves to the block before it
  in that message (or the first one after it, if none is before), unless that block has its own, so a cache
  breakpoint stays where the client put it and none is added (thinking blocks take none: they are skipped);
- a message left with no content — or sent with none (``[]``, ``""``, whitespace) — is dropped when it is not the
  last message: Anthropic accepts two user (or assistant) messages in a row, and merges them. The last message is
  never dropped (the request would mean something else): a last assistant message may be empty (its blank text goes,
  a whitespace-only string becomes ``""``), a last user message left empty could not be sent either way, so it goes
  as it came;
- ``role:"system"`` messages are not this repair's: Anthropic takes one with empty content (Claude Code's
  directive-only form), and fold-system-messages turns them into user text for the upstreams that take none;
- the latest assistant message is left exactly as it came when it carries thinking blocks: Anthropic refuses any
  change there (``… in the latest assistant message cannot be modified``). That is the latest one that stays: an
  empty assistant message after it is dropped, and does not count.

Nothing else changes: no text is added, no non-blank block moves, every other message stays the same object (a
valid history leaves byte-identical). Text blocks inside a ``tool_result`` are left alone: no evidence says what
Anthropic makes of a result they would leave empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmfix.dialects.messages import wire as an
from llmfix.repairs.base import Context, Repair
from llmfix.report.changes import Change
from llmfix.wire.base import evolve

NAME = "drop-empty-text"
THINKING = frozenset({"thinking", "redacted_thinking"})
CACHE = "cache_control"


def _blank(b: Any) -> bool:
    return isinstance(b, an.TextBlock) and not b.text.strip()


def _thinking(b: Any) -> bool:
    return isinstance(b, an.OtherBlock) and b.type in THINKING


@dataclass(frozen=True, slots=True)
class Facts:
    """What the repair needs of one message, whatever its position: its role, whether it carries thinking blocks,
    blank text blocks, and whether it is hollow (no content once its blanks are gone)."""

    index: int
    role: str
    thinking: bool
    blank: bool
    hollow: bool

    @property
    def dirty(self) -> bool:
        return self.blank or self.hollow


def facts(m: Any, index: int) -> Facts | None:
    """The message's facts; None for anything but a user or assistant message (a ``role:"system"`` one with empty
    content is Claude Code's directive-only form, which Anthropic takes: fold-system-messages' concern)."""
    if not isinstance(m, an.Message) or m.role not in ("user", "assistant"):
        return None
    if isinstance(m.content, str):  # a whitespace-only string is blank text too
        return Facts(index, m.role, False, bool(m.content) and not m.content.strip(), not m.content.strip())
    blank = any(_blank(b) for b in m.content)
    return Facts(index, m.role, m.role == "assistant" and any(_thinking(b) for b in m.content), blank,
                 all(_blank(b) for b in m.content))


def changes_at(f: Facts, n: int, frozen: int) -> bool:
    """Whether the repair changes the message ``f`` of a list of ``n`` whose frozen latest assistant is ``frozen``."""
    if f.index == frozen or not f.dirty:
        return False
    if f.hollow:
        return f.index < n - 1 or (f.role == "assistant" and f.blank)
    return f.blank


def _latest(found: list[Facts], n: int) -> Facts | None:
    """The latest assistant message that stays (a hollow one that is not the last is dropped)."""
    return next((f for f in reversed(found) if f.role == "assistant" and (not f.hollow or f.index == n - 1)), None)


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    n = len(items)
    found = [f for i, m in enumerate(items) if (f := facts(m, i)) is not None]
    latest = _latest(found, n)
    frozen = latest.index if latest is not None and latest.thinking else -1
    todo = {f.index: f for f in found if changes_at(f, n, frozen)}
    if not todo:
        return items, []
    out: list[Any] = []
    changes: list[Change] = []
    for i, m in enumerate(items):
        f = todo.get(i)
        if f is None:
            out.append(m)
            continue
        if f.hollow and i < n - 1:
            what = "no content" if not m.content else "only blank text"
            changes.append(Change(NAME, f"messages[{i}]", f"{m.role} message dropped: it held {what} (Anthropic "
                                  "refuses an empty message that is not the last one)", before=m.to_wire()))
            continue
        if isinstance(m.content, str):  # the last assistant message, whitespace only: empty, as a prefill may be
            changes.append(Change(NAME, f"messages[{i}].content", f"whitespace-only ({len(m.content)} chars) content "
                                  "emptied", before=m.content, after=""))
            out.append(evolve(m, content=""))
        else:
            out.append(evolve(m, content=_cleaned(m.content, i, changes)))
    return out, changes


def _cleaned(content: list[Any], i: int, changes: list[Change]) -> list[Any]:
    """``content`` without its blank text blocks, each one's cache marker moved to a kept neighbour (logged)."""
    kept = [k for k, b in enumerate(content) if not _blank(b)]
    takers = [k for k in kept if not _thinking(content[k])]
    moved: dict[int, Any] = {}  # index of a kept block → the marker it takes
    for j, b in enumerate(content):
        if not _blank(b):
            continue
        what = "empty" if not b.text else f"whitespace-only ({len(b.text)} chars)"
        marker = (b.__pydantic_extra__ or {}).get(CACHE)
        note = ""
        if marker is not None:
            before, after = [k for k in takers if k < j], [k for k in takers if k > j]
            k = before[-1] if before else after[0] if after else None
            if k is None:
                note = "; its cache_control went with it (no other block of the message takes one)"
            elif k in moved or CACHE in (content[k].__pydantic_extra__ or {}):
                note = f"; its cache_control went with it (content[{k}] has one)"
            else:
                moved[k] = marker
                note = f"; its cache_control moved to content[{k}]"
        changes.append(Change(NAME, f"messages[{i}].content[{j}]", f"{what} text block dropped{note}",
                              before=b.to_wire()))
    return [evolve(content[k], **{CACHE: moved[k]}) if k in moved else content[k] for k in kept]


@dataclass(frozen=True, slots=True)
class Seen:
    """What the certain check carries: the dirty messages it let pass (at most the last one and the frozen latest
    assistant, each exempt only where it stood), and the latest assistant message that is not hollow."""

    dirty: tuple[Facts, ...] = ()
    anchor: Facts | None = None


def _extend(state: Seen | None, items: list[Any], start: int, ctx: Context) -> Seen | None:
    """Certain that nothing changes in ``items``: each new message judged where it is, and each dirty one let pass
    before judged again (the last message is no longer last once another follows; the latest assistant, no longer
    latest). Looks only at the new messages and the state."""
    seen = state or Seen()
    n = len(items)
    if start >= n:
        return seen
    new = [f for i in range(start, n) if (f := facts(items[i], i)) is not None]  # none: only system messages
    anchor = next((f for f in reversed(new) if f.role == "assistant" and not f.hollow), seen.anchor)
    latest = _latest(new, n) or anchor
    frozen = latest.index if latest is not None and latest.thinking else -1
    dirty = [f for f in (*seen.dirty, *new) if f.dirty]
    if any(changes_at(f, n, frozen) for f in dirty):
        return None
    return Seen(tuple(dirty), anchor)


REPAIR = Repair(NAME, _apply, needles={"messages": (b'"content"',)}, extend=_extend)
