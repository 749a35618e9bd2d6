"""fold-system-messages: ``role:"system"`` entries of an Anthropic ``messages[]`` become user-message text.

Bug — Claude Code since 2.1.154 sends mid-conversation system messages (its environment, agent and
skill lists, reminders) inside ``messages[]`` for its default model and for model ids it does not know;
the one for the default model also carries a message-level ``output_config``. Anthropic accepts them; the
Anthropic-compatible endpoints people point ``ANTHROPIC_BASE_URL`` at do not: DeepSeek ``/anthropic`` 400
``messages[1].role: unknown variant `system`, expected `user` or `assistant` `` (deepseek-ai/DeepSeek-V3
#1370, anthropics/claude-code #63366), GLM 422 ``Input should be 'user' or 'assistant'`` (zai-org/GLM-5
#74), Qwen (QwenLM/Qwen #2244), MiniMax 400 ``invalid params, chat content has invalid message role:
system (2013)`` (MiniMax-AI/MiniMax-M2.7 #43; docs/evidence.md, "Anthropic-compatible vendors"). Evidence of
the target shape: the fixture ``tests/fixtures/claude-code/sonnet45__single_png__turn2.json``, where Claude Code
sends the same content to a model without the feature as ``<system-reminder>…</system-reminder>`` text blocks in
a user message.

On profiles with ``anthropic_system_messages = false`` each run of consecutive system messages is folded,
in order and whole, as ``<system-reminder>`` text blocks (one per text block, or one for string content):

- at the end of the user message right before the run (after its tool_result blocks, which stay first);
- after an assistant's tool_use (before its results, where Anthropic itself refuses it), into the user
  message right after the run, after that message's leading tool_result blocks (they must come first);
- at the very start of the conversation, at the start of the first user message (where Claude Code puts
  them itself for models without the feature);
- else (after an assistant's text, or before an assistant) as a new user message in the run's place.

``cache_control`` and any other field of a text block stay on its folded block, so the number of cache
markers never changes (Anthropic allows 4; the fold adds none). Non-text blocks (invalid in a system
message, but not ours to lose) move as they are. A folded message's own fields other than role and content
(``output_config``) cannot be put anywhere and are dropped; the change record says so. A text already
wrapped in ``<system-reminder>`` is not wrapped again. Prefix-stable: a run is folded forward only when
what comes before it requires a following user message (a tool_use waiting for its results, or nothing
at all), so a later turn never moves text folded in an earlier one.
"""

from __future__ import annotations

from typing import Any

from llmfix.dialects.messages import wire as an
from llmfix.repairs import settled
from llmfix.repairs.base import Context, Repair
from llmfix.report.changes import Change
from llmfix.wire.base import evolve

NAME = "fold-system-messages"
OPEN, CLOSE = "<system-reminder>", "</system-reminder>"


def wrap(text: str) -> str:
    """Claude Code's own wrapper for system text sent in a user message."""
    stripped = text.strip()
    if stripped.startswith(OPEN) and stripped.endswith(CLOSE):
        return text
    return f"{OPEN}\n{text}\n{CLOSE}"


def _is_system(m: Any) -> bool:
    return isinstance(m, an.Message) and m.role == "system"


def _is_user(m: Any) -> bool:
    return isinstance(m, an.Message) and m.role == "user"


def _blocks(m: an.Message) -> list[Any]:
    """A message's content as blocks (a string becomes one text block)."""
    if isinstance(m.content, str):
        return [an.TextBlock(type="text", text=m.content)] if m.content else []
    return list(m.content)


def _folded(m: an.Message) -> list[Any]:
    """The blocks a system message becomes: each text wrapped, anything else as it is; empty texts go."""
    out: list[Any] = []
    for b in _blocks(m):
        if isinstance(b, an.TextBlock):
            if b.text:
                out.append(evolve(b, text=wrap(b.text)))
        else:
            out.append(b)
    return out


def _has_tool_use(m: Any) -> bool:
    return isinstance(m, an.Message) and isinstance(m.content, list) and any(
        isinstance(b, an.ToolUse) for b in m.content)


def _lead(blocks: list[Any]) -> int:
    """How many tool_result blocks open a user message."""
    n = 0
    while n < len(blocks) and isinstance(blocks[n], an.ToolResult):
        n += 1
    return n


def _extras(m: an.Message) -> dict[str, Any]:
    return dict(m.__pydantic_extra__ or {})


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if ctx.profile.anthropic_system_messages or not any(_is_system(m) for m in items):
        return items, []
    out: list[Any] = list(items)
    changes: list[Change] = []
    drop: set[int] = set()
    i = 0
    while i < len(items):
        if not _is_system(items[i]):
            i += 1
            continue
        start = i
        while i < len(items) and _is_system(items[i]):
            i += 1
        run = range(start, i)
        blocks = [b for k in run for b in _folded(items[k])]
        if not blocks:
            target = None
            where = "nowhere (no content)"
        elif start > 0 and _is_user(items[start - 1]):
            target = start - 1
            old = _blocks(out[target])
            out[target] = evolve(out[target], content=old + blocks)
            where = f"the end of messages[{target}]"
        elif i < len(items) and _is_user(items[i]) and (start == 0 or _has_tool_use(items[start - 1])):
            target = i
            old = _blocks(out[target])
            lead = _lead(old)
            out[target] = evolve(out[target], content=old[:lead] + blocks + old[lead:])
            where = f"messages[{target}]" + (f" after its {lead} tool_result block(s)" if lead else ", at its start")
        else:
            target = None
            where = "a new user message in its place"
        drop.update(run)
        for n, k in enumerate(run):
            m = items[k]
            extras = _extras(m)
            mine = _folded(m)
            summary = f"system message ({_size(m)}) → {len(mine)} <system-reminder> block(s) at {where}"
            if extras:
                summary += f"; its {', '.join(sorted(extras))} dropped (no place for it outside a system message)"
            if target is None and n == 0 and blocks:
                out[k] = an.Message(role="user", content=blocks)
                drop.discard(k)
            changes.append(Change(NAME, f"messages[{k}]", summary, m.to_wire(), [b.to_wire() for b in mine]))
    return [m for k, m in enumerate(out) if k not in drop], changes


def _size(m: an.Message) -> str:
    if isinstance(m.content, str):
        return f"{len(m.content)} chars" if m.content else "empty"
    texts = [b.text for b in m.content if isinstance(b, an.TextBlock)]
    other = len(m.content) - len(texts)
    text = f"{len(texts)} text block(s), {sum(len(t) for t in texts)} chars" if m.content else "empty"
    return text + (f", {other} other block(s)" if other else "")


REPAIR = Repair(NAME, _apply, needles={"messages": (b'"system"',)},
                wanted=lambda profile, _dialect: not profile.anthropic_system_messages,
                extend=settled.local(_apply))  # each item decided on its own
