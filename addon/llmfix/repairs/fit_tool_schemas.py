"""fit-tool-schemas: a tool schema Gemini's ``Schema`` refuses is fitted to it, or moved where any JSON Schema goes.

Bug — a tool's ``parameters`` on Gemini (the native API, and its OpenAI-compatible door, which reads them the same
way) is a protobuf ``Schema``, a subset of OpenAPI 3.0: an MCP server's schema, a Zod-made one or any JSON Schema with
``$schema``, ``additionalProperties``, ``exclusiveMinimum``, ``const``, ``type: [T, "null"]``, a ``format`` it does
not know or an ``enum`` on a number is refused, on every request, whatever the user types: ``Invalid JSON payload
received. Unknown name "$schema" at 'tools[0].function_declarations[3].parameters': Cannot find field.`` (Qwen Code
through the door: QwenLM/qwen-code #1186; opencode through a Gemini CLI backend: router-for-me/CLIProxyAPI #97; Claude
Code through claude-code-router: musistudio/claude-code-router #187), ``…enum: only allowed for STRING type``
(anomalyco/opencode #28397), ``…format: only 'enum' and 'date-time' are supported for STRING type``
(google-gemini/gemini-cli #2706). More texts: docs/evidence.md, "Gemini".

Repair, for an upstream whose profile says its tool schemas are held to that subset (``tool_schema_openapi``:
Gemini's doors, and a gateway that answered so): a declaration whose schema it would refuse — and only such a one —
gets it moved to ``parametersJsonSchema`` on the native API, which takes any JSON Schema and is what Gemini CLI sends
(https://ai.google.dev/api/caching#FunctionDeclaration), so nothing of it is lost; where there is no such place (the
door), it is fitted (:mod:`llmfix.repairs.openapi_schema`): names, descriptions and properties kept, what had to go
said in the description where the model may need it (an enum's values, a format). Every other declaration, and the
body when none needs it, is left byte for byte.
"""

from __future__ import annotations

import re

import orjson

from llmfix.body import dumps
from llmfix.body.conversation import BadBody, loads
from llmfix.body.haystack import haystack
from llmfix.repairs.openapi_schema import fit
from llmfix.repairs.top import TopContext, TopRepair
from llmfix.report.changes import Change

NAME = "fit-tool-schemas"
NEEDLES = (b'"parameters"', b'"input_schema"')
"""Bytes a body holds when it declares a schema in a place Gemini judges (not ``parametersJsonSchema``)."""


def _snake(camel: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), camel)


def _wants(ctx: TopContext) -> bool:
    return ctx.profile.tool_schema_openapi


def _apply(data: bytes, ctx: TopContext) -> tuple[bytes, list[Change]] | None:
    hay = haystack(data)
    if not any(n in hay for n in NEEDLES):
        return None
    try:
        body = loads(data)
    except BadBody:
        return None  # the body's own warning comes from the pipeline's parse
    if not isinstance(body, dict):
        return None
    escape = ctx.dialect.tools.SCHEMA_ESCAPE
    changes: list[Change] = []
    for where, decl, key in ctx.dialect.tools.schemas(body):
        fitted, notes = fit(decl[key])
        if not notes:
            continue
        name = decl.get("name") or where
        if escape is not None and escape not in decl and _snake(escape) not in decl:
            moved = {(escape if k == key else k): v for k, v in decl.items()}
            decl.clear()
            decl.update(moved)
            changes.append(Change(NAME, f"{where}.{key}", f"{name}: moved to {escape} (its Schema refuses: "
                                  f"{'; '.join(notes)})"))
        else:
            decl[key] = fitted
            changes.append(Change(NAME, f"{where}.{key}", f"{name}: fitted to Gemini's Schema: {'; '.join(notes)}"))
    if not changes:
        return None
    try:
        out = dumps.dumps(body) if len(data) >= dumps.BIG else orjson.dumps(body)
    except TypeError as e:  # a number beyond 64 bits, which orjson cannot write
        raise ValueError(f"{NAME}: cannot write the body again ({e})") from None
    return out, changes


REPAIR = TopRepair(NAME, _apply, _wants)
