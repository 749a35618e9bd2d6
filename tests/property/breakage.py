"""Hypothesis strategies for broken tool histories: the valid conversations of :mod:`strategies`, broken the
way interruptions, compactions and clients break them (B6, B8; reference/session-killers.md §1).

:func:`broken_conversation` draws a conversation and then, per tool turn (one chunk, so turn N's request
is still turns 0..N), one breakage of its dialect:

- ``interrupt``: some results never written (Esc, a crash, a timeout); then the user types again (a user
  message ends the turn: the model speaks again only after that), as after a real interruption.
  Anthropic may also lose the whole user message, so the assistant's ``tool_use`` is followed by the
  next turn or ends the request.
- ``orphan`` (Responses, Anthropic; Chat's come from Droid's trimming in :mod:`strategies`): some
  declarations cut away (compaction); the memory may know them (``Conversation.calls``) or not.
- ``duplicate``: ids collapsed — opencode's Mistral cut (every id of the turn ``callmock0``, across turns
  too), a model reusing ``toolu_dup`` / ``call_dup``, or empty Responses ``call_id``s.
- ``reorder`` (Anthropic): text put before the ``tool_result`` blocks, or the results split over two
  user messages.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import reject
from hypothesis import strategies as st

from tests.property.strategies import CONVERSATIONS, Conversation, message_texts, texts

BREAKAGES = {
    "chat": ("interrupt", "duplicate"),
    "responses": ("interrupt", "orphan", "duplicate"),
    "messages": ("interrupt", "orphan", "duplicate", "reorder"),
}
CALL_TYPES = ("function_call", "custom_tool_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")


def _subset(draw: Any, n: int) -> set[int]:
    """A non-empty set of positions among ``n``."""
    return set(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)))


def _user_prompt(dialect: str, text: str) -> dict[str, Any]:
    if dialect == "responses":
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    return {"role": "user", "content": text}


def _ends_with_user(chunk: list[dict[str, Any]], dialect: str, text: str) -> list[dict[str, Any]]:
    last = chunk[-1] if chunk else {}
    if last.get("role") == "user" and last.get("type") in (None, "message"):
        return chunk
    return [*chunk, _user_prompt(dialect, text)]


# -------------------------------------------------------------------------------------------------- chat


def _chat(draw: Any, chunk: list[dict[str, Any]], how: str) -> list[dict[str, Any]] | None:
    tools = [i for i, m in enumerate(chunk) if m.get("role") == "tool"]
    if not tools or not chunk[0].get("tool_calls"):
        return None
    if how == "interrupt":
        gone = {tools[k] for k in _subset(draw, len(tools))}
        return _ends_with_user([m for i, m in enumerate(chunk) if i not in gone], "chat", draw(texts))
    out = copy.deepcopy(chunk)
    for call in out[0]["tool_calls"]:
        call["id"] = "callmock0"
    for m in out:
        if m.get("role") == "tool":
            m["tool_call_id"] = "callmock0"
    return out


# -------------------------------------------------------------------------------------------------- responses


def _responses(draw: Any, chunk: list[dict[str, Any]], how: str) -> list[dict[str, Any]] | None:
    calls = [i for i, m in enumerate(chunk) if m.get("type") in CALL_TYPES]
    outputs = [i for i, m in enumerate(chunk) if m.get("type") in OUTPUT_TYPES]
    if not calls:
        return None
    if how == "interrupt" and outputs:
        gone = {outputs[k] for k in _subset(draw, len(outputs))}
        return _ends_with_user([m for i, m in enumerate(chunk) if i not in gone], "responses", draw(texts))
    if how == "orphan":
        gone = {calls[k] for k in _subset(draw, len(calls))}
        return [m for i, m in enumerate(chunk) if i not in gone]
    new_id = draw(st.sampled_from(["call_dup", ""]))
    return [{**m, "call_id": new_id} if m.get("type") in CALL_TYPES + OUTPUT_TYPES else m for m in chunk]


# -------------------------------------------------------------------------------------------------- messages


def _messages(draw: Any, chunk: list[dict[str, Any]], how: str) -> list[dict[str, Any]] | None:
    if len(chunk) != 2 or not any(b.get("type") == "tool_use" for b in chunk[0]["content"]):
        return None
    assistant, user = copy.deepcopy(chunk)
    results = [k for k, b in enumerate(user["content"]) if b.get("type") == "tool_result"]
    if how == "interrupt":
        gone = {results[k] for k in _subset(draw, len(results))}
        rest = [b for k, b in enumerate(user["content"]) if k not in gone]
        if len(gone) < len(results):
            return [assistant, {**user, "content": rest}]
        if draw(st.booleans()):
            return [assistant]  # the whole user message lost
        return [assistant, {"role": "user", "content": rest or [{"type": "text", "text": draw(message_texts)}]}]
    if how == "orphan":
        uses = [k for k, b in enumerate(assistant["content"]) if b.get("type") == "tool_use"]
        gone = {uses[k] for k in _subset(draw, len(uses))}
        kept = [b for k, b in enumerate(assistant["content"]) if k not in gone]
        if not any(b.get("type") not in ("thinking", "redacted_thinking") for b in kept):
            kept.append({"type": "text", "text": draw(message_texts)})
        return [{**assistant, "content": kept}, user]
    if how == "duplicate":
        for b in assistant["content"]:
            if b.get("type") == "tool_use":
                b["id"] = "toolu_dup"
        for b in user["content"]:
            if b.get("type") == "tool_result":
                b["tool_use_id"] = "toolu_dup"
        return [assistant, user]
    if draw(st.booleans()):  # text first
        return [assistant, {**user, "content": [{"type": "text", "text": draw(message_texts)}, *user["content"]]}]
    if len(results) < 2:
        return None
    cut = results[draw(st.integers(1, len(results) - 1))]  # results split over two user messages
    return [assistant, {**user, "content": user["content"][:cut]}, {"role": "user", "content": user["content"][cut:]}]


_BREAK = {"chat": _chat, "responses": _responses, "messages": _messages}


@st.composite
def broken_conversation(draw: Any, dialect: str, host: str) -> Conversation:
    """A conversation of ``dialect`` to ``host`` with at least one tool turn broken (see the module docstring)."""
    conv = draw(CONVERSATIONS[dialect](host))
    broke = False
    chunks = [conv.chunks[0]]
    for chunk in conv.chunks[1:]:
        how = draw(st.sampled_from(BREAKAGES[dialect] + ("none",)))
        new = None if how == "none" else _BREAK[dialect](draw, chunk, how)
        broke |= new is not None
        chunks.append(chunk if new is None else new)
    if not broke:
        reject()
    conv.chunks = chunks
    return conv


def valid_or_broken(data: st.DataObject, dialect: str, host: str) -> tuple[bool, Conversation]:
    """A valid conversation or a broken one (drawn as either), and which it is."""
    broken = data.draw(st.booleans(), label="broken")
    conv = data.draw(broken_conversation(dialect, host) if broken else CONVERSATIONS[dialect](host),
                     label="conversation")
    return broken, conv
