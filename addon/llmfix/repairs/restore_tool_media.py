"""restore-tool-media: put back tool-result media that a gateway dropped, from the client's own request.

Bug B1 — a gateway converting Responses → internal → Responses (axonhub before PR #2117) turned a
``function_call_output`` whose output was ``[input_image]`` into ``"output": ""``, and text + image
into the text alone. The upstream answers 200 and the model describes an image it never saw
(wire-formats.md §5.1; the client side is Codex's ``view_image``, ``fixtures/codex/turn2_request.json``).

When llmfix sits on both legs — client → gateway and gateway → upstream — it saw the client's request
a moment before the gateway's. A tool result with no media, whose text is empty or the same as the
client's, gets the client's media back in its own dialect's native form (Responses: an array output
with ``input_image``, ``detail`` kept or ``"auto"``; Anthropic: image blocks in the ``tool_result``;
Chat: image parts in the tool message, which hoist-tool-media then moves where the profile wants them).
Only from a correlated request — the latest request that carried that call id, still in flight or
ended within ``llmfix_restore_window`` — so a client that drops old images on purpose never gets them
back, and a request with no such correlation is left alone (:mod:`llmfix.media_window`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from llmfix.changes import Change
from llmfix.profiles import Profile
from llmfix.repairs import placeholders
from llmfix.repairs.base import Context, Repair
from llmfix.route import Dialect
from llmfix.toolresults import Result, native, results
from llmfix.wire import anthropic as an
from llmfix.wire.base import evolve

NAME = "restore-tool-media"
WINDOW = "media_window"
FLOW = "flow_id"


def _squash(text: str) -> str:
    return "".join(text.split())


def _restorable(r: Result, ctx: Context) -> tuple[list[Any], list[str]] | None:
    """The native parts to put back for ``r``, and the media kinds that could not be carried."""
    if r.media:
        return None
    seen = ctx.extras[WINDOW].correlated(r.call_id, ctx.extras[FLOW])
    if seen is None or not seen.result.media:
        return None
    if _squash(r.text) not in ("", _squash(seen.result.text)):
        return None  # not the same result: never guess
    parts: list[Any] = []
    lost: list[str] = []
    for piece in seen.result.pieces:
        part = native(piece, ctx.dialect)
        if part is None:
            lost.append(piece.kind)
        else:
            parts.append(part)
    return parts, lost


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if not ctx.extras.get(WINDOW) or not ctx.extras.get(FLOW):
        return items, []
    out = list(items)
    changes: list[Change] = []
    blocks: dict[int, dict[str, list[Any]]] = defaultdict(dict)  # Anthropic: message index → call id → parts
    for r in results(ctx.dialect, items):
        found = _restorable(r, ctx)
        if found is None:
            continue
        parts, lost = found
        if ctx.dialect is Dialect.MESSAGES:
            blocks[r.index][r.call_id] = parts
            where = f"messages[{r.index}] tool_result {r.call_id}"
            before = None
        elif ctx.dialect is Dialect.RESPONSES:
            before = items[r.index].output
            out[r.index] = evolve(items[r.index], output=parts)
            where = f"input[{r.index}].output"
        else:
            before = items[r.index].content
            out[r.index] = evolve(items[r.index], content=parts)
            where = f"messages[{r.index}].content"
        media = [p for p in parts if hasattr(p, "media")]
        summary = (f"{r.call_id}: {placeholders.count_words(p.media().kind for p in media)} put back from the "
                   "client's request (the gateway dropped them)")
        changes.append(Change(NAME, where, summary, before=before, after=[p.to_wire() for p in parts],
                              dropped=tuple(f"{k} from {r.call_id}: cannot be carried in {ctx.dialect}" for k in lost)))
    for index, by_call in blocks.items():
        message: an.Message = out[index]
        new_blocks = [evolve(b, content=by_call[b.tool_use_id])
                      if isinstance(b, an.ToolResult) and b.tool_use_id in by_call else b for b in message.content]
        out[index] = evolve(message, content=new_blocks)
    return (out, changes) if changes else (items, [])


def _wanted(profile: Profile, dialect: Dialect) -> bool:
    return True


REPAIR = Repair(
    name=NAME,
    dialects=frozenset({Dialect.RESPONSES, Dialect.CHAT, Dialect.MESSAGES}),
    apply=_apply,
    wanted=_wanted,
    needles={Dialect.RESPONSES: (b"_call_output",), Dialect.CHAT: (b'"tool"',), Dialect.MESSAGES: (b"tool_result",)},
    doc=__doc__ or "",
)
