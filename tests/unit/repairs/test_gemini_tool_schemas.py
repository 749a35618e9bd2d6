"""fit-tool-schemas on Gemini's native API, judged by the strict mock's reading of ``Schema``
(tests/upstreams/gemini_schema.py): an MCP tool's JSON Schema Gemini refuses is moved to ``parametersJsonSchema``
(inside Code Assist's envelope too) with the declaration's name and description kept; the schema fitted where no
such place is (:func:`llmfix.repairs.openapi_schema.fit`) keeps names, descriptions and properties; Gemini's own
spellings (``OBJECT``, ``any_of``, ``property_ordering``) are read as Gemini reads them; Gemini CLI's declarations
(all ``parametersJsonSchema``) and valid ones pass byte for byte."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from llmfix.repairs.openapi_schema import fit
from tests.unit.dialects.gemini_session import (
    CA_STREAM,
    CODE_ASSIST,
    COUNT,
    GENERATE,
    STREAM,
    capture,
    run,
    sent,
    taken,
)
from tests.upstreams.gemini_schema import check_declarations

NAME = "fit-tool-schemas"
USER = {"role": "user", "parts": [{"text": "list the files"}]}
MCP = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": False,
       "properties": {"path": {"type": "string", "description": "where", "format": "uri"},
                      "depth": {"type": "integer", "exclusiveMinimum": 0},
                      "mode": {"const": "fast"},
                      "level": {"type": "integer", "enum": [1, 2, 3]},
                      "options": {"type": "object", "properties": {}}},
       "required": ["path"]}
"""An MCP server's schema: every keyword the brief's users met (docs/evidence.md, "Gemini")."""
VALID_GEMINI = {"type": "OBJECT", "properties": {
    "pick": {"any_of": [{"type": "STRING"}, {"type": "INTEGER"}], "description": "a name or a number"},
    "tags": {"type": "ARRAY", "items": {"type": "STRING"}, "min_items": 1}},
    "property_ordering": ["pick", "tags"], "required": ["pick"]}
"""A schema in Gemini's own spellings (uppercase types, snake_case fields), which Gemini takes."""


def body_with(*decls: dict[str, Any]) -> dict[str, Any]:
    return {"contents": [USER], "tools": [{"functionDeclarations": list(decls)}]}


def decl(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": f"the {name} tool", "parameters": copy.deepcopy(parameters)}


def refused(schema: dict[str, Any]) -> str | None:
    found = check_declarations([("tools[0].function_declarations[0]", {"name": "t", "parameters": schema})])
    return None if found is None else found.message


def test_the_mcp_schema_is_refused_and_moved_to_parameters_json_schema_whole() -> None:
    body = body_with(decl("read_file", {"type": "object", "properties": {"p": {"type": "string"}}}),
                     decl("mcp_search", MCP))
    assert refused(MCP) is not None
    outcome = run(body, path=GENERATE)
    assert outcome.repairs == [NAME]
    out = sent(outcome, body)
    taken(out)
    moved = out["tools"][0]["functionDeclarations"][1]
    assert moved == {"name": "mcp_search", "description": "the mcp_search tool", "parametersJsonSchema": MCP}
    assert list(moved) == ["name", "description", "parametersJsonSchema"]  # in its place
    assert out["tools"][0]["functionDeclarations"][0] == body["tools"][0]["functionDeclarations"][0]
    assert [c.location for c in outcome.changes] == ["tools[0].function_declarations[1].parameters"]


def test_inside_code_assist_s_envelope_the_wrapper_stays() -> None:
    inner = body_with(decl("mcp_search", MCP))
    body = {"model": "gemini-3-pro-preview", "project": "my-project-123", "user_prompt_id": "abc", "request": inner}
    outcome = run(body, host=CODE_ASSIST, path=CA_STREAM)
    out = sent(outcome, body)
    assert outcome.repairs == [NAME]
    assert {k: v for k, v in out.items() if k != "request"} == {k: v for k, v in body.items() if k != "request"}
    assert list(out) == list(body)
    taken(out["request"], backend="code-assist", prefix="request.")
    assert out["request"]["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == MCP


def test_fitted_where_nothing_else_goes_names_descriptions_and_properties_kept() -> None:
    fitted, notes = fit(copy.deepcopy(MCP))
    assert refused(fitted) is None, refused(fitted)
    assert list(fitted["properties"]) == list(MCP["properties"])
    assert fitted["required"] == ["path"]
    props = fitted["properties"]
    assert props["path"]["description"].startswith("where") and "uri" in props["path"]["description"]
    assert props["mode"]["enum"] == ["fast"]
    assert props["depth"]["minimum"] == 0
    assert "[1, 2, 3]" in props["level"]["description"]  # the values stay readable to the model
    assert "properties" not in props["options"]
    assert notes and fit(fitted) == (fitted, [])  # idempotent


@pytest.mark.parametrize("schema", [
    {"type": "OBJECT", "properties": {}},
    {"type": "OBJECT", "properties": {"tags": {"type": "ARRAY"}}},
    {"type": "OBJECT", "properties": {"x": {"any_of": [{"type": "STRING"}, {"type": "INTEGER", "enum": [1, 2]}]}}},
    {"type": "OBJECT", "properties": {"x": {"anyOf": [{"type": "STRING", "format": "uri"}, {"type": "NULL"}]}}},
])
def test_gemini_spellings_that_gemini_refuses_are_fitted(schema: dict[str, Any]) -> None:
    assert refused(schema) is not None
    fitted, notes = fit(copy.deepcopy(schema))
    assert notes and refused(fitted) is None, refused(fitted)


def test_snake_case_any_of_keeps_its_alternatives() -> None:
    schema = {"type": "OBJECT", "properties": {"x": {"any_of": [{"type": "STRING"}, {"type": "INTEGER",
                                                                                       "enum": [1, 2]}]}}}
    fitted, _ = fit(copy.deepcopy(schema))
    assert [s["type"] for s in fitted["properties"]["x"]["any_of"]] == ["STRING", "INTEGER"]


def test_a_schema_in_gemini_s_own_spellings_passes_untouched() -> None:
    assert refused(VALID_GEMINI) is None
    assert fit(copy.deepcopy(VALID_GEMINI)) == (VALID_GEMINI, [])
    body = body_with(decl("pick", VALID_GEMINI))
    raw = json.dumps(body).encode()
    assert run(raw, path=GENERATE).status == "untouched"


@pytest.mark.parametrize("name, path", [("turn1", STREAM), ("turn2", STREAM), ("count_tokens", COUNT)])
def test_gemini_cli_s_declarations_pass_untouched(name: str, path: str) -> None:
    body = capture(name)
    outcome = run(body, path=path)
    assert outcome.status == "untouched", outcome.changes
