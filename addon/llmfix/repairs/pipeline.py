"""The repairs, in the order they run, and the pipeline that runs them.

Order matters: system messages an upstream does not take are folded into user messages first, so every
later repair sees only user and assistant turns (and a system message between a tool_use and its results
no longer splits them); media a gateway dropped, or a client turned into text, are restored next, so that
the other repairs see the request as the client meant it (restore pairs results by call id, so it must see
the ids as the client sent them); untangle-tool-run then rebuilds Droid's broken Chat runs and settles Chat
orphans; pair-tool-calls comes next, on untangled runs: it makes ids unique, settles Responses/Anthropic
orphans and answers every unanswered call, so that a run is complete before media are hoisted out of it
and the hoisted user message lands after the whole run, placeholders included (a user message inside a run breaks it,
see hoist-tool-media); Responses reasoning items come right after pairing, when every call and message the request
will carry is in place (pairing may put back a call, without an id): drop-unverifiable-reasoning removes what the
upstream said it cannot verify or does not hold, then pair-reasoning-items puts each remaining reasoning item before
the item it produced and removes the ids that would ask for a missing one — before hoisting, whose user message lands
after a run of tool results and so never between a reasoning item and the item it produced; media a
text-only model cannot take are then omitted everywhere else; the images left are then fitted to the
upstream's limits (fit-images: after omit, so an image the model cannot take is never decoded for nothing,
and after every repair that moves or restores images, so that it fits them where they will be sent and
counts them as the upstream will; an image restore-tool-media put back from memory is in none of the body's
bytes, so after it changed something every later repair runs, whatever its needles found); text arrays are
flattened last (pair-tool-calls' placeholders are plain
strings, so flattening never has to touch them; fit-images' placeholder for an undecodable image in a Chat
tool message is a text part that flattening then joins).

Reasoning state: drop-foreign-thinking comes right after the fold, before anything else looks at assistant turns:
it may drop an older assistant message that held only foreign thinking, and the pairing repairs must see the
conversation without it. drop-empty-text comes right after it, on what it left: blank text blocks and the messages
they leave empty go before the pairing repairs look for a tool_use's results in the next message (an empty
assistant turn between a tool_use and its results splits them); it runs again right after pair-tool-calls, which
keeps an orphan result's content, a blank text block included, as text of a user message.
Gemini: order-gemini-turns and drop-repeated-responses come right before pair-tool-calls, so that it pairs what is
left once empty parts and contents, and copies of a response, are gone and every call turn follows a user content (a
blank content between a call turn and its responses would split them); order-gemini-turns first, so that an empty
text between a response and its image no longer hides that a later response with the same image is its copy; and
order-gemini-turns again after pairing (a user content whose responses it moved back to their call turn may be left
with a whitespace-only text, which goes then);
restore-thought-signatures comes after pairing, when the contents are where they will be sent, and it only sets a
field of a call part, which no later repair looks at.
restore-reasoning-content comes right after pair-tool-calls: which assistant messages need their reasoning depends
on where the user messages are (untangle-tool-run moves Droid's out of tool runs), and it only adds a field to
assistant messages, which no later repair looks at.
"""

from __future__ import annotations

from typing import Any

from llmfix.body.haystack import Searchable
from llmfix.repairs import (
    drop_empty_text,
    drop_foreign_thinking,
    drop_repeated_responses,
    drop_unverifiable_reasoning,
    fit_images,
    fit_tool_schemas,
    flatten_tool_text,
    fold_system_messages,
    hoist_tool_media,
    omit_unsupported_media,
    order_gemini_turns,
    pair_reasoning_items,
    pair_tool_calls,
    restore_reasoning_content,
    restore_text_media,
    restore_thought_signatures,
    restore_tool_call_signatures,
    restore_tool_media,
    strip_refused_fields,
    untangle_tool_run,
)
from llmfix.repairs.base import Context, Repair
from llmfix.repairs.top import TopRepair
from llmfix.report.changes import Change

PIPELINE: tuple[Repair, ...] = (
    fold_system_messages.REPAIR,
    drop_foreign_thinking.REPAIR,
    drop_empty_text.REPAIR,
    restore_tool_media.REPAIR,
    restore_text_media.REPAIR,
    untangle_tool_run.REPAIR,
    order_gemini_turns.REPAIR,
    drop_repeated_responses.REPAIR,
    pair_tool_calls.REPAIR,
    drop_empty_text.REPAIR,  # again: what pair-tool-calls moved out of an orphan result
    order_gemini_turns.REPAIR,  # again: a content pair-tool-calls moved the responses out of, left with a blank text
    restore_reasoning_content.REPAIR,
    restore_tool_call_signatures.REPAIR,
    restore_thought_signatures.REPAIR,
    drop_unverifiable_reasoning.REPAIR,
    pair_reasoning_items.REPAIR,
    hoist_tool_media.REPAIR,
    omit_unsupported_media.REPAIR,
    fit_images.REPAIR,
    flatten_tool_text.REPAIR,
)
TOP: tuple[TopRepair, ...] = (strip_refused_fields.REPAIR, fit_tool_schemas.REPAIR)
"""The top-level repairs, in the order they run on the body the pipeline produced (:mod:`llmfix.repairs.top`)."""
NAMES: tuple[str, ...] = (*dict.fromkeys(r.name for r in PIPELINE), *(r.name for r in TOP))
"""Every repair's name; strip-refused-fields changes the top-level body, after the pipeline (engine.process)."""


def candidates(ctx_dialect: Any, profile: Any, body: Searchable, enabled: frozenset[str]) -> list[Repair]:
    """The enabled repairs that might change this body (cheap: profile flags and byte search only)."""
    return [r for r in PIPELINE if r.name in enabled and r.might_apply(ctx_dialect, profile, body)]


def run(items: list[Any], ctx: Context, repairs: list[Repair],
        enabled: frozenset[str] | None = None) -> tuple[list[Any], list[Change]]:
    """Run ``repairs`` in order; each sees the previous one's output. When one that brings media back from memory
    changed something, the ``enabled`` repairs after it that the profile wants run as well, whatever their needles
    found in the body: the media it put back are what they look for (an image restored into a tool result that is
    over the upstream's limits, or for a model that takes none)."""
    changes: list[Change] = []
    queue = list(repairs)
    k = 0
    while k < len(queue):
        repair = queue[k]
        items, more = repair.apply(items, ctx)
        changes.extend(more)
        k += 1
        if more and repair.brings_media and enabled is not None:
            later = PIPELINE[PIPELINE.index(repair) + 1 :]  # those queued among them: as wanted as any
            queue[k:] = [r for r in later if r.name in enabled and r.might_apply(ctx.dialect, ctx.profile, None)]
    return items, changes
