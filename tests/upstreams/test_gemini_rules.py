"""The Gemini mock's pure rules: each rejects exactly its shape with Google's text, and lets the valid shapes pass."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.upstreams import gemini_rules
from tests.upstreams.gemini_errors import CALL_PLACEMENT, COUNT_MISMATCH, EMPTY_TEXT, GENERIC, VALID_ROLE
from tests.upstreams.gemini_schema import check_tools
from tests.upstreams.rules import check, rules_for_host

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
USER = {"role": "user", "parts": [{"text": "read a and b"}]}
CALLS = {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"file_path": "a.png"}}},
                                    {"functionCall": {"name": "read_file", "args": {"file_path": "b.png"}}}]}


def response(name: str = "read_file", **extra: Any) -> dict[str, Any]:
    return {"functionResponse": {"name": name, "response": {"output": "ok"}, **extra}}


ANSWERS = {"role": "user", "parts": [response(), {"inlineData": {"mimeType": "image/png", "data": PNG}}, response()]}


def body(*contents: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"contents": [copy.deepcopy(c) for c in contents], **top}


def message(b: dict[str, Any], **kw: Any) -> str | None:
    found = gemini_rules.check(b, **kw)
    return found.message if found else None


def test_a_valid_two_call_turn_with_images_passes_in_either_spelling() -> None:
    assert message(body(USER, CALLS, ANSWERS)) is None
    snake = body(USER, CALLS, ANSWERS)
    snake["contents"][1]["parts"] = [{"function_call": p["functionCall"]} for p in CALLS["parts"]]
    snake["contents"][2]["parts"][1] = {"inline_data": {"mime_type": "image/png", "data": PNG}}
    assert message(snake) is None


@pytest.mark.parametrize("answers", [
    {"role": "user", "parts": [response()]},  # one response for two calls
    {"role": "user", "parts": [response(), response(), response(), response()]},  # every response twice (a resume)
    {"role": "model", "parts": [{"text": "no answers"}]},
])
def test_r1_the_call_turn_needs_one_response_per_call(answers: dict[str, Any]) -> None:
    assert message(body(USER, CALLS, answers)) == COUNT_MISMATCH


def test_r2_responses_split_over_two_contents_are_the_count_error() -> None:
    split = body(USER, CALLS, {"role": "user", "parts": [response()]}, {"role": "user", "parts": [response()]})
    found = gemini_rules.check(split)
    assert found is not None and (found.message, found.status, found.reason) == (COUNT_MISMATCH, 400, "response-count")


def test_r3_a_call_turn_must_follow_a_user_turn() -> None:
    assert message(body(CALLS, ANSWERS)) == CALL_PLACEMENT  # history starting with a call
    after_text = body(USER, {"role": "model", "parts": [{"text": "let me see"}]}, CALLS, ANSWERS)
    assert message(after_text) == CALL_PLACEMENT


def test_count_tokens_does_not_pair() -> None:
    assert message(body(ANSWERS), pairing=False) is None  # Gemini CLI's countTokens: a lone response content
    assert message(body(ANSWERS)) is None  # responses alone break no call-turn rule either


def test_r6_r7_r9_structure_lines() -> None:
    assert message(body()) == "* GenerateContentRequest.contents: contents is not specified\n"
    assert message(body(USER, {"role": "model", "parts": []})) == (
        "* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.\n")
    assert message(body(USER, {"role": "model", "parts": [{"thoughtSignature": "abc"}]})) == (
        "* GenerateContentRequest.contents[1].parts[0].data: required oneof field 'data' must have one initialized "
        "field\n")


def test_r8_empty_text_among_several_contents_but_not_the_signed_empty_part() -> None:
    assert message(body({"role": "user", "parts": [{"text": ""}]})) is None  # alone: accepted
    assert message(body(USER, {"role": "model", "parts": [{"text": ""}]}, USER)) == EMPTY_TEXT
    signed = {"role": "model", "parts": [{"text": "hi"}, {"text": "", "thoughtSignature": "c2ln"}]}
    assert message(body(USER, signed, USER)) is None


def test_r10_roles() -> None:
    assert message(body({"role": "assistant", "parts": [{"text": "hi"}]}, USER)) == VALID_ROLE
    roleless = body({"parts": [{"text": "hi"}]})
    assert message(roleless) is None  # the Gemini API tolerates a missing role
    assert message(roleless, backend="vertex") == VALID_ROLE


@pytest.mark.parametrize("mime, expected", [
    ("image/svg+xml", "Unsupported MIME type: image/svg+xml"), ("application/svg+xml",
                                                                "Unsupported MIME type: application/svg+xml"),
    ("image/bmp", GENERIC), ("image/png", None), ("image/webp", None), ("image/gif", None),
    ("application/pdf", None),
])
def test_image_types(mime: str, expected: str | None) -> None:
    assert message(body({"role": "user", "parts": [{"text": "see"}, {"inlineData": {"mimeType": mime,
                                                                                     "data": PNG}}]})) == expected


def test_an_svg_inside_a_function_response_is_refused_too() -> None:
    inner = response(parts=[{"inlineData": {"mimeType": "image/svg+xml", "data": PNG}}])
    assert message(body(USER, CALLS, {"role": "user", "parts": [inner, response()]})) == (
        "Unsupported MIME type: image/svg+xml")


def test_parse_errors_struct_response_and_data_urls() -> None:
    bad = body(USER, CALLS, {"role": "user", "parts": [
        {"functionResponse": {"name": "read_file", "response": "text"}}, response()]})
    assert message(bad) == ("Invalid value at 'contents[2].parts[0].function_response.response' "
                            "(type.googleapis.com/google.protobuf.Struct), \"text\"")
    data_url = {"inlineData": {"mimeType": "image/png", "data": f"data:image/png;base64,{PNG}"}}
    url = body({"role": "user", "parts": [data_url]})
    assert message(url) == ("Invalid value at 'contents[0].parts[0].inline_data.data' (TYPE_BYTES), Base64 decoding "
                            "failed for \"data:image/png;base64\"")
    assert message(url, prefix="request.").startswith("Invalid value at 'request.contents[0]")


def tools(parameters: dict[str, Any], key: str = "parameters") -> dict[str, Any]:
    decls = [{"name": f"tool_{n}", "description": "d", "parameters": {"type": "OBJECT", "properties": {
        "x": {"type": "STRING"}}}} for n in range(3)]
    decls.append({"name": "mcp_tool", "description": "an MCP tool", key: parameters})
    return {"contents": [USER], "tools": [{"functionDeclarations": decls}]}


MCP = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": False,
       "properties": {"path": {"type": "string"}, "n": {"type": "integer", "exclusiveMinimum": 0},
                      "mode": {"anyOf": [{"const": "a"}, {"type": "null"}]}}}


def test_every_unknown_schema_keyword_gets_its_own_line_at_its_proto_path() -> None:
    found = check_tools(tools(MCP))
    at = "tools[0].function_declarations[3].parameters"
    lines = [f'Invalid JSON payload received. Unknown name "{k}" at \'{p}\': Cannot find field.' for k, p in [
        ("$schema", at), ("additionalProperties", at), ("exclusiveMinimum", f"{at}.properties[1].value"),
        ("const", f"{at}.properties[2].value.any_of[0]")]]
    assert found is not None and found.status == 400
    assert found.message == "\n".join(lines)
    assert found.error("gemini")["details"] == [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                                                  "fieldViolations": [{"description": line} for line in lines]}]
    assert check_tools(tools(MCP, key="parametersJsonSchema")) is None  # raw JSON Schema is Gemini CLI's way
    assert check_tools(tools(MCP), prefix="request.").message.startswith(  # type: ignore[union-attr]
        'Invalid JSON payload received. Unknown name "$schema" at \'request.tools[0]')


@pytest.mark.parametrize("schema, line", [
    ({"type": "object", "properties": {"p": {"type": ["string", "null"]}}},
     "Invalid JSON payload received. Unknown name \"type\" at 'tools[0].function_declarations[3].parameters"
     ".properties[0].value': Proto field is not repeating, cannot start list."),
    ({"type": "object", "properties": {"n": {"type": "string", "enum": ["a", 3]}}},
     "Invalid value at 'tools[0].function_declarations[3].parameters.properties[0].value.enum[1]' (TYPE_STRING), 3"),
    ({"type": "object", "properties": {"op": {"type": "integer", "enum": ["1", "2"]}}},
     "* GenerateContentRequest.tools[0].function_declarations[3].parameters.properties[op].enum: only allowed for "
     "STRING type\n"),
    ({"type": "object", "properties": {"url": {"type": "string", "format": "uri"}}},
     "* GenerateContentRequest.tools[0].function_declarations[3].parameters.properties[url].format: only 'enum' and "
     "'date-time' are supported for STRING type\n"),
    ({"type": "object", "properties": {}},
     "* GenerateContentRequest.tools[0].function_declarations[3].parameters.properties: should be non-empty for "
     "OBJECT type\n"),
    ({"type": "object", "properties": {"tags": {"type": "array"}}},
     "* GenerateContentRequest.tools[0].function_declarations[3].parameters.properties[tags].items: missing field.\n"),
])
def test_schema_rejections(schema: dict[str, Any], line: str) -> None:
    found = check_tools(tools(schema))
    assert found is not None and found.message == line


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "n": {
        "type": "integer", "format": "int32", "minimum": 1}, "kind": {"type": "string", "enum": ["a", "b"]},
        "tags": {"type": "array", "items": {"type": "string"}}, "opt": {"anyOf": [{"type": "string"}, {
            "type": "integer"}], "nullable": True}}, "required": ["when"], "propertyOrdering": ["when", "n"]},
    {"type": "OBJECT", "properties": {"x": {"type": "STRING", "description": "x", "min_length": 1}}},
])
def test_valid_schemas_pass(schema: dict[str, Any]) -> None:
    assert check_tools(tools(schema)) is None


def test_function_names_and_declaration_keys() -> None:
    bad = {"contents": [USER], "tools": [{"function_declarations": [{"name": "9lives", "parameters": {
        "type": "object", "properties": {"x": {"type": "string"}}}}]}]}
    assert check_tools(bad).message.startswith(  # type: ignore[union-attr]
        "* GenerateContentRequest.tools[0].function_declarations[0].name: Invalid function name.")
    anthropic = {"contents": [USER], "tools": [{"functionDeclarations": [{"name": "t", "input_schema": {}}]}]}
    assert check_tools(anthropic).message == (  # type: ignore[union-attr]
        "Invalid JSON payload received. Unknown name \"input_schema\" at 'tools[0].function_declarations[0]': "
        "Cannot find field.")


def test_the_gemini_rule_set_by_host_and_through_rules_check() -> None:
    for host in ("generativelanguage.googleapis.com", "us-central1-aiplatform.googleapis.com",
                 "aiplatform.googleapis.com", "cloudcode-pa.googleapis.com:443", "aiplatform.us.rep.googleapis.com"):
        assert rules_for_host(host) == "gemini"
    path = "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse"
    assert check("gemini", path, body(USER, CALLS, ANSWERS)) is None
    found = check("gemini", path, body(USER, CALLS))
    assert found is not None and found.message == COUNT_MISMATCH
    assert found.body == {"error": {"code": 400, "message": COUNT_MISMATCH, "status": "INVALID_ARGUMENT"}}
    wrapped = check("gemini", "/v1internal:streamGenerateContent?alt=sse", {"request": tools(MCP)})
    assert wrapped is not None and "'request.tools[0].function_declarations[3].parameters'" in wrapped.message
