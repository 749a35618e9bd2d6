"""Strict upstream rules for Anthropic Messages (``POST /v1/messages``).

Each assistant ``tool_use`` id needs a ``tool_result`` in the very next message, which must be a user
message whose content starts with its tool_result blocks (a tool_result after a text block does not
count). Each ``tool_result`` must answer a ``tool_use`` of the message right before it.
Error texts: wire-formats.md §3.3. Inference (not confirmed): a tool_result placed after other blocks
is reported as "tool_use ids were found without tool_result blocks immediately after".
"""

from __future__ import annotations

from typing import Any

from tests.upstreams.access import as_dict, as_list, type_of
from tests.upstreams.errors import Rejection, anthropic_error
from tests.upstreams.pairing_rules import anthropic_unique_ids


def check(body: dict[str, Any]) -> Rejection | None:
    """Anthropic's pairing and ordering rules, first violation in message order."""
    messages = as_list(body.get("messages"))
    rejection = anthropic_unique_ids(messages)
    if rejection:
        return rejection
    for index, message in enumerate(messages):
        role = as_dict(message).get("role")
        if role == "assistant":
            following = messages[index + 1] if index + 1 < len(messages) else None
            rejection = _check_results_follow(index, message, following)
        elif role == "user":
            previous = messages[index - 1] if index > 0 else None
            rejection = _check_results_answer(index, message, previous)
        else:
            rejection = None
        if rejection:
            return rejection
    return None


def _blocks(message: Any) -> list[Any]:
    return as_list(as_dict(message).get("content"))


def _tool_use_ids(message: Any) -> list[Any]:
    if as_dict(message).get("role") != "assistant":
        return []
    return [as_dict(b).get("id") for b in _blocks(message) if type_of(b) == "tool_use"]


def _leading_result_ids(message: Any) -> list[Any]:
    if as_dict(message).get("role") != "user":
        return []
    ids = []
    for block in _blocks(message):
        if type_of(block) != "tool_result":
            break
        ids.append(as_dict(block).get("tool_use_id"))
    return ids


def _all_result_ids(message: Any) -> list[Any]:
    return [as_dict(b).get("tool_use_id") for b in _blocks(message) if type_of(b) == "tool_result"]


def _check_results_follow(index: int, message: Any, following: Any) -> Rejection | None:
    leading = _leading_result_ids(following)
    missing = [tool_id for tool_id in _tool_use_ids(message) if tool_id not in leading]
    if not missing:
        return None
    misplaced = as_dict(following).get("role") == "user" and all(
        tool_id in _all_result_ids(following) for tool_id in missing
    )
    return anthropic_error(
        f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
        f"{', '.join(map(str, missing))}. Each `tool_use` block must have a corresponding `tool_result` "
        "block in the next message.",
        reason="tool-result-not-first" if misplaced else "tool-result-missing",
    )


def _check_results_answer(index: int, message: Any, previous: Any) -> Rejection | None:
    declared = _tool_use_ids(previous)
    for k, block in enumerate(_blocks(message)):
        tool_id = as_dict(block).get("tool_use_id")
        if type_of(block) == "tool_result" and tool_id not in declared:
            return anthropic_error(
                f"messages.{index}.content.{k}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{tool_id}. Each `tool_result` block must have a corresponding `tool_use` block in the "
                "previous message.",
                reason="orphan-tool-result",
            )
    return None
