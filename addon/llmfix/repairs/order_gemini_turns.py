"""order-gemini-turns: a Gemini history whose turns break Gemini's order rules is put back in order.

Bug — Gemini refuses a history, and the client resends it on every later turn, when:

- a model content with function calls follows no user content: it opens the history, or follows another model
  content (a turn cut short by a crash, a compaction, a loop-detection request, a client converting another API's
  history): ``Please ensure that function call turn comes immediately after a user turn or after a function
  response turn.`` (google-gemini/gemini-cli #11814, #26486, #26956; continuedev/continue #11164);
- a text part is empty once the history has several contents (an interrupted stream, a client writing its
  placeholders): ``Unable to submit request because it has an empty text parameter.``
  (google-gemini/deprecated-generative-ai-js #361), and a content left with no part at all: ``…contents.parts must
  not be empty.`` (vercel/ai #3775);
- a content holding only whitespace-only text (Gemini streams such parts on the boundary of tool calls: ag2ai/ag2
  PR #2753) stands between a call turn and its responses: ``Please ensure that the number of function response parts
  is equal to the number of function call parts of the function call turn.``

Repair: an empty text part that carries no thought signature goes (the model streams a signature on an empty part
itself, and Gemini takes that part back); a content left with no part, or with only whitespace-only text, goes,
unless it is the last one and no user content comes right before it (a whitespace-only part beside anything else
stays: no rejection of one is known); a call turn that follows no user content gets one before it, saying plainly
that the model continues (gemini-cli itself puts ``[Continuing from previous AI thoughts...]`` there,
``packages/core/src/utils/historyHardening.ts``). No text of the conversation changes but whitespace; a history
holding none of these leaves byte-identical.
"""

from __future__ import annotations

from typing import Any

from llmfix.repairs.base import Context, Repair
from llmfix.report.changes import Change
from llmfix.wire.base import Textual, Wire

NAME = "order-gemini-turns"
BRIDGE = "[The model continues from its previous turn.]"


def _blank(part: Any) -> bool:
    return isinstance(part, Textual) and part.text == "" and not part.signature()


def _hollow(part: Any) -> bool:
    """Empty or whitespace-only text without a signature: a content of nothing else says nothing."""
    return isinstance(part, Textual) and not part.text.strip() and not part.signature()


def _run(items: list[Any], ctx: Context, after: str | None) -> tuple[list[Any], list[Change], str | None]:
    """(items, changes, the last content's role); ``after``: the role of the content before ``items`` (None: they
    open the history). Indexes in the changes count from the first of ``items``."""
    turns = ctx.dialect.turns
    out: list[Any] = []
    changes: list[Change] = []
    last = after
    for i, item in enumerate(items):
        role = turns.role(item) if isinstance(item, Wire) else None
        if role is None:
            out.append(item)
            continue
        parts = turns.blocks(item)
        kept = [p for p in parts if not _blank(p)]
        # the last content stays, the turn being sent, unless a user content before it is that turn already
        if all(_hollow(p) for p in kept) and (i < len(items) - 1 or (role == "user" and last == "user")):
            what = "content holding only empty or whitespace-only text" if parts else "content with no part"
            changes.append(Change(NAME, ctx.dialect.at(i), f"{what} removed", item.to_wire(), None))
            continue
        if kept and len(kept) < len(parts):
            item = turns.with_blocks(item, kept)
            changes.append(Change(NAME, ctx.dialect.at(i), f"{len(parts) - len(kept)} empty text part(s) removed"))
        if role == "assistant" and last != "user" and any(ctx.dialect.tools.calls([item])):
            bridge = turns.user_turn([turns.text_block(BRIDGE)])
            out.append(bridge)
            changes.append(Change(NAME, ctx.dialect.at(i), "user content inserted before this call turn, which "
                                  "followed no user content", None, bridge.to_wire()))
            last = "user"
        out.append(item)
        last = role
    return out, changes, last


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if ctx.dialect.turns is None:
        return items, []
    out, changes, _ = _run(items, ctx, None)
    return (out, changes) if changes else (items, [])


def _extend(state: Any, items: list[Any], start: int, ctx: Context) -> Any:
    """Certain when the new items change nothing, judged after the prefix's last role (the state: a call turn right
    after the prefix needs to know what came before it), and when the last content holds something: an empty one
    stays only while it is the last (one of whitespace-only text too)."""
    if ctx.dialect.turns is None:
        return ()
    turns = ctx.dialect.turns
    after = state[0] if state else None
    _, changes, last = _run(items[start:], ctx, after)
    if changes:
        return None
    tail = next((m for m in reversed(items[start:]) if isinstance(m, Wire) and turns.role(m)), None)
    if tail is not None and all(_hollow(p) for p in turns.blocks(tail)):
        return None
    return (last,)


REPAIR = Repair(NAME, _apply, needles={"gemini": ()}, extend=_extend)
