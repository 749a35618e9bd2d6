"""A tool's JSON Schema fitted to Gemini's ``Schema``: the select subset of OpenAPI 3.0 that ``parameters`` is
(https://ai.google.dev/api/caching#Schema). Used by fit-tool-schemas where no full JSON Schema can go instead.

What Gemini refuses, and what becomes of it here (the texts: tests/upstreams/gemini_schema.py, docs/evidence.md):

- a key the proto does not have (``$schema``, ``additionalProperties``, ``exclusiveMinimum``, ``const``, ``$ref``,
  ``oneOf``, ``patternProperties``, ``propertyNames``, …): ``const`` becomes a one-value ``enum``, ``oneOf`` an
  ``anyOf``, an ``allOf`` is merged into its schema, a local ``$ref`` (``#/$defs/…``, ``#/definitions/…``) is
  replaced by what it names (to a bounded depth; a reference to itself further down becomes a plain object),
  ``examples`` gives its first as ``example``, a numeric ``exclusiveMinimum``/``exclusiveMaximum`` becomes
  ``minimum``/``maximum``; anything else goes;
- ``type`` as a list (``["string", "null"]``): its one non-null type and ``nullable``; several: ``anyOf``;
- an unknown ``type`` (``"null"``): dropped, ``nullable``;
- ``enum`` on a type that is not STRING, or with values that are not strings: dropped, its values said in the
  description (the model still reads them);
- a STRING ``format`` other than ``enum`` or ``date-time``: dropped, said in the description;
- OBJECT with empty ``properties``: the empty ``properties`` (and ``required``) dropped; ARRAY without ``items``:
  ``items`` of any string.

Gemini's own spellings are read as it reads them: a ``type`` in any case (``OBJECT``, what its SDKs write), a field
in snake_case (``any_of``, ``property_ordering``), kept as sent. Names, descriptions and properties are kept; every
step is recorded, in words, for the change log. Pure, deterministic, and idempotent: a fitted schema has nothing left
to fit.
"""

from __future__ import annotations

import json
from typing import Any

ALLOWED = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "items", "properties", "required", "example",
    "default", "minimum", "maximum", "pattern", "anyOf", "minItems", "maxItems", "minProperties", "maxProperties",
    "minLength", "maxLength", "propertyOrdering",
})
SNAKE = {"anyOf": "any_of", "minItems": "min_items", "maxItems": "max_items", "minProperties": "min_properties",
         "maxProperties": "max_properties", "minLength": "min_length", "maxLength": "max_length",
         "propertyOrdering": "property_ordering"}
"""The proto3 JSON parser takes a field in either spelling (https://protobuf.dev/programming-guides/json/): these
are kept as sent."""
KNOWN = ALLOWED | frozenset(SNAKE.values())
TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object"})
"""Gemini's ``Type`` values, read case-insensitively (``OBJECT``, as Gemini's own SDKs write them, or ``object``)."""
STRING_FORMATS = frozenset({"enum", "date-time"})
MAX_DEPTH = 8
"""References are replaced this deep at most (a recursive schema is unrolled this far)."""


def fit(schema: Any) -> tuple[Any, list[str]]:
    """``schema`` as Gemini's ``Schema`` takes it, and what was changed (empty: taken as it is; the very same
    object then)."""
    notes: list[str] = []
    defs = {}
    if isinstance(schema, dict):
        for key in ("$defs", "definitions"):
            if isinstance(schema.get(key), dict):
                defs.update({f"#/{key}/{name}": value for name, value in schema[key].items()})
    out = _fit(schema, defs, notes, "", 0)
    return (out, list(dict.fromkeys(notes))) if notes else (schema, [])


def _described(schema: dict[str, Any], note: str) -> None:
    text = schema.get("description")
    schema["description"] = f"{text} ({note})" if isinstance(text, str) and text else note


def _merge_all_of(schema: dict[str, Any], notes: list[str], at: str) -> dict[str, Any]:
    parts = [p for p in schema.pop("allOf") if isinstance(p, dict)]
    notes.append(f"{at or 'parameters'}: allOf merged")
    merged: dict[str, Any] = {}
    for part in [*parts, schema]:
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                merged.setdefault("properties", {}).update(value)
            elif key == "required" and isinstance(value, list):
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    return merged


def _fit(value: Any, defs: dict[str, Any], notes: list[str], at: str, depth: int) -> Any:
    if not isinstance(value, dict):
        return value
    schema = dict(value)
    where = at or "parameters"
    ref = schema.pop("$ref", None)
    if isinstance(ref, str):
        target = defs.get(ref)
        if isinstance(target, dict) and depth < MAX_DEPTH:
            schema = {**target, **schema}
            notes.append(f"{where}: $ref {ref} replaced by what it names")
        else:
            schema.setdefault("type", "object")
            notes.append(f"{where}: $ref {ref} dropped (unknown, or nested past {MAX_DEPTH})")
    if isinstance(schema.get("allOf"), list):
        schema = _merge_all_of(schema, notes, where)
    if "oneOf" in schema and "anyOf" not in schema and "any_of" not in schema:
        schema["anyOf"] = schema.pop("oneOf")
        notes.append(f"{where}: oneOf → anyOf")
    if "const" in schema:
        const = schema.pop("const")
        if isinstance(const, str):
            schema["enum"] = [const]
            notes.append(f"{where}: const → enum")
        else:
            _described(schema, f"always {json.dumps(const)}")
            notes.append(f"{where}: const dropped, said in the description")
    if isinstance(schema.get("examples"), list) and schema["examples"] and "example" not in schema:
        schema["example"] = schema["examples"][0]
    for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(schema.get(key), int | float) and not isinstance(schema.get(key), bool):
            schema.setdefault(bound, schema[key])
    _fit_type(schema, notes, where)
    _fit_enum_and_format(schema, notes, where)
    dropped = sorted(k for k in schema if k not in KNOWN)
    for key in dropped:
        del schema[key]
    if dropped:
        notes.append(f"{where}: {', '.join(dropped)} removed")
    kind = schema["type"].lower() if isinstance(schema.get("type"), str) else None
    if isinstance(schema.get("properties"), dict):
        schema["properties"] = {name: _fit(sub, defs, notes, f"{where}.properties.{name}", depth + 1)
                                for name, sub in schema["properties"].items()}
        if not schema["properties"] and kind == "object":
            del schema["properties"]
            schema.pop("required", None)
            notes.append(f"{where}: empty properties removed")
    if isinstance(schema.get("required"), list) and isinstance(schema.get("properties"), dict):
        kept = [r for r in schema["required"] if r in schema["properties"]]
        if kept != schema["required"]:
            schema["required"] = kept
            notes.append(f"{where}: required names no property had removed")
    if "items" in schema:
        schema["items"] = _fit(schema["items"], defs, notes, f"{where}.items", depth + 1)
    elif kind == "array":
        schema["items"] = {"type": "string"}
        notes.append(f"{where}: items of an array given (any string)")
    for key in ("anyOf", "any_of"):
        if isinstance(schema.get(key), list):
            schema[key] = [_fit(sub, defs, notes, f"{where}.{key}[{k}]", depth + 1)
                           for k, sub in enumerate(schema[key])]
    return schema


def _fit_type(schema: dict[str, Any], notes: list[str], where: str) -> None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [str(k).lower() for k in kind if str(k).lower() != "null"]
        if len(kinds) < len(kind):
            schema["nullable"] = True
        if len(kinds) == 1:
            schema["type"] = kinds[0]
        else:
            del schema["type"]
            if kinds:
                schema["anyOf"] = [{"type": k} for k in kinds if k in TYPES]
        notes.append(f"{where}: type {json.dumps(kind)} → one type, nullable")
    elif isinstance(kind, str) and kind.lower() not in TYPES:
        del schema["type"]
        if kind.lower() == "null":
            schema["nullable"] = True
        notes.append(f"{where}: type {json.dumps(kind)} removed")


def _fit_enum_and_format(schema: dict[str, Any], notes: list[str], where: str) -> None:
    kind = schema.get("type")
    kind = kind.lower() if isinstance(kind, str) else None
    enum = schema.get("enum")
    if enum is not None:
        strings = isinstance(enum, list) and all(isinstance(v, str) for v in enum)
        if strings and kind is None:
            schema["type"] = kind = "string"
        if not strings or kind != "string":
            del schema["enum"]
            _described(schema, f"one of {json.dumps(enum)}")
            notes.append(f"{where}: enum of a {kind or 'mixed'} type dropped, its values said in the description")
    fmt = schema.get("format")
    if fmt is not None and kind == "string" and fmt not in STRING_FORMATS:
        del schema["format"]
        _described(schema, f"format: {fmt}")
        notes.append(f"{where}: format {fmt} dropped, said in the description")
