"""restore-reasoning-content: a thinking-mode Chat turn gets back the ``reasoning_content`` it was answered with.

Bug — DeepSeek's and Kimi's Chat APIs in thinking mode answer each turn with its reasoning
(``reasoning_content``) and reject a later request that replays a tool-calling turn without it:
DeepSeek 400 ``The `reasoning_content` in the thinking mode must be passed back to the API.`` (older:
``Missing `reasoning_content` field in the assistant message at message index N``), Kimi 400 ``thinking is
enabled but reasoning_content is missing in assistant tool call message at index N`` — on that turn and every
later one (session-killers §3.1, wire-formats §7). Clients that lose it: Factory Droid BYOK strips it
(Factory-AI/factory #1091; ``tests/fixtures/droid/*``: the assistant message has no such field), opencode sends
``"reasoning_content": ""`` (``tests/fixtures/opencode/chat__deepseek-chat__single_png__turn2.json``), pi,
qwen-code, gateways converting from Anthropic (cc-switch).

What it does, on profiles with ``chat_reasoning_content`` (DeepSeek, Moonshot/Kimi; an upstream without a
profile learns the flag from its 400): an assistant message that needs its reasoning (below) and lacks it — no
field, ``null`` or ``""`` — gets the reasoning llmfix's memory recorded from the answer that issued it
(memory/learn_chat_reasoning.py: by its tool call ids, else its text, a short text not at all), byte for byte. A
message that carries a non-empty reasoning keeps it, even one that differs from the record: the client's is never
overwritten.

Which messages (the scope is UNCERTAIN in session-killers §3.1): the assistant messages of every user-to-user
span that holds a tool call, the span still open after the last user message included. That is DeepSeek's own
rule (api-docs.deepseek.com thinking_mode: without a tool call between two user messages the reasoning "need
not" be sent and is ignored; with one it must be sent back in all later turns), it covers the one report of a
text-only message being rejected (hermes-agent #14941: a plain reply between two tool-call turns, i.e. inside
such a span), and it covers Kimi's text, which names only tool-call messages. Outside those spans a missing
reasoning is left missing: DeepSeek ignores it there, and a request that is valid stays byte-identical (the
reports that it is needed on "every" assistant message come from clients padding ``""`` everywhere, hermes-agent
#15717, not from a rejection outside such a span).

Nothing recorded (the turn streamed past another llmfix, or before this one ran): the message goes as it is, and
the upstream answers its own 400. Never invented: a placeholder is not the model's reasoning, and it is no sure
way through either — DeepSeek V4 rejected ``"."`` with the same 400 (can1357/oh-my-pi #897), an empty string was
rejected as missing (HKUDS/nanobot #946, the V3.2-era text), while hermes-agent pads ``""`` and reports sessions
working (#15717): whether ``""`` passes is UNCERTAIN (session-killers §3.1), and sending it would hide the lost
reasoning from the model without saying so. Whether the request has thinking on is not judged: a turn answered
without thinking left no record, so nothing is added to it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from llmfix.memory.learn_chat_reasoning import KIND, turn_keys
from llmfix.repairs.base import Context, Repair
from llmfix.report.changes import Change
from llmfix.route import Dialect
from llmfix.wire import chat as ch
from llmfix.wire.base import evolve

NAME = "restore-reasoning-content"
FIELD = "reasoning_content"


def _lacks(m: Any) -> bool:
    """An assistant message whose reasoning is missing, null or empty."""
    return isinstance(m, ch.Message) and m.role == "assistant" and (m.__pydantic_extra__ or {}).get(FIELD) in (None, "")


def _calls(m: ch.Message) -> list[str]:
    return [tc.id for tc in m.tool_calls or () if tc.id]


def _keys(m: ch.Message) -> list[str]:
    return turn_keys(_calls(m), m.content if isinstance(m.content, str) else ch.text_of(m.content))


RECHECK_S = 60.0
"""How long a message that needs its reasoning, but had no record when first seen, is asked about again."""
CLOCK = time.monotonic


@dataclass(frozen=True, slots=True)
class Spans:
    """What the certain check carries from one turn to the next: the open span's messages lacking their reasoning
    while it has no tool call (they need it once one joins), whether it has one, and the messages that began to
    need their reasoning within :data:`RECHECK_S`, with when (they are asked about again until then)."""

    open: tuple[tuple[str, ...], ...] = ()
    open_calls: bool = False
    recent: tuple[tuple[tuple[str, ...], float], ...] = ()

    def extend(self, items: list[Any], start: int, now: float) -> Spans:
        """The state for ``items``: the messages that began to need their reasoning in ``items[start:]`` join the
        recent ones, those asked about for :data:`RECHECK_S` leave them."""
        open_, calls = list(self.open), self.open_calls
        needy: list[tuple[str, ...]] = []
        for m in items[start:]:
            if not isinstance(m, ch.Message):
                continue
            if m.role == "user":
                open_, calls = [], False
            elif m.role == "assistant":
                if not calls and _calls(m):
                    calls, needy, open_ = True, needy + open_, []
                if _lacks(m) and (keys := tuple(_keys(m))):
                    (needy if calls else open_).append(keys)
        recent = tuple((keys, t) for keys, t in self.recent if now - t < RECHECK_S)
        return Spans(tuple(open_), calls, recent + tuple((keys, now) for keys in needy))

    def asked(self) -> list[str]:
        """The keys to ask memory about on this turn."""
        return list(dict.fromkeys(k for keys, _ in self.recent for k in keys))


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
    store = ctx.extras.get("reasoning")
    if store is None or not ctx.profile.chat_reasoning_content:
        return items, []
    needy = [(i, _keys(items[i])) for i in _needy(items)]
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
        by = f"tool call {keys[0]}" if _calls(m) else "its text"
        had = "absent" if before == "absent" else ("null" if before is None else "empty")
        changes.append(Change(NAME, f"messages[{i}].{FIELD}",
                              f"{len(record.value)} chars of reasoning given back ({had} in the request), as "
                              f"{record.upstream or 'the upstream'} answered it (recognised by {by})",
                              before=None if before == "absent" else before, after=f"<{len(record.value)} chars>"))
    return (out, changes) if changes else (items, [])


def _extend(state: Spans | None, items: list[Any], start: int, ctx: Context) -> Spans | None:
    """Certain that nothing comes back: no message that needs its reasoning has a record. Memory may learn one a
    moment after a turn was first seen (a fleet instance's write lands a few ms later, at worst within
    ``llmfix_memory_timeout``), so such a message is asked about again on every turn for :data:`RECHECK_S`; after
    that its record will not come (a record is written while the answer streams, before the client can replay it),
    and a long session that never had its reasoning costs what its new turns add, not what it holds."""
    spans = (state or Spans()).extend(items, start, CLOCK())
    store = ctx.extras.get("reasoning")
    if store is None or not ctx.profile.chat_reasoning_content:
        return spans
    wanted = spans.asked()
    if wanted and any(r.value for r in store.recall(KIND, wanted).values()):
        return None
    return spans


REPAIR = Repair(NAME, _apply, needles={Dialect.CHAT: (b'"assistant"',)},
                wanted=lambda profile, _dialect: profile.chat_reasoning_content, extend=_extend)
