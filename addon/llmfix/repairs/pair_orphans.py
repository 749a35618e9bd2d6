"""pair-tool-calls, pass 2: results whose call is declared nowhere (Responses, Anthropic), and second results.

Part of :mod:`llmfix.repairs.pair_tool_calls` (bug B6, its docstring has the clients and the evidence):
a result whose call is gone gets its declaration back from llmfix's memory when llmfix saw the call, else
its content is kept in a user message naming the call id; a second result for an answered call moves to a
user message after the run. Skipped for requests holding server-side state (``previous_response_id``,
``conversation``, ``item_reference``), whose outputs may answer calls held upstream.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from llmfix.repairs import placeholders
from llmfix.repairs.base import Context
from llmfix.repairs.media_triage import kind, triage
from llmfix.repairs.untangle_tool_run import orphan_label
from llmfix.report.changes import Change
from llmfix.route import Dialect
from llmfix.wire import anthropic as an
from llmfix.wire import chat as ch
from llmfix.wire import responses as rs
from llmfix.wire import toolpairs as tp
from llmfix.wire.base import evolve

NAME = "pair-tool-calls"  # the repair this pass belongs to: its changes carry that name



def where(dialect: Dialect, index: int, sub: int | None, call: bool) -> str:
    key = "input" if dialect is Dialect.RESPONSES else "messages"
    if sub is None:
        return f"{key}[{index}]"
    return f"{key}[{index}].{'tool_calls' if dialect is Dialect.CHAT else 'content'}[{sub}]"


def lookup(ctx: Context, call_ids: Iterable[str]) -> dict[str, Any]:
    wanted = [c for c in dict.fromkeys(call_ids) if c]
    if not wanted or ctx.memory is None:
        return {}
    return dict(ctx.memory.lookup(wanted))


# --- 2. results nobody declared ----------------------------------------------------------------------------------


def _server_state(items: list[Any], ctx: Context) -> bool:
    if ctx.dialect is not Dialect.RESPONSES:
        return False
    return bool(ctx.extras.get("server_state")) or any(
        isinstance(m, rs.OtherItem) and m.type == "item_reference" for m in items)


def _strays(pairs: tp.Pairs) -> list[tp.Answer]:
    """Answers with no declaration of their own: the id is declared nowhere, or fewer times than answered."""
    declared = Counter(c.call_id for c in pairs.calls)
    seen: Counter[str] = Counter()
    out = []
    for a in pairs.answers:
        seen[a.call_id] += 1
        if seen[a.call_id] > declared[a.call_id]:
            out.append(a)
    return out


def orphans(pairs: tp.Pairs, ctx: Context) -> tuple[list[Any], list[Change]]:
    items = pairs.items
    strays = _strays(pairs)
    if not strays or _server_state(items, ctx):
        return items, []
    d = ctx.dialect
    declared = {c.call_id for c in pairs.calls}
    if d is Dialect.CHAT:  # a Chat tool message declared nowhere is untangle-tool-run's, which ran before
        extra = [a for a in strays if a.call_id in declared]
        return _chat_extra(items, extra, ctx) if extra else (items, [])
    known = lookup(ctx, (a.call_id for a in strays if a.call_id not in declared))
    if d is Dialect.RESPONSES:
        return _responses_orphans(items, strays, known, ctx)
    return _anthropic_orphans(items, strays, known)


def _gated(parts: list[Any], ctx: Context, call_id: str | None, text: Any) -> tuple[list[Any], tuple[str, ...]]:
    """``parts`` for a user message: media the model cannot take become a placeholder (hoist's triage); the drops."""
    media = [p for p in parts if isinstance(p, (*ch.MEDIA_PARTS, *rs.MEDIA_PARTS))]
    _, lost = triage(media, ctx, call_id)
    if not lost:
        return parts, ()
    lost_ids = {id(p) for p, _ in lost}
    notes = [placeholders.omitted([kind(p) for p, r in lost if r == reason], reason)
             for reason in dict.fromkeys(r for _, r in lost)]
    kept = [p for p in parts if id(p) not in lost_ids] + [text(n) for n in notes]
    return kept, tuple(f"{p.media()} from {call_id}: {r}" for p, r in lost)


def _chat_extra(items: list[Any], extra: list[tp.Answer], ctx: Context) -> tuple[list[Any], list[Change]]:
    """Chat tool messages beyond the declarations of their id: user messages after their run, naming the call."""
    at = {a.index for a in extra}
    out: list[Any] = []
    held: list[Any] = []
    changes = []
    for i, m in enumerate(items):
        if i in at:
            label = f"[Another result of tool call {m.tool_call_id}, which already has one]"
            dropped: tuple[str, ...] = ()
            if isinstance(m.content, list):
                parts, dropped = _gated(list(m.content), ctx, m.tool_call_id,
                                        lambda t: ch.TextPart(type="text", text=t))
                user = ch.Message(role="user", content=[ch.TextPart(type="text", text=label), *parts])
            else:
                user = ch.Message(role="user", content=f"{label}\n{m.content}" if m.content else label)
            held.append(user)
            changes.append(Change(NAME, f"messages[{i}]", f"tool message {m.tool_call_id} answers a call already "
                                  "answered; kept as a user message after the tool run, naming the call",
                                  m.to_wire(), user.to_wire(), dropped))
            continue
        if held and not (isinstance(m, ch.Message) and m.role == "tool"):
            out += held
            held = []
        out.append(m)
    out += held
    return out, changes


def _responses_orphans(items: list[Any], strays: list[tp.Answer], known: dict[str, Any], ctx: Context
                       ) -> tuple[list[Any], list[Change]]:
    at = {a.index for a in strays}
    out: list[Any] = []
    changes = []
    restored = set()
    for i, m in enumerate(items):
        if i not in at:
            out.append(m)
            continue
        call = known.get(m.call_id or "")
        if call is not None and m.call_id not in restored:
            restored.add(m.call_id)
            decl = tp.declaration(Dialect.RESPONSES, call, m.type)
            out += [decl, m]
            changes.append(Change(NAME, f"input[{i}]", f"{m.type} {m.call_id}: no call declared it; restored "
                                  f"{decl.type} {call.name} from memory right before it", None, decl.to_wire()))
        else:
            dropped: tuple[str, ...] = ()
            if isinstance(m.output, list):
                parts, dropped = _gated(list(m.output), ctx, m.call_id,
                                        lambda t: rs.InputText(type="input_text", text=t))
                m_in = evolve(m, output=parts)
            else:
                m_in = m
            user = tp.responses_output_as_user(m_in, orphan_label(m.call_id))
            out.append(user)
            changes.append(Change(NAME, f"input[{i}]", f"{m.type} {m.call_id or '(no call id)'}: no call declared "
                                  "it and none in memory; kept as a user message naming the call",
                                  m.to_wire(), user.to_wire(), dropped))
    return out, changes


def _anthropic_orphans(items: list[Any], strays: list[tp.Answer], known: dict[str, Any]
                       ) -> tuple[list[Any], list[Change]]:
    out = list(items)
    changes = []
    by_message: dict[int, list[tp.Answer]] = {}
    for a in strays:
        by_message.setdefault(a.index, []).append(a)
    for j, found in by_message.items():
        prev = out[j - 1] if j > 0 else None
        can_declare = isinstance(prev, an.Message) and prev.role == "assistant"
        restore = [a for a in found if can_declare and a.call_id in known]
        restore = [a for a in restore if [b.call_id for b in restore].count(a.call_id) == 1]
        if restore:
            content = prev.content if isinstance(prev.content, list) else [an.TextBlock(type="text",
                                                                                          text=prev.content)]
            uses = [tp.declaration(Dialect.MESSAGES, known[a.call_id]) for a in restore]
            out[j - 1] = evolve(prev, content=[*content, *uses])
            changes.append(Change(NAME, f"messages[{j - 1}].content", f"tool_result {tp.ids(restore)} in "
                                  f"messages[{j}]: no tool_use declared it; restored "
                                  f"{', '.join(u.name for u in uses)} from memory in the assistant message before",
                                  None, [u.to_wire() for u in uses]))
        convert = {a.sub for a in found if a not in restore}
        if not convert:
            continue
        msg = out[j]
        blocks: list[Any] = []
        for k, b in enumerate(msg.content):
            if k in convert:
                new = tp.anthropic_result_as_blocks(b, orphan_label(b.tool_use_id))
                blocks += new
                changes.append(Change(NAME, f"messages[{j}].content[{k}]", f"tool_result {b.tool_use_id}: no "
                                      "tool_use declared it and none in memory; kept as text naming the call",
                                      b.to_wire(), [x.to_wire() for x in new]))
            else:
                blocks.append(b)
        out[j] = evolve(msg, content=blocks)
    return out, changes


