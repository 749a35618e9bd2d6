"""What Gemini rejects in a native request's ``contents`` (pure: no I/O, never raises on odd bodies).

``check(body, backend=…, prefix=…, pairing=…)`` returns the first `GeminiError` the real API would answer, or None.
Field names are read in both spellings, camelCase and snake_case, mixed as clients mix them (proto3 JSON: the
parser takes both); error paths are printed in snake_case, as Google prints them. The rules, in the order a request
meets them (parse time, then validation, then the model's own checks):

- tool declarations (tests/upstreams/gemini_schema.py);
- ``functionResponse.response`` must be an object: ``Invalid value at 'contents[2].parts[0].function_response.response'
  (type.googleapis.com/google.protobuf.Struct), "text"``;
- inline data must be base64: ``Invalid value at '…inline_data.data' (TYPE_BYTES), Base64 decoding failed for
  "data:image/png;base64"`` (musistudio/claude-code-router #845);
- R7 ``contents`` not empty, R6 ``parts`` not empty, R9 each part has one data member (``* GenerateContentRequest.…``
  lines: vercel/ai #3775, boldsoftware/sketch #68);
- R10 ``role`` is ``user`` or ``model`` (missing: Vertex and Code Assist only): ``Please use a valid role: user,
  model.``;
- MIME types: SVG and its aliases ``Unsupported MIME type: image/svg+xml`` (google-gemini/gemini-cli #3054,
  google/adk-python #5693), BMP the generic ``Request contains an invalid argument.`` (gemini-cli #14838);
- R8 no empty text part once there are several contents, except the empty part that carries a signature (the
  model sends those itself): the Vertex-worded text the Gemini API also gives (google-gemini/
  deprecated-generative-ai-js #361);
- R3 a model content with function calls follows a user content (gemini-cli #11814, #26956), R1/R2 the user content
  right after it holds exactly one ``functionResponse`` per call (gemini-cli #16543, NousResearch/hermes-agent
  PR #22261: split over two contents is the same 400) — not for ``countTokens`` (``pairing=False``): Gemini CLI
  counts a lone function-response content there.

Thought signatures need what the mock issued: tests/upstreams/gemini_signatures.py.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any

from tests.upstreams.access import as_dict, as_list
from tests.upstreams.gemini_errors import (
    CALL_PLACEMENT,
    COUNT_MISMATCH,
    EMPTY_TEXT,
    GENERIC,
    VALID_ROLE,
    Backend,
    GeminiError,
    field_errors,
    payload_errors,
)
from tests.upstreams.gemini_schema import check_tools

DATA_MEMBERS = (
    ("text", "text"), ("inlineData", "inline_data"), ("fileData", "file_data"), ("functionCall", "function_call"),
    ("functionResponse", "function_response"), ("executableCode", "executable_code"),
    ("codeExecutionResult", "code_execution_result"), ("toolCall", "tool_call"), ("toolResponse", "tool_response"),
)
SVG_TYPES = frozenset({"image/svg+xml", "image/svg", "application/svg+xml", "image/xml"})
GENERIC_TYPES = frozenset({"image/bmp", "image/x-ms-bmp", "image/tiff"})
STRUCT = "type.googleapis.com/google.protobuf.Struct"


def member(obj: Any, camel: str) -> Any:
    """``obj[camel]`` or its snake_case twin (``thoughtSignature`` / ``thought_signature``), None if neither."""
    obj = as_dict(obj)
    if camel in obj:
        return obj[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return obj.get(snake)


def has_member(obj: Any, camel: str) -> bool:
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return camel in as_dict(obj) or snake in as_dict(obj)


def data_members(part: Any) -> list[str]:
    """The camelCase names of the data members a part sets."""
    return [camel for camel, snake in DATA_MEMBERS if camel in as_dict(part) or snake in as_dict(part)]


def contents_of(body: dict[str, Any]) -> list[Any]:
    return as_list(body.get("contents"))


def parts_of(content: Any) -> list[Any]:
    return as_list(as_dict(content).get("parts"))


def role_of(content: Any) -> Any:
    return as_dict(content).get("role")


def calls_in(content: Any) -> list[dict[str, Any]]:
    """The ``functionCall`` parts of a content, in order."""
    return [as_dict(p) for p in parts_of(content) if has_member(p, "functionCall")]


def responses_in(content: Any) -> list[dict[str, Any]]:
    return [as_dict(p) for p in parts_of(content) if has_member(p, "functionResponse")]


def starts_turn(content: Any) -> bool:
    """A user content holding standard content and no ``functionResponse``: where the current turn starts
    (https://ai.google.dev/gemini-api/docs/thought-signatures, and gemini-cli's ``geminiChat.ts``)."""
    if role_of(content) not in ("user", None) or responses_in(content):
        return False
    return any(set(data_members(p)) - {"functionCall", "functionResponse"} for p in parts_of(content))


def current_turn(contents: list[Any]) -> int:
    """The index of the content that starts the current turn (0 when none does)."""
    return max((i for i, c in enumerate(contents) if starts_turn(c)), default=0)


def _inline_parts(contents: list[Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(proto path, inline data object)`` of every inline blob, in contents and inside function responses."""
    for i, content in enumerate(contents):
        for j, part in enumerate(parts_of(content)):
            data = member(part, "inlineData")
            if isinstance(data, dict):
                yield f"contents[{i}].parts[{j}].inline_data", data
            for k, inner in enumerate(as_list(member(member(part, "functionResponse"), "parts"))):
                data = member(inner, "inlineData")
                if isinstance(data, dict):
                    yield f"contents[{i}].parts[{j}].function_response.parts[{k}].inline_data", data


def _decodes(data: Any) -> bool:
    if not isinstance(data, str):
        return False
    text = data.strip()
    try:
        alphabet = "-_" if ("-" in text or "_" in text) else "+/"
        base64.b64decode(text + "=" * (-len(text) % 4), altchars=alphabet.encode(), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def check_parse(contents: list[Any], prefix: str) -> GeminiError | None:
    """Parse-time errors of ``contents``: response objects and base64 inline data."""
    lines = []
    for i, content in enumerate(contents):
        for j, part in enumerate(parts_of(content)):
            response = member(member(part, "functionResponse"), "response")
            if has_member(member(part, "functionResponse"), "response") and not isinstance(response, dict):
                shown = f'"{response}"' if isinstance(response, str) else str(response)
                lines.append(f"Invalid value at '{prefix}contents[{i}].parts[{j}].function_response.response' "
                             f"({STRUCT}), {shown}")
    for at, data in _inline_parts(contents):
        value = member(data, "data")
        if not _decodes(value):
            head = str(value).split(",", 1)[0][:40]
            lines.append(f"Invalid value at '{prefix}{at}.data' (TYPE_BYTES), Base64 decoding failed for \"{head}\"")
    return payload_errors(lines, "invalid-value") if lines else None


def check_structure(contents: list[Any], backend: Backend) -> GeminiError | None:
    """R7, R6, R9 (validation lines), then R10."""
    if not contents:
        return field_errors(["contents: contents is not specified"], "contents-empty")
    lines = []
    for i, content in enumerate(contents):
        parts = parts_of(content)
        if not parts:
            lines.append(f"contents[{i}].parts: contents.parts must not be empty.")
        lines += [f"contents[{i}].parts[{j}].data: required oneof field 'data' must have one initialized field"
                  for j, part in enumerate(parts) if not data_members(part)]
    if lines:
        return field_errors(lines, "parts-empty" if "must not be empty" in lines[0] else "part-without-data")
    for content in contents:
        role = role_of(content)
        if (role is None and backend in ("vertex", "code-assist")) or role not in (None, "user", "model"):
            return GeminiError(VALID_ROLE, "invalid-role")
    return None


def check_media(contents: list[Any]) -> GeminiError | None:
    """The MIME types Gemini refuses (inline data, also inside function responses)."""
    for _at, data in _inline_parts(contents):
        mime = str(member(data, "mimeType") or "").lower()
        if mime in SVG_TYPES:
            return GeminiError(f"Unsupported MIME type: {mime}", "unsupported-mime")
        if mime in GENERIC_TYPES:
            return GeminiError(GENERIC, "unsupported-mime")
    return None


def check_empty_text(contents: list[Any]) -> GeminiError | None:
    """R8: an empty text part among several contents (not the signed empty part the model itself streams)."""
    if len(contents) < 2:
        return None
    for content in contents:
        for part in parts_of(content):
            if member(part, "text") == "" and not member(part, "thoughtSignature"):
                return GeminiError(EMPTY_TEXT, "empty-text")
    return None


def check_pairing(contents: list[Any]) -> GeminiError | None:
    """R3, then R1/R2, content by content."""
    for i, content in enumerate(contents):
        calls = calls_in(content)
        if role_of(content) != "model" or not calls:
            continue
        if i == 0 or role_of(contents[i - 1]) not in ("user", None):
            return GeminiError(CALL_PLACEMENT, "call-turn-placement")
        after = contents[i + 1] if i + 1 < len(contents) else None
        answered = len(responses_in(after)) if after is not None and role_of(after) in ("user", None) else 0
        if answered != len(calls):
            return GeminiError(COUNT_MISMATCH, "response-count")
    return None


def check(body: dict[str, Any], *, backend: Backend = "gemini", prefix: str = "",
          pairing: bool = True) -> GeminiError | None:
    """The first rejection Gemini gives a native request ``body`` (the inner request for Code Assist, whose paths
    then take ``prefix="request."``), or None."""
    if not isinstance(body, dict):
        return None
    contents = contents_of(body)
    return (check_tools(body, prefix=prefix, vertex=backend in ("vertex", "code-assist"))
            or check_parse(contents, prefix)
            or check_structure(contents, backend)
            or check_media(contents)
            or check_empty_text(contents)
            or (check_pairing(contents) if pairing else None))
