"""untangle-tool-run: a Chat tool run broken by interleaved user messages and trimmed declarations.

Bug — Factory Droid 0.215.0 and 0.225.2 (BYOK ``generic-chat-completion-api``): after a turn with
two or more tool calls whose non-final result is an image, Droid sends each ``tool`` message followed
by a ``user`` message "Image content from tool result:" + ``image_url``, then trims the assistant's
``tool_calls`` to the unbroken run, so the later calls lose their declaration and their tool messages
become orphans. Strict upstreams answer 400 ``Messages with role 'tool' must be a response to a
preceding message with 'tool_calls'`` on that turn and on every later one (Factory-AI/factory #31, #32;
captures ``tests/fixtures/droid/*two_images__turn2.json``).

Repair, in the span after an assistant message (the tool and user messages up to its last tool
message): user messages move to just after the last tool message, in their order; a tool message
whose call the assistant does not declare gets its declaration back from memory (learned from the
streamed response that issued it, or from earlier requests) with its original name and arguments, in
the order of the tool messages; a tool message nobody declared and memory does not know becomes a user
message that keeps its content and names the call id. No orphan ever leaves; nothing is dropped, except
media the model cannot take (as hoist-tool-media decides): those become a placeholder and a ``dropped`` record.
"""

from __future__ import annotations

from typing import Any

from llmfix.dialects.chat import wire as ch
from llmfix.repairs import placeholders
from llmfix.repairs.base import Context, Repair
from llmfix.repairs.media_triage import kind, triage
from llmfix.report.changes import Change
from llmfix.wire.base import evolve

NAME = "untangle-tool-run"


def orphan_label(call_id: str | None) -> str:
    return f"[Result of tool call {call_id or '(no id)'}; the call that asked for it is no longer in the conversation]"


def _as_user(tool: ch.Message, ctx: Context) -> tuple[ch.Message, tuple[str, ...]]:
    """A tool message nobody declared, as a user message keeping all its content; and what had to be dropped.

    Media the model cannot take (the triage of hoist-tool-media: a user message is no place for them
    either) become a placeholder naming them, and each drop is returned for the change record.
    """
    label = orphan_label(tool.tool_call_id)
    if not isinstance(tool.content, list):
        return ch.Message(role="user", content=f"{label}\n{tool.content}" if tool.content else label), ()
    media = [p for p in tool.content if isinstance(p, ch.MEDIA_PARTS)]
    _, lost = triage(media, ctx, tool.tool_call_id)
    lost_ids = {id(p) for p, _ in lost}
    notes = [placeholders.omitted([kind(p) for p, r in lost if r == reason], reason)
             for reason in dict.fromkeys(r for _, r in lost)]
    content = [ch.TextPart(type="text", text=label), *(p for p in tool.content if id(p) not in lost_ids),
               *(ch.TextPart(type="text", text=n) for n in notes)]
    dropped = tuple(f"{p.media()} from {tool.tool_call_id}: {r}" for p, r in lost)
    return ch.Message(role="user", content=content), dropped


def _restored(call: Any) -> ch.ToolCall:
    if getattr(call, "kind", "function") == "custom":
        return ch.ToolCall(id=call.call_id, type="custom", custom={"name": call.name, "input": call.arguments})
    return ch.ToolCall(id=call.call_id, type="function", function=ch.Function(name=call.name, arguments=call.arguments))


def _lookup(ctx: Context, ids: list[str]) -> dict[str, Any]:
    if not ids or ctx.memory is None:
        return {}
    return dict(ctx.memory.lookup(ids))


def _span_end(items: list[Any], start: int) -> int | None:
    """Index of the last tool message in the run of tool/user messages starting at ``start``."""
    last = None
    k = start
    while k < len(items) and isinstance(items[k], ch.Message) and items[k].role in ("tool", "user"):
        if items[k].role == "tool":
            last = k
        k += 1
    return last


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    out: list[Any] = []
    changes: list[Change] = []
    i = 0
    while i < len(items):
        m = items[i]
        anchor = isinstance(m, ch.Message) and m.role == "assistant"
        end = _span_end(items, i + 1) if anchor else None
        if not anchor and isinstance(m, ch.Message) and m.role == "tool":
            # a tool message with no assistant before it at all: nothing can declare it
            converted, dropped = _as_user(m, ctx)
            out.append(converted)
            changes.append(Change(NAME, f"messages[{i}]", f"tool message {m.tool_call_id} follows no assistant "
                                  "message; kept as a user message naming the call", m.to_wire(), out[-1].to_wire(),
                                  dropped))
            i += 1
            continue
        if end is None:
            out.append(m)
            i += 1
            continue
        span = list(enumerate(items[i + 1 : end + 1], start=i + 1))
        declared = [tc.id for tc in (m.tool_calls or [])]
        tool_ids = [t.tool_call_id for _, t in span if t.role == "tool"]
        missing = [c for c in dict.fromkeys(tool_ids) if c is not None and c not in declared]
        known = _lookup(ctx, missing)
        keep_tools: list[Any] = []
        after: list[Any] = []
        moved_users: list[int] = []
        for idx, msg in span:
            if msg.role == "user":
                after.append(msg)
                moved_users.append(idx)
            elif msg.tool_call_id in declared or msg.tool_call_id in known:
                keep_tools.append(msg)
            else:
                converted, dropped = _as_user(msg, ctx)
                after.append(converted)
                changes.append(Change(NAME, f"messages[{idx}]", f"orphan tool message {msg.tool_call_id}: no "
                                      "declaration and none in memory; kept as a user message naming the call",
                                      msg.to_wire(), converted.to_wire(), dropped))
        assistant = m
        if known:
            by_id = {tc.id: tc for tc in (m.tool_calls or [])}
            order = [c for c in dict.fromkeys(t.tool_call_id for t in keep_tools)]
            calls = [by_id[c] if c in by_id else _restored(known[c]) for c in order]
            calls += [tc for tc in (m.tool_calls or []) if tc.id not in order]
            assistant = evolve(m, tool_calls=calls)
            names = ", ".join(f"{c} {known[c].name}" for c in order if c in known)
            changes.append(Change(NAME, f"messages[{i}].tool_calls",
                                  f"restored {len(known)} declaration(s) from memory: {names}",
                                  [tc.to_wire() for tc in (m.tool_calls or [])], [tc.to_wire() for tc in calls]))
        users_were_inside = any(idx < end for idx in moved_users)
        if users_were_inside:
            changes.append(Change(NAME, f"messages[{i + 1}:{end + 1}]",
                                  f"{len(moved_users)} user message(s) moved from inside the tool run to after its "
                                  f"last tool message (messages[{end}])",
                                  [f"messages[{idx}]" for idx in moved_users], None))
        out.append(assistant)
        out.extend(keep_tools)
        out.extend(after)
        i = end + 1
    return out, changes


_TOOLS, _USERS, _CLOSED = "tools", "users", "closed"


def _extend(state: tuple[frozenset[str], str] | None, items: list[Any], start: int, ctx: Context
            ) -> tuple[frozenset[str], str] | None:
    """Certain that nothing needs untangling, from ``items[start:]`` and the state of the prefix. :func:`_apply`
    changes nothing exactly when every tool message sits in the run of tool and user messages right after
    an assistant message, declared by it, and before every user message of that run. The state: the ids the
    last assistant message declares (empty before any) and where the walk is — in its run before any user
    message (``tools``), after one (``users``), or outside every run (``closed``)."""
    declared, phase = state if state is not None else (frozenset(), _CLOSED)
    for i in range(start, len(items)):
        m = items[i]
        role = m.role
        if role == "assistant":
            declared, phase = frozenset(tc.id for tc in m.tool_calls or ()), _TOOLS
        elif role == "tool":
            if phase != _TOOLS or m.tool_call_id is None or m.tool_call_id not in declared:
                return None
        elif role == "user":
            if phase == _TOOLS:
                phase = _USERS
        else:
            phase = _CLOSED
    return declared, phase


REPAIR = Repair(NAME, _apply, needles={"chat": (b'"tool"',)}, extend=_extend)
