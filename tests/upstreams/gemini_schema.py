"""Gemini's reading of tool declarations: ``functionDeclarations[].parameters`` is a protobuf ``Schema``.

``parameters`` is a select subset of OpenAPI 3.0 (https://ai.google.dev/api/caching#Schema,
https://cloud.google.com/vertex-ai/docs/reference/rest/v1/Schema): a key the message does not have fails while the
JSON is parsed, one ``Invalid JSON payload received. Unknown name … Cannot find field.`` line per key, all in one 400
(zuisong/gemini-openai-proxy #67, openswarm-ai/openswarm #24, QwenLM/qwen-code #1186). Parse-time paths are proto
paths: snake_case names, map entries by position (``properties[3].value``); the checks that run after parsing print
``* GenerateContentRequest.<path>: <reason>`` with map entries by key (``properties[url]``) — only when parsing
succeeded. ``parametersJsonSchema`` takes any JSON Schema and is never judged here (what Gemini CLI sends).

Checked, with the texts clients quote:

- unknown keys (``$schema``, ``additionalProperties``, ``exclusiveMinimum``, ``const``, ``$ref``, ``oneOf``, …);
  Vertex also knows ``ref`` / ``defs`` (parse time);
- ``type`` as a list: ``Proto field is not repeating, cannot start list.`` (tidebreak #1516); an unknown ``type``
  value: ``Invalid value at '…type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), "null"``;
- a non-string ``enum`` value: ``Invalid value at '…enum[3]' (TYPE_STRING), 3`` (microsoft/azure-devops-mcp #145);
- ``enum`` on a type that is not STRING: ``…enum: only allowed for STRING type`` (anomalyco/opencode #28397);
- a STRING ``format`` other than ``enum`` / ``date-time``: ``…format: only 'enum' and 'date-time' are supported for
  STRING type`` (google-gemini/gemini-cli #2706, #3773);
- OBJECT with an empty ``properties``: ``…properties: should be non-empty for OBJECT type`` (AstrBot #288);
- ARRAY without ``items``: ``…items: missing field.`` (cline/cline #7339);
- a function name outside ``[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}`` (gemini-cli #2966, cline #7339);
- an unknown key on the declaration itself (``input_schema``: lbjlaq/Antigravity-Manager #2026).
"""

from __future__ import annotations

import re
from typing import Any

from tests.upstreams.access import as_dict, as_list
from tests.upstreams.gemini_errors import GeminiError, field_errors, not_repeating, payload_errors, unknown_name

SCHEMA_FIELDS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "items", "properties", "required", "example",
    "default", "minimum", "maximum", "pattern", "anyOf", "any_of", "minItems", "min_items", "maxItems", "max_items",
    "minProperties", "min_properties", "maxProperties", "max_properties", "minLength", "min_length", "maxLength",
    "max_length", "propertyOrdering", "property_ordering",
})
VERTEX_ONLY = frozenset({"ref", "defs"})
TYPES = frozenset({"TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"})
STRING_FORMATS = frozenset({"enum", "date-time"})
DECLARATION_FIELDS = frozenset({
    "name", "description", "parameters", "parametersJsonSchema", "parameters_json_schema", "response",
    "responseJsonSchema", "response_json_schema", "behavior",
})
FUNCTION_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}")
NAME_RULE = ("Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), "
             "underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 64.")
TYPE_PROTO = "type.googleapis.com/google.ai.generativelanguage.v1beta.Type"


def declarations(body: dict[str, Any]) -> list[tuple[int, int, Any]]:
    """``(tool index, declaration index, declaration)`` of every function declaration, camelCase or snake_case."""
    out = []
    for i, tool in enumerate(as_list(body.get("tools"))):
        tool = as_dict(tool)
        decls = tool.get("functionDeclarations", tool.get("function_declarations"))
        out += [(i, j, d) for j, d in enumerate(as_list(decls))]
    return out


class _Walk:
    """Collects the parse-time lines and the semantic lines of one request's schemas."""

    def __init__(self, prefix: str, vertex: bool) -> None:
        self.prefix = prefix
        self.allowed = SCHEMA_FIELDS | VERTEX_ONLY if vertex else SCHEMA_FIELDS
        self.parse: list[str] = []
        self.semantic: list[str] = []

    def declaration(self, where: str, decl: Any) -> None:
        decl = as_dict(decl)
        for key in decl:
            if key not in DECLARATION_FIELDS:
                self.parse.append(unknown_name(key, self.prefix + where))
        name = decl.get("name")
        if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
            self.semantic.append(f"{where}.name: {NAME_RULE}")
        if "parameters" in decl:
            self.schema(decl["parameters"], f"{where}.parameters", f"{where}.parameters")

    def schema(self, schema: Any, at: str, sem: str) -> None:
        """One Schema object: ``at`` is its parse-time path (without the prefix), ``sem`` its semantic path."""
        if not isinstance(schema, dict):
            return
        for key, value in schema.items():
            if key not in self.allowed:
                self.parse.append(unknown_name(key, self.prefix + at))
            elif key == "type" and isinstance(value, list):
                self.parse.append(not_repeating("type", self.prefix + at))
            elif key == "type" and (not isinstance(value, str) or value.upper() not in TYPES):
                self.parse.append(f"Invalid value at '{self.prefix}{at}.type' ({TYPE_PROTO}), {_shown(value)}")
            elif key == "enum":
                for k, option in enumerate(as_list(value)):
                    if not isinstance(option, str):
                        self.parse.append(f"Invalid value at '{self.prefix}{at}.enum[{k}]' (TYPE_STRING), "
                                          f"{_shown(option)}")
        kind = schema.get("type").upper() if isinstance(schema.get("type"), str) else None
        self._semantic(schema, kind, sem)
        for index, (name, sub) in enumerate(as_dict(schema.get("properties")).items()):
            self.schema(sub, f"{at}.properties[{index}].value", f"{sem}.properties[{name}]")
        if "items" in schema:
            self.schema(schema["items"], f"{at}.items", f"{sem}.items")
        for k, sub in enumerate(as_list(schema.get("anyOf", schema.get("any_of")))):
            self.schema(sub, f"{at}.any_of[{k}]", f"{sem}.any_of[{k}]")

    def _semantic(self, schema: dict[str, Any], kind: str | None, sem: str) -> None:
        fmt = schema.get("format")
        if kind == "STRING" and fmt is not None and fmt not in STRING_FORMATS:
            self.semantic.append(f"{sem}.format: only 'enum' and 'date-time' are supported for STRING type")
        if "enum" in schema and kind not in (None, "STRING"):
            self.semantic.append(f"{sem}.enum: only allowed for STRING type")
        if kind == "OBJECT" and "properties" in schema and not schema["properties"]:
            self.semantic.append(f"{sem}.properties: should be non-empty for OBJECT type")
        if kind == "ARRAY" and "items" not in schema:
            self.semantic.append(f"{sem}.items: missing field.")


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def check_declarations(items: list[tuple[str, Any]], *, prefix: str = "", vertex: bool = False) -> GeminiError | None:
    """The 400 for the declarations ``[(proto path, declaration)]``, e.g. ``("tools[0].function_declarations[3]",
    {...})``; ``prefix`` is ``"request."`` inside Code Assist's envelope. None when Gemini takes them all."""
    walk = _Walk(prefix, vertex)
    for where, decl in items:
        walk.declaration(where, decl)
    if walk.parse:
        return payload_errors(walk.parse, "schema-unknown-field")
    if walk.semantic:
        return field_errors(walk.semantic, "schema-invalid")
    return None


def check_tools(body: dict[str, Any], *, prefix: str = "", vertex: bool = False) -> GeminiError | None:
    """The 400 for a native request's ``tools``, or None."""
    items = [(f"tools[{i}].function_declarations[{j}]", d) for i, j, d in declarations(body)]
    return check_declarations(items, prefix=prefix, vertex=vertex)
