"""hoist-tool-media: tool-result media move to ONE user message right after the run of tool results.

Two bugs. pi-ai / openclaw send Responses ``function_call_output.output`` as an array
``[input_text, input_image]``; xAI accepts only a string there and answers 422 ``Failed to deserialize
the JSON body into the target type: input: data did not match any variant of untagged enum ModelInput``
(openclaw/openclaw #57981; captures ``tests/fixtures/pi-ai/xai_responses*.json``). And gateways converting to
Chat Completions leave ``image_url`` parts inside ``role:"tool"`` messages; OpenAI answers 400 "Image URLs are
only allowed for messages with role 'user'…", DeepSeek ``unknown variant `image_url``` (docs/evidence.md, "What
each API takes in a tool result").

Repair (the canonical one of LiteLLM #34462, sub2api #6325, commandcode-proxy #49): each tool result
keeps its text (or a short placeholder saying where its media went) and all media of the run go, in
call order and labelled by call id, into ONE user message inserted right after the run of consecutive
tool results — never after each result (that re-creates Droid's broken run, see untangle-tool-run) and never at
the end of the input (that reorders older turns, openclaw's mistake). Media the model cannot take (per the model
catalogue) or the upstream cannot take at all (an ``input_image`` with only a ``file_id`` for xAI) are replaced by a
placeholder naming them, and the change log records each drop.
"""

from __future__ import annotations

from typing import Any

from llmfix.dialects.base import Dialect, Pairing
from llmfix.profiles import Profile
from llmfix.repairs import placeholders, settled
from llmfix.repairs.base import Context, Repair
from llmfix.repairs.media_triage import kind, triage
from llmfix.report.changes import Change
from llmfix.wire.base import Media, Textual, Wire

NAME = "hoist-tool-media"


def serves(dialect: Dialect) -> bool:
    """Whether this repair serves ``dialect``: one whose tool results are items of their own (a Chat tool message,
    a Responses output), after which a user message can go."""
    return dialect.tools.PAIRING is not Pairing.NEXT_TURN


def _is_result(m: Any) -> bool:
    return isinstance(m, Wire) and m.is_result()


def _stripped(item: Any, ctx: Context, index: int, j: int) -> tuple[Any, list[Any], Change] | None:
    """The tool result ``item`` without its media (None when it keeps everything), the media to hoist, and the
    change. As the dialect says (``media.result_text_only``): a result that may be no array (Responses to xAI) keeps
    its text as one string, whatever its parts; any other keeps its parts but media, as a string where the profile
    takes tool text only as a string (``media.tool_text_flag``)."""
    d, field = ctx.dialect, item.PARTS
    content = item.held()
    text_only = d.media.result_text_only
    if not isinstance(content, list):
        return None
    if text_only:
        kept = [p for p in content if isinstance(p, Textual)]
        media = [p for p in content if not isinstance(p, Textual)]
    else:
        media = [p for p in content if isinstance(p, Media)]
        if not media:
            return None
        kept = [p for p in content if not isinstance(p, Media)]
    forward, dropped = triage(media, ctx, item.result_id())
    notes = []
    if forward and not any(isinstance(p, Textual) and p.text for p in kept):
        notes.append(placeholders.moved([kind(p) for p in forward]))
    for reason in dict.fromkeys(r for _, r in dropped):
        notes.append(placeholders.omitted([kind(p) for p, r in dropped if r == reason], reason))
    texts = [p.text for p in kept if isinstance(p, Textual)]
    flag = d.media.tool_text_flag
    new: str | list[Any]
    if text_only:
        new = "\n".join([t for t in ("\n".join(texts), *notes) if t])
        summary = f"{item.noun()}: array of {len(content)} part(s) → string"
        if forward:
            summary += f"; {placeholders.count_words(kind(p) for p in forward)} → user message after {d.at(j)}"
    else:
        if len(texts) == len(kept) and flag is not None and not getattr(ctx.profile, flag):
            new = "\n".join([*texts, *notes])
        else:
            new = [*kept, *(d.media.text_part(n) for n in notes)]
        summary = f"{item.noun()}: {placeholders.count_words(kind(p) for p in media)} out"
        if forward:
            summary += f"; → user message after {d.at(j)}"
    out = item.holding(new)
    after = new if isinstance(new, str) else [p.to_wire() for p in new]
    change = Change(NAME, f"{d.at(index)}.{field}", summary, before=[p.to_wire() for p in content], after=after,
                    dropped=tuple(f"{p.media()} from {item.result_id()}: {r}" for p, r in dropped))
    return out, forward, change


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    d = ctx.dialect
    if getattr(ctx.profile, d.media.tool_media_flag):
        return items, []
    out: list[Any] = []
    changes: list[Change] = []
    i = 0
    while i < len(items):
        if not _is_result(items[i]):
            out.append(items[i])
            i += 1
            continue
        j = i
        while j < len(items) and _is_result(items[j]):
            j += 1
        hoisted: list[tuple[str | None, list[Any]]] = []
        for index in range(i, j):
            item = items[index]
            done = _stripped(item, ctx, index, j - 1)
            if done is None:
                out.append(item)
                continue
            new, forward, change = done
            out.append(new)
            if forward:
                hoisted.append((item.result_id(), forward))
            changes.append(change)
        if hoisted:
            parts: list[Any] = []
            for call_id, media in hoisted:
                parts.append(d.media.text_part(placeholders.label(call_id)))
                parts.extend(media)
            message = d.media.user_message(parts)
            out.append(message)
            changes.append(Change(NAME, f"{d.at(j - 1)}+1", "new user message with "
                                  + placeholders.count_words(kind(p) for _, media in hoisted for p in media)
                                  + " from " + ", ".join(str(c) for c, _ in hoisted), before=None,
                                  after=message.to_wire()))
        i = j
    return out, changes


def _wanted(profile: Profile, dialect: Dialect) -> bool:
    return not getattr(profile, dialect.media.tool_media_flag)


REPAIR = Repair(NAME, _apply, needles=lambda d: d.tools.ANSWERS if serves(d) else None, wanted=_wanted,
                extend=settled.local(_apply))  # each item decided on its own
