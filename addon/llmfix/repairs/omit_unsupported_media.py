"""omit-unsupported-media: a model that takes no image (or file) input gets none, anywhere in the request.

Bug — opencode 1.18.33 with model ``deepseek-chat`` (declared with image input in the user's config)
puts a tool's image in a synthetic user message ``Attached media from tool result:`` + ``image_url``
(capture ``tests/fixtures/opencode/chat__deepseek-chat__single_png__turn2.json``). DeepSeek's Chat API rejects
any ``image_url`` part anywhere: 400 ``Failed to deserialize the JSON body into the target type:
messages[4]: unknown variant `image_url`, expected `text``` (esengine/DeepSeek-Reasonix #7859; docs/evidence.md,
"Which models take images"), and since the image stays in the history, every later turn fails too.
hoist-tool-media only gates media inside tool results.

Repair: when the profile (``media_input = false``), the models.dev catalogue or a profiles-file ``input``
says the model takes no image (or file) input, every image and file part anywhere — user and other
messages, tool results the other repairs left in place, Anthropic image/document blocks, Responses
``input_image`` / ``input_file`` — becomes a short text part in its place naming what was omitted and why,
with a ``dropped`` record in the change log. The decision is :func:`llmfix.repairs.media_triage.unsupported`,
the same one hoist-tool-media uses. A model nobody knows keeps its images (dropping on a guess is data
loss). Audio parts follow the same rule as in hoist-tool-media: a model whose modalities lack ``audio``
gets a placeholder (Droid moves tool audio into user messages). Runs after hoist-tool-media (which
already gated the tool results it moved) and before flatten-tool-text (which turns a tool message's text
parts into the string DeepSeek wants).
"""

from __future__ import annotations

from typing import Any

from llmfix.repairs import placeholders, settled
from llmfix.repairs.base import Context, Repair
from llmfix.repairs.media_triage import kind, unsupported
from llmfix.repairs.restore_text_media import NEEDLES as RESTORED
from llmfix.report.changes import Change
from llmfix.wire.base import Media, Wire

NAME = "omit-unsupported-media"


def _gate(parts: list[Any], ctx: Context) -> tuple[list[Any], list[str], list[str]] | None:
    """``parts`` with each part the model cannot take replaced by a placeholder; None when none is."""
    first = next((k for k, p in enumerate(parts) if isinstance(p, Media) and unsupported(p, ctx) is not None), None)
    if first is None:  # the common case: none is, and nothing is built
        return None
    out: list[Any] = list(parts[:first])
    dropped: list[str] = []
    kinds: list[str] = []
    for p in parts[first:]:
        why = unsupported(p, ctx) if isinstance(p, Media) else None
        if why is None:
            out.append(p)
            continue
        out.append(placeholders.text_part(ctx.dialect, placeholders.omitted_part(kind(p), why)))
        dropped.append(f"{p.media()}: {why}")
        kinds.append(kind(p))
    return (out, dropped, kinds) if dropped else None


def _change(location: str, what: str, before: list[Any], done: tuple[list[Any], list[str], list[str]]) -> Change:
    after, dropped, kinds = done
    return Change(NAME, location, f"{what}: {placeholders.count_words(kinds)} → placeholder (model takes none)",
                  before=[p.to_wire() for p in before], after=[p.to_wire() for p in after], dropped=tuple(dropped))


def _item(i: int, item: Any, ctx: Context) -> tuple[Any, list[Change]]:
    """Item ``i`` with every media part the model cannot take replaced: in the part lists inside its parts first (an
    Anthropic tool_result's content), then in its own."""
    field = item.PARTS if isinstance(item, Wire) else None
    content = item.held() if field is not None else None
    if not isinstance(content, list):
        return item, []
    where = f"{ctx.dialect.at(i)}.{field}"
    blocks: list[Any] = []
    changes: list[Change] = []
    for k, block in enumerate(content):
        inner = block.held() if isinstance(block, Wire) else None
        if isinstance(inner, list) and (done := _gate(inner, ctx)) is not None:
            changes.append(_change(f"{where}[{k}].{block.PARTS}", block.noun(), inner, done))
            block = block.holding(done[0])
        blocks.append(block)
    done = _gate(blocks, ctx)
    if done is not None:
        changes.append(_change(where, item.noun(), blocks, done))
        blocks = done[0]
    return (item.holding(blocks), changes) if changes else (item, [])


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if ctx.modalities is None:
        return items, []  # unknown model: assume it takes what it gets
    out: list[Any] = []
    changes: list[Change] = []
    for i, item in enumerate(items):
        new, more = _item(i, item, ctx)
        out.append(new)
        changes += more
    return (out, changes) if changes else (items, [])


REPAIR = Repair(NAME, _apply, extend=settled.local(_apply),  # each item decided on its own
                # media parts as the client sent them, or as restore-text-media makes them from text
                needles=lambda d: (*d.media.needles, *RESTORED))
