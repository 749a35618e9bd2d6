"""hoist-tool-media: tool-result media move to ONE user message right after the run of tool results.

Bugs: B3 — pi-ai / openclaw send Responses ``function_call_output.output`` as an array
``[input_text, input_image]``; xAI accepts only a string there and answers 422 ``Failed to deserialize
the JSON body into the target type: input: data did not match any variant of untagged enum ModelInput``
(openclaw #57981; captures ``fixtures/pi-ai/xai_responses*.json``). B4 — gateways converting to Chat
Completions leave ``image_url`` parts inside ``role:"tool"`` messages; OpenAI answers 400 "Image URLs are
only allowed for messages with role 'user'…", DeepSeek ``unknown variant `image_url```.

Repair (the canonical one of LiteLLM #34462, sub2api #6325, commandcode-proxy #49): each tool result
keeps its text (or a short placeholder saying where its media went) and all media of the run go, in
call order and labelled by call id, into ONE user message inserted right after the run of consecutive
tool results — never after each result (that re-creates B2) and never at the end of the input (that
reorders older turns, openclaw's mistake). Media the model cannot take (per the model catalogue) or
the upstream cannot take at all (an ``input_image`` with only a ``file_id`` for xAI) are replaced by a
placeholder naming them, and the change log records each drop.
"""

from __future__ import annotations

from typing import Any

from llmfix.profiles import Profile
from llmfix.repairs import placeholders, settled
from llmfix.repairs.base import Context, Repair
from llmfix.repairs.media_triage import kind, triage
from llmfix.report.changes import Change
from llmfix.route import Dialect
from llmfix.wire import chat as ch
from llmfix.wire import responses as rs
from llmfix.wire.base import evolve

NAME = "hoist-tool-media"


def _responses(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if ctx.profile.responses_tool_output_array:
        return items, []
    out: list[Any] = []
    changes: list[Change] = []
    i = 0
    while i < len(items):
        if not isinstance(items[i], rs.ToolOutput):
            out.append(items[i])
            i += 1
            continue
        j = i
        while j < len(items) and isinstance(items[j], rs.ToolOutput):
            j += 1
        hoisted: list[tuple[str | None, list[Any]]] = []
        for index in range(i, j):
            item: rs.ToolOutput = items[index]
            if isinstance(item.output, str):
                out.append(item)
                continue
            texts = [p.text for p in item.output if isinstance(p, rs.TEXT_PARTS)]
            media = [p for p in item.output if not isinstance(p, rs.TEXT_PARTS)]
            forward, dropped = triage(media, ctx, item.call_id)
            text = "\n".join(texts)
            notes = []
            if forward and not text:
                notes.append(placeholders.moved([kind(p) for p in forward]))
            for reason in dict.fromkeys(r for _, r in dropped):
                notes.append(placeholders.omitted([kind(p) for p, r in dropped if r == reason], reason))
            new_output = "\n".join([t for t in (text, *notes) if t])
            out.append(evolve(item, output=new_output))
            if forward:
                hoisted.append((item.call_id, forward))
            where = f"after input[{j - 1}]" if forward else ""
            summary = f"{item.type} {item.call_id}: array of {len(item.output)} part(s) → string"
            if forward:
                summary += f"; {placeholders.count_words(kind(p) for p in forward)} → user message {where}"
            changes.append(
                Change(
                    NAME,
                    f"input[{index}].output",
                    summary,
                    before=[p.to_wire() for p in item.output],
                    after=new_output,
                    dropped=tuple(f"{p.media()} from {item.call_id}: {r}" for p, r in dropped),
                )
            )
        if hoisted:
            content: list[Any] = []
            for call_id, parts in hoisted:
                content.append(rs.InputText(type="input_text", text=placeholders.label(call_id)))
                content.extend(parts)
            message = rs.Message(type="message", role="user", content=content)
            out.append(message)
            changes.append(
                Change(
                    NAME,
                    f"input[{j - 1}]+1",
                    "new user message with "
                    + placeholders.count_words(kind(p) for _, parts in hoisted for p in parts)
                    + " from " + ", ".join(str(c) for c, _ in hoisted),
                    before=None,
                    after=message.to_wire(),
                )
            )
        i = j
    return out, changes


def _chat(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if ctx.profile.chat_tool_media:
        return items, []
    out: list[Any] = []
    changes: list[Change] = []
    i = 0
    while i < len(items):
        if not _is_tool(items[i]):
            out.append(items[i])
            i += 1
            continue
        j = i
        while j < len(items) and _is_tool(items[j]):
            j += 1
        hoisted: list[tuple[str | None, list[Any]]] = []
        for index in range(i, j):
            msg: ch.Message = items[index]
            parts_in = msg.content if isinstance(msg.content, list) else []
            media = [p for p in parts_in if isinstance(p, ch.MEDIA_PARTS)]
            if not media:
                out.append(msg)
                continue
            assert isinstance(msg.content, list)
            kept = [p for p in msg.content if not isinstance(p, ch.MEDIA_PARTS)]
            forward, dropped = triage(media, ctx, msg.tool_call_id)
            notes = []
            if forward and not any(isinstance(p, ch.TextPart) and p.text for p in kept):
                notes.append(placeholders.moved([kind(p) for p in forward]))
            for reason in dict.fromkeys(r for _, r in dropped):
                notes.append(placeholders.omitted([kind(p) for p, r in dropped if r == reason], reason))
            content: str | list[Any]
            if all(isinstance(p, ch.TextPart) for p in kept) and not ctx.profile.chat_tool_text_array:
                content = "\n".join([*(p.text for p in kept), *notes])
            else:
                content = [*kept, *(ch.TextPart(type="text", text=n) for n in notes)]
            out.append(evolve(msg, content=content))
            if forward:
                hoisted.append((msg.tool_call_id, forward))
            summary = f"tool message {msg.tool_call_id}: {placeholders.count_words(kind(p) for p in media)} out"
            if forward:
                summary += f"; → user message after messages[{j - 1}]"
            changes.append(
                Change(
                    NAME,
                    f"messages[{index}].content",
                    summary,
                    before=[p.to_wire() for p in msg.content],
                    after=out[-1].to_wire()["content"],
                    dropped=tuple(f"{p.media()} from {msg.tool_call_id}: {r}" for p, r in dropped),
                )
            )
        if hoisted:
            parts: list[Any] = []
            for call_id, media_parts in hoisted:
                parts.append(ch.TextPart(type="text", text=placeholders.label(call_id)))
                parts.extend(media_parts)
            message = ch.Message(role="user", content=parts)
            out.append(message)
            changes.append(
                Change(
                    NAME,
                    f"messages[{j - 1}]+1",
                    "new user message with "
                    + placeholders.count_words(kind(p) for _, ps in hoisted for p in ps)
                    + " from " + ", ".join(str(c) for c, _ in hoisted),
                    after=message.to_wire(),
                )
            )
        i = j
    return out, changes


def _is_tool(m: Any) -> bool:
    return isinstance(m, ch.Message) and m.role == "tool"


def _apply(items: list[Any], ctx: Context) -> tuple[list[Any], list[Change]]:
    if ctx.dialect is Dialect.RESPONSES:
        return _responses(items, ctx)
    if ctx.dialect is Dialect.CHAT:
        return _chat(items, ctx)
    return items, []


def _wanted(profile: Profile, dialect: Dialect) -> bool:
    return not (profile.responses_tool_output_array if dialect is Dialect.RESPONSES else profile.chat_tool_media)


REPAIR = Repair(NAME, _apply, needles={Dialect.RESPONSES: (b"_call_output",), Dialect.CHAT: (b'"tool"',)},
                wanted=_wanted, extend=settled.local(_apply))  # each item decided on its own
