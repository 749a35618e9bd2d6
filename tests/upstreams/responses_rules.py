"""Strict upstream rules for the OpenAI Responses API (``POST /v1/responses``).

Two readings: xAI's (``check_xai``: tool output must be a string, no ``custom_tool_call_output`` or
``item_reference`` items, every ``input_image`` needs a string ``image_url``) and OpenAI's
(``check_openai``: call_id present, output array parts typed input_text/input_image/input_file, and
call/output pairing unless the conversation lives on the server). Error texts: wire-formats.md §1, §4.
"""

from __future__ import annotations

from typing import Any

from tests.upstreams.access import as_dict, as_list, type_of, walk_objects
from tests.upstreams.errors import XAI_DESERIALIZE, Rejection, column_after, openai_error, xai_error
from tests.upstreams.pairing_rules import responses_call_ids

CALL_TYPES = frozenset({"function_call", "custom_tool_call"})
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
OUTPUT_PART_TYPES = ("input_text", "input_image", "input_file")
XAI_UNKNOWN_ITEMS = {
    "custom_tool_call_output": "custom-tool-call-output-unsupported",
    "item_reference": "item-reference-unsupported",
}


def check_xai(body: dict[str, Any]) -> Rejection | None:
    """xAI's deserializer: the first item outside its ``ModelInput`` schema gives a 422."""
    for item in as_list(body.get("input")):
        reason = _xai_reason(item)
        if reason:
            message = f"{XAI_DESERIALIZE} at line 1 column {column_after(body, 'input')}"
            return xai_error(message, reason=reason)
    return None


def _xai_reason(item: Any) -> str | None:
    kind = type_of(item)
    if kind == "function_call_output" and not isinstance(as_dict(item).get("output"), str):
        return "tool-output-not-string"
    if kind in XAI_UNKNOWN_ITEMS:
        return XAI_UNKNOWN_ITEMS[kind]
    for node in walk_objects(item):
        if node.get("type") == "input_image" and not isinstance(node.get("image_url"), str):
            return "input-image-without-url"
    return None


def check_openai(body: dict[str, Any]) -> Rejection | None:
    """OpenAI's validation: item shapes first, then call/output pairing."""
    items = as_list(body.get("input"))
    for index, item in enumerate(items):
        if type_of(item) in OUTPUT_TYPES:
            rejection = _check_output_item(index, as_dict(item))
            if rejection:
                return rejection
    rejection = responses_call_ids(items)
    if rejection:
        return rejection
    if body.get("previous_response_id") or body.get("conversation"):
        return None  # the calls live on the server: pairing cannot be checked here
    return _check_pairing(items)


def _check_output_item(index: int, item: dict[str, Any]) -> Rejection | None:
    call_id = item.get("call_id")
    if call_id is None:
        return openai_error(
            "Invalid Value: 'input.call_id'. Function call output requires call_id.",
            reason="call-id-missing", param=f"input[{index}].call_id", code="invalid_value",
        )
    if call_id == "":
        return openai_error(
            f"Invalid 'input[{index}].call_id': empty string. Expected a string with minimum length 1, "
            "but got an empty string instead.",
            reason="call-id-empty", param=f"input[{index}].call_id", code="empty_string",
        )
    if not isinstance(call_id, str):
        return openai_error(
            f"Invalid type for 'input[{index}].call_id': expected a string, but got {_json_kind(call_id)} "
            "instead.",
            reason="call-id-invalid-type", param=f"input[{index}].call_id", code="invalid_type",
        )
    output = item.get("output")
    if isinstance(output, str):
        return None
    if not isinstance(output, list):
        return openai_error(
            f"Invalid type for 'input[{index}].output': expected one of a string or an array of objects, "
            f"but got {_json_kind(output)} instead.",
            reason="tool-output-invalid-type", param=f"input[{index}].output", code="invalid_type",
        )
    for k, part in enumerate(output):
        kind = type_of(part)
        if kind not in OUTPUT_PART_TYPES:
            return openai_error(
                f"Invalid value: '{kind}'. Supported values are: 'input_text', 'input_image', and 'input_file'.",
                reason="tool-output-part-invalid", param=f"input[{index}].output[{k}].type",
                code="invalid_value",
            )
    return None


def _check_pairing(items: list[Any]) -> Rejection | None:
    calls: list[str] = []
    answered: set[str] = set()
    for item in items:
        kind, call_id = type_of(item), as_dict(item).get("call_id")
        if kind in CALL_TYPES:
            calls.append(call_id)
        elif kind in OUTPUT_TYPES:
            if call_id not in calls:
                return openai_error(
                    f"No tool call found for function call output with call_id {call_id}.",
                    reason="orphan-tool-output", param="input",
                )
            answered.add(call_id)
    for call_id in calls:
        if call_id not in answered:
            return openai_error(
                f"No tool output found for function call {call_id}.",
                reason="tool-output-missing", param="input",
            )
    return None


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return "an object"
