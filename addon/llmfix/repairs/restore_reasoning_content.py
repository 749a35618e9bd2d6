"""restore-reasoning-content: a thinking-mode Chat turn gets back the ``reasoning_content`` it was answered with.

Bug — DeepSeek's and Kimi's Chat APIs in thinking mode answer each turn with its reasoning
(``reasoning_content``) and reject a later request that replays a tool-calling turn without it:
DeepSeek 400 ``The `reasoning_content` in the thinking mode must be passed back to the API.`` (older:
``Missing `reasoning_content` field in the assistant message at message index N``), Kimi 400 ``thinking is
enabled but reasoning_content is missing in assistant tool call message at index N`` — on that turn and every
later one (docs/evidence.md, "Reasoning and thinking replay"). Clients that lose it: Factory Droid BYOK strips it
(Factory-AI/factory #1091; ``tests/fixtures/droid/*``: the assistant message has no such field), opencode sends
``"reasoning_content": ""`` (``tests/fixtures/opencode/chat__deepseek-chat__single_png__turn2.json``), pi,
qwen-code, gateways converting from Anthropic (cc-switch).

What it does, on profiles with ``chat_reasoning_content`` (DeepSeek, Moonshot/Kimi; an upstream without a
profile learns the flag from its 400): an assistant message that needs its reasoning (below) and lacks it — no
field, ``null`` or ``""`` — gets the reasoning llmfix's memory recorded from the answer that issued it, byte for
byte, found by what only that session's turn has (dialects/chat/learn_reasoning.py): the upstream and each tool
call's id, name and arguments (compared by value: Droid re-writes the model's JSON), or, for a turn without calls,
its text and the message before it. A call id alone would hand one user's reasoning to another: Kimi numbers its
ids within a conversation, so every session's first ``bash`` call is ``functions.bash:0``. A key two sessions
made alike with different reasoning (the same first command) is ambiguous in memory and gives nothing back, to
either. A message that carries a non-empty reasoning keeps it, even one that differs from the
record: the client's is never overwritten.

Which messages (the scope is UNCERTAIN: docs/evidence.md, "Reasoning and thinking replay"): the assistant messages
of every user-to-user span that holds a tool call, the span still open after the last user message included. That is
DeepSeek's own rule (api-docs.deepseek.com thinking_mode: without a tool call between two user messages the
reasoning "need not" be sent and is ignored; with one it must be sent back in all later turns), it covers the one
report of a text-only message being rejected (hermes-agent #14941: a plain reply between two tool-call turns, i.e.
inside such a span), and it covers Kimi's text, which names only tool-call messages. Outside those spans a missing
reasoning is left missing: DeepSeek ignores it there, and a request that is valid stays byte-identical (the reports
that it is needed on "every" assistant message come from clients padding ``""`` everywhere, hermes-agent #15717, not
from a rejection outside such a span).

Nothing recorded (the turn streamed past another llmfix, or before this one ran), or only ambiguously: the message
goes as it is, and the upstream answers its own 400. Never invented: a placeholder is not the model's reasoning,
and it is no sure way through either — DeepSeek V4 rejected ``"."`` with the same 400 (can1357/oh-my-pi #897), an
empty string was rejected as missing (HKUDS/nanobot #946, the V3.2-era text), while hermes-agent pads ``""`` and
reports sessions working (hermes-agent #15717): whether ``""`` passes is UNCERTAIN (docs/evidence.md), and
sending it would hide the lost reasoning from the model without saying so. Whether the request has thinking on is
not judged: a turn answered without thinking left no record, so nothing is added to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmfix.dialects.chat import wire as ch
from llmfix.dialects.chat.learn_reasoning import KIND, call_key, context, text_key
from llmfix.repairs.base import Context, Repair
from llmfix.report.changes import Change
from llmfix.wire.base import evolve

NAME = "restore-reasoning-content"
FIELD = "reasoning_content"


def _lacks(m: Any) -> bool:
    """An assistant message whose reasoning is missing, null or empty."""
    return isinstance(m, ch.Message) and m.role == "assistant" and (m.__pydantic_extra__ or {}).get(FIELD) in (None, "")


def _calls(m: ch.Message) -> list[str]:
    return [tc.id for tc in m.tool_calls or () if tc.id]


def _text(m: ch.Message) -> str:
    return m.content if isinstance(m.content, str) else ch.text_of(m.content)


def _context(item: Any) -> str | None:
    """What a turn that answered ``item`` is known by (dialects/chat/learn_reasoning.py ``context``)."""
    return context(item.role, _text(item), item.tool_call_id) if isinstance(item, ch.Message) else None


def _keys(m: ch.Message, before: str | None, upstream: str) -> tuple[str, ...]:
    """The keys the turn ``m`` is known by in memory, ``before`` the context of the message before it."""
    if _calls(m):
        return tuple(dict.fromkeys(call_key(upstream, tc.id, *d) for tc in m.tool_calls or ()
                                   if tc.id and (d := tc.declared()) is not None))
    text = _text(m)
    return (text_key(upstream, text, before),) if text.strip() and before is not None else ()


@dataclass(frozen=True, slots=True)
class Spans:
    """What the certain check carries from one turn to the next: the open span's messages lacking their reasoning
    while it has no tool call (their keys: they need it once one joins), whether it has one, the keys of every
    message that needs its reasoning and lacks it (each asked about on every turn: a record that lands late, a fleet
    instance's write or a Redis back from an outage, is seen by this check as by the repair), and the context of
    the last item (a turn without calls is known by the message before it)."""

    open: tuple[tuple[str, ...], ...] = ()
    open_calls: bool = False
    needy: tuple[str, ...] = ()
    last: str | None = None

    def extend(self, items: list[Any], start: int, upstream: str) -> Spans:
        """The state for ``items``: the messages that need their reasoning in ``items[start:]`` join the others."""
        open_, calls = list(self.open), self.open_calls
        needy = list(self.needy)
        for i in range(start, len(items)):
            m = items[i]
            if not isinstance(m, ch.Message):
                continue
            if m.role == "user":
                open_, calls = [], False
            elif m.role == "assistant":
                if not calls and _calls(m):
                    calls = True
                    needy += [k for keys in open_ for k in keys]
                    open_ = []
                if _lacks(m):
                    before = self.last if i == start else _context(items[i - 1])  # start 0: no state, no last
                    if keys := _keys(m, before, upstream):
                        if calls:
                            needy += keys
                        else:
                            open_.append(keys)
        last = _context(items[-1]) if len(items) > start else self.last
        return Spans(tuple(open_), calls, tuple(needy), last)


def _needy(items: list[Any]) -> list[int]:
    """Indices of the assistant messages lacking their reasoning in spans that hold a tool call."""
    out: list[int] = []
    span: list[int] = []
    calls = False
    for i, m in enumerate(items):
        if isinstance(m, ch.Message) and m.role == "user":
            out += span if calls else []
            span, calls = [], False
        elif isinstance(m, ch.Message) and m.role == "assistant":
            calls = calls or bool(_calls(m))
            if _lacks(m):
                span.append(i)
    return out + (span if calls else [])


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    store = ctx.reasoning
    if store is None or not ctx.profile.chat_reasoning_content:
        return items, []
    upstream = ctx.upstream
    needy = [(i, _keys(items[i], _context(items[i - 1]) if i > 0 else None, upstream)) for i in _needy(items)]
    needy = [(i, keys) for i, keys in needy if keys]
    if not needy:
        return items, []
    found = store.recall(KIND, [k for _, keys in needy for k in keys])
    out = list(items)
    changes: list[Change] = []
    for i, keys in needy:
        record = next((found[k] for k in keys if k in found), None)
        if record is None or not record.value:
            continue
        m: ch.Message = items[i]
        before = (m.__pydantic_extra__ or {}).get(FIELD, "absent")
        out[i] = evolve(m, **{FIELD: record.value})
        by = f"tool call {_calls(m)[0]}" if _calls(m) else "its text"
        had = "absent" if before == "absent" else ("null" if before is None else "empty")
        changes.append(Change(NAME, f"messages[{i}].{FIELD}",
                              f"{len(record.value)} chars of reasoning given back ({had} in the request), as "
                              f"{record.upstream or 'the upstream'} answered it (recognised by {by})",
                              before=None if before == "absent" else before, after=f"<{len(record.value)} chars>"))
    return (out, changes) if changes else (items, [])


def _extend(state: Spans | None, items: list[Any], start: int, ctx: Context) -> Spans | None:
    """Certain that nothing comes back: no message that needs its reasoning has a record. Memory may learn one
    any time after a turn was first seen (a fleet instance's write lands later, a Redis comes back from an outage),
    so every such message is asked about on every turn, in one query: the answer is the repair's at any time. A
    session's needy messages are those the client dropped the reasoning of and memory never had (few: a turn
    memory has is given back, and that request is repaired whole)."""
    spans = (state or Spans()).extend(items, start, ctx.upstream)
    store = ctx.reasoning
    if store is None or not ctx.profile.chat_reasoning_content:
        return spans
    if spans.needy and any(r.value for r in store.recall(KIND, spans.needy).values()):
        return None
    return spans


REPAIR = Repair(NAME, _apply, needles={"chat": (b'"assistant"',)},
                wanted=lambda profile, _dialect: profile.chat_reasoning_content, extend=_extend)
