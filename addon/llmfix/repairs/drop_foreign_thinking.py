"""drop-foreign-thinking: thinking blocks the upstream did not sign leave the OLDER assistant turns.

Bug — an Anthropic thinking block is bound to the upstream and model that signed it. After a model or provider
switch (a router's detour, openclaw's fallback, opencode or hermes switching models, a Kimi/MiniMax/DeepSeek turn
replayed to Claude) or a resume that lost or truncated signatures, older assistant turns carry blocks Anthropic did
not sign, and every later turn is rejected: 400 ``messages.N.content.M: Invalid `signature` in `thinking` block``,
or ``messages.N.content.M.thinking.signature: Field required`` (anomalyco/opencode #25005, openclaw/openclaw
#107221, weave-os/router #860, vybestack/llxprt-code #2335, can1357/oh-my-pi #6379, anthropics/claude-code #21726;
docs/evidence.md, "Reasoning and thinking replay"). Anthropic staff: the check fails when a block differs in any way
from what was returned, or comes from another model (anthropic-sdk-python #1598).

What it does. Only assistant messages before the latest one are touched; the latest is left byte-identical
(``… in the latest assistant message cannot be modified``). In them, a ``thinking`` / ``redacted_thinking`` block
is dropped — its visible neighbours (text, tool_use, everything else) kept, in order — when:

1. the upstream itself said so: it rejected that block before (a ``messages.foreign_thinking`` fact, taught by
   the rejection naming ``messages.N.content.M``, retry/rejections.py), or the block has the origin of one it
   rejected: issued by the same other upstream and model (``messages.signature``, what memory saw each upstream
   issue), or, for a rejected block of unknown origin, another block of unknown origin. The rejection names only
   the first block the upstream could not verify and there is one resend, so blocks like it go with it; blocks
   memory saw this upstream issue for this model stay. Learned facts apply to the next request up front;
2. on an upstream whose profile says it verifies signatures (``anthropic_signed_thinking``: Anthropic), its form
   says it is not the upstream's own: a thinking block without a signature or with an empty one, a
   ``redacted_thinking`` without data, or a signature that is a UUID (DeepSeek's ``/anthropic`` signs with the
   message id, NousResearch/hermes-agent #21048; an Anthropic signature is a long opaque token) — unless memory saw
   this very upstream issue that block: blocks an upstream did sign stay, whoever it is.

A block memory saw another upstream issue is not dropped on that ground alone: two routes may reach the same
signer (a gateway and api.anthropic.com; Anthropic's signatures are said to be valid across its platforms), and
the upstream's own rejection settles it at the cost of one resend. Dropping every older thinking block is not
this repair; a block of unknown origin with a signature of the right form stays until the upstream rejects one.

Anthropic also wants a message's thinking blocks first (``If an assistant message contains any thinking blocks,
the first block must be thinking``): when a drop leaves a kept one behind visible content, the message's
remaining thinking blocks go too. A message left with no content at all (it held only foreign thinking) is
dropped whole: Anthropic rejects empty messages ("all messages must have non-empty content", DeepSeek's version
of the same trap, CoreInfraAI/opencode-plugin #6), consecutive user turns are accepted and merged, and the message
carried nothing the upstream could read. Never invents, never edits a block: a block stays exactly as it came or
goes whole. Upstreams with neither a profile flag nor a rejection (DeepSeek ``/anthropic``, which keeps unsigned
blocks and needs its own, Kimi, which does not check) are never touched.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from llmfix.dialects.messages import wire as an
from llmfix.dialects.messages.learn_thinking import FOREIGN, SIGNED, TYPES, block_key, fact_key, marker_key
from llmfix.repairs.base import Context, Repair
from llmfix.report.changes import Change
from llmfix.wire.base import evolve

NAME = "drop-foreign-thinking"
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


@dataclass(frozen=True, slots=True)
class Block:
    """A thinking block of an older assistant turn: where it is, its key, and what its form says (None: nothing)."""

    index: int
    position: int
    key: str
    form: str | None


def _fields(b: Any) -> dict[str, Any]:
    return b.__pydantic_extra__ or {} if isinstance(b, an.OtherBlock) else {}


def _form(kind: str, fields: dict[str, Any]) -> str | None:
    """Why a block's form shows it is not signed by an upstream that verifies signatures (None: it may be)."""
    if kind == "redacted_thinking":
        return None if isinstance(fields.get("data"), str) and fields["data"] else "it has no data"
    signature = fields.get("signature")
    if not isinstance(signature, str):
        return "it has no signature"
    if not signature.strip():
        return "its signature is empty"
    if UUID.fullmatch(signature.strip()):
        return "its signature is a message UUID (DeepSeek's form), not this upstream's"
    return None


def _thinking(m: Any, index: int) -> list[Block]:
    if not (isinstance(m, an.Message) and m.role == "assistant" and isinstance(m.content, list)):
        return []
    out = []
    for position, b in enumerate(m.content):
        if isinstance(b, an.OtherBlock) and b.type in TYPES:
            fields = {"type": b.type, **_fields(b)}
            key = block_key(fields)
            if key is not None:
                out.append(Block(index, position, key, _form(str(b.type), fields)))
    return out


def _latest(items: list[Any]) -> int:
    return next((i for i in range(len(items) - 1, -1, -1)
                 if isinstance(items[i], an.Message) and items[i].role == "assistant"), -1)


def _older(items: list[Any]) -> list[Block]:
    latest = _latest(items)
    return [b for i, m in enumerate(items[:latest]) for b in _thinking(m, i)] if latest > 0 else []


def rejected_any(ctx: Context) -> bool:
    """Whether this upstream ever rejected a thinking block (one memory key)."""
    store = ctx.reasoning
    return store is not None and bool(store.recall(FOREIGN, [marker_key(ctx.upstream)]))


def judge(blocks: list[Block], ctx: Context, rejected: bool | None = None) -> dict[str, str]:
    """block key → why it goes, for the blocks that go (``rejected``: :func:`rejected_any`, when known)."""
    store, upstream = ctx.reasoning, ctx.upstream
    keys = list(dict.fromkeys(b.key for b in blocks))
    drop: dict[str, str] = {}
    issued: dict[str, Any] = {}
    if rejected is None:
        rejected = bool(keys) and rejected_any(ctx)
    if store is not None and keys and rejected:
        facts = store.recall(FOREIGN, [fact_key(k, upstream) for k in keys])
        named = [k for k in keys if fact_key(k, upstream) in facts]
        if named:
            issued = store.recall(SIGNED, keys)

            def origin(k: str) -> tuple[str, str] | None:
                r = issued.get(k)
                return (r.upstream, r.value) if r is not None else None

            own = (upstream, ctx.model or "")
            origins = {origin(k) for k in named}
            for k in keys:
                o = origin(k)
                if k in named:
                    drop[k] = "this upstream rejected it before"
                elif o in origins and o != own:
                    where = "of unknown origin" if o is None else f"issued by {o[0]}"
                    drop[k] = f"{where}, like a block this upstream rejected"
    if ctx.profile.anthropic_signed_thinking:
        bad = {b.key: b.form for b in blocks if b.form is not None and b.key not in drop}
        if bad:
            seen = store.recall(SIGNED, list(bad)) if store is not None else {}
            for k, form in bad.items():
                if not (k in seen and seen[k].upstream == upstream):
                    drop[k] = str(form)
    return drop


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    blocks = _older(items)
    if not blocks:
        return items, []
    drop = judge(blocks, ctx)
    if not drop:
        return items, []
    out = list(items)
    gone: set[int] = set()
    changes: list[Change] = []
    for index in sorted({b.index for b in blocks if b.key in drop}):
        m: an.Message = items[index]
        content = list(m.content)
        why = {b.position: drop[b.key] for b in blocks if b.index == index and b.key in drop}
        kept = [(p, b) for p, b in enumerate(content) if p not in why]
        if any(_is_thinking(b) for _, b in kept) and kept and not _is_thinking(kept[0][1]):
            for p, b in kept:
                if _is_thinking(b):
                    why[p] = "a kept block would no longer be first in its message, as Anthropic requires"
            kept = [(p, b) for p, b in kept if p not in why]
        for p in sorted(why):
            changes.append(Change(NAME, f"messages[{index}].content[{p}]",
                                  f"{_describe(content[p])} dropped: {why[p]}", before=_summary(content[p])))
        if kept:
            out[index] = evolve(m, content=[b for _, b in kept])
        else:
            gone.add(index)
            changes.append(Change(NAME, f"messages[{index}]", "assistant message dropped: it held only the "
                                  "thinking dropped above (an empty message is rejected)"))
    return [m for i, m in enumerate(out) if i not in gone], changes


def _is_thinking(b: Any) -> bool:
    return isinstance(b, an.OtherBlock) and b.type in TYPES


def _describe(b: Any) -> str:
    fields = _fields(b)
    if b.type == "redacted_thinking":
        return "redacted_thinking block"
    text = fields.get("thinking")
    return f"thinking block ({len(text) if isinstance(text, str) else 0} chars)"


def _summary(b: Any) -> dict[str, Any]:
    """What the change log shows of a dropped block: its shape, never its text or signature."""
    fields = _fields(b)
    key = block_key({"type": b.type, **fields}) or ""
    out: dict[str, Any] = {"type": b.type, "sha256": key[:16]}
    for name in ("thinking", "signature", "data"):
        if name in fields:
            value = fields[name]
            out[name] = f"<{len(value)} chars>" if isinstance(value, str) else value
    return out


@dataclass(frozen=True, slots=True)
class Seen:
    """What the certain check carries: the thinking blocks of the assistant messages before the last one seen (a
    cons list, extended without copying), the last one's (they turn older once another assistant message follows),
    and which rejection of which upstream the older ones were last judged against (the marker's value)."""

    older: tuple[Any, ...] = ()  # (blocks of one message, rest) pairs
    last: tuple[Block, ...] = ()
    judged: tuple[str, str] | None = None

    def extend(self, items: list[Any], start: int) -> tuple[Seen, list[Block]]:
        """The state for ``items``, and the blocks that turned older in ``items[start:]``."""
        older, last = self.older, self.last
        fresh: list[Block] = []
        for i, m in enumerate(items[start:], start):
            if isinstance(m, an.Message) and m.role == "assistant":
                if last:
                    older = (last, older)
                    fresh += last
                last = tuple(_thinking(m, i))
        return Seen(older, last, self.judged), fresh


def _walk(node: tuple[Any, ...]) -> list[Block]:
    out: list[Block] = []
    while node:
        blocks, node = node
        out += blocks
    return out


def _extend(state: Seen | None, items: list[Any], start: int, ctx: Context) -> Seen | None:
    """Certain that nothing goes: no older block is judged foreign. A block is judged when it turns older; what the
    upstream rejects may be learned later (a rejection of a later turn names an older block), so one memory key —
    the marker of this upstream's last rejection — is asked on every turn, and when it changed since the older
    blocks were judged, they all are judged again. A session costs what its new turns add, plus one key."""
    seen, fresh = (state or Seen()).extend(items, start)
    if not seen.older:
        return seen
    store, upstream = ctx.reasoning, ctx.upstream
    marker = store.recall(FOREIGN, [marker_key(upstream)]).get(marker_key(upstream)) if store is not None else None
    judged = (upstream, marker.value) if marker is not None else None
    if judged is not None and judged != seen.judged:
        if judge(_walk(seen.older), ctx, True):
            return None
    elif fresh and judge(fresh, ctx, judged is not None):
        return None
    return dataclasses.replace(seen, judged=judged)


REPAIR = Repair(NAME, _apply, needles={"messages": (b"thinking",)}, extend=_extend)
