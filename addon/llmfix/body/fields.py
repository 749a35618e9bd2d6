"""Request fields outside the conversation: which may be stripped, how they are named, and stripping them.

An upstream that refuses a request field answers for every request that carries it (repairs/strip_refused_fields.py
says who and why). What may go is only what is not the conversation: a top-level request knob, or a ``cache_control``
marker (or one of its keys). A field is named by a dotted path, one of:

- ``<member>`` or ``<member>.<key>…``: a top-level member of the request (``context_management``, ``output_config``,
  ``prompt_cache_key``, ``metadata``, ``service_tier``…), or a key inside it (``output_config.format``). Never one
  of :data:`PROTECTED`: the conversation (``messages``, ``input``, ``system``, ``instructions``, ``prompt``), the
  tool declarations, the server state a Responses request continues, the model, or ``stream`` (without which the
  client would get an answer of another form). A segment that is not a key of the object it is read in, but its
  ``type``, is skipped: Anthropic's error paths name a union's tag (``thinking.disabled.display`` is the
  ``display`` of a ``thinking`` whose type is ``disabled``), so the name keeps the tag and strips only there.
- ``cache_control``: every cache marker of the request (an object under a ``cache_control`` key);
- ``cache_control.<key>``: that key of every cache marker (``cache_control.ttl``, ``cache_control.scope``);
- ``<type>.cache_control``: the marker of every object whose ``type`` is ``<type>`` (``thinking.cache_control``);
- ``<member>.cache_control``, for ``tools``, ``system``, ``messages`` or ``input``: every marker inside that member
  (``tools.cache_control``: the markers of the tool declarations, the tools themselves untouched).

Markers are looked for everywhere except where a ``cache_control`` key would be someone's data: a call's
arguments (``input`` of a ``tool_use``), a JSON schema (``input_schema``, ``parameters``, ``schema``,
``properties``…). A marker is an object; a ``cache_control`` that is a string or a number is data, and stays.

:func:`strip` is pure and copies only the objects along the way to what it removes: everything else is the very
same object, so a body with nothing to strip comes back as it came (``is``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

CACHE = "cache_control"
QUIRK = "strip:"
"""A refused field learned for an upstream is a quirk named ``strip:<field>`` (value true), next to its flags."""
PROTECTED = frozenset({"messages", "input", "system", "instructions", "prompt", "tools", "functions", "model",
                       "stream", "previous_response_id", "conversation"})
"""Top-level members that are never stripped, whatever an upstream says about them."""
CONTAINERS = frozenset({"messages", "content", "system", "tools", "input", "body"})
"""Keys an error path may name right before ``cache_control`` that are not a block's type."""
SCOPES = frozenset({"messages", "system", "tools", "input"})
"""Top-level members whose markers may be stripped on their own (``tools.cache_control``)."""
DATA_KEYS = frozenset({"input_schema", "parameters", "schema", "json_schema", "properties", "arguments",
                       "response_format", "format", "defs", "$defs", "definitions", "items"})
"""Keys whose values are someone's data (schemas, arguments): never searched for markers."""
CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
"""Block types whose ``input`` is a call's arguments."""
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]{0,63}")
MAX_SEGMENTS = 6


@dataclass(frozen=True, slots=True)
class Field:
    """A strippable field: ``path`` of a top-level member (``kind`` "member"), or a cache marker rule (``kind``
    "marker": every marker; "marker-key": ``path[-1]`` of every marker; "typed-marker": the marker of objects of
    type ``path[0]``; "scoped-marker": every marker inside the top-level member ``path[0]``)."""

    name: str
    kind: str
    path: tuple[str, ...]


def parse(name: str) -> Field | None:
    """The field ``name`` names, or None when it is not a name of a strippable field (see the module docstring)."""
    if not isinstance(name, str) or len(name) > 200:
        return None
    parts = tuple(name.split("."))
    if not parts or len(parts) > MAX_SEGMENTS or not all(_SEGMENT.fullmatch(p) for p in parts):
        return None
    if parts == (CACHE,):
        return Field(name, "marker", parts)
    if len(parts) == 2 and parts[0] == CACHE and parts[1] != "type":
        return Field(name, "marker-key", parts)
    if len(parts) == 2 and parts[1] == CACHE and parts[0] in SCOPES:
        return Field(name, "scoped-marker", parts)
    if len(parts) == 2 and parts[1] == CACHE and parts[0] not in CONTAINERS:
        return Field(name, "typed-marker", parts)
    if CACHE in parts or parts[0] in PROTECTED:
        return None
    return Field(name, "member", parts)


@dataclass(frozen=True, slots=True)
class Stripped:
    """One removal: where (a path such as ``messages[3].content[0].cache_control.ttl``), which field, and the value
    that went (for the change log, which redacts it)."""

    where: str
    field: str
    value: Any


def strip(body: dict[str, Any], fields: list[Field]) -> tuple[dict[str, Any], list[Stripped]]:
    """``body`` without ``fields`` (the same object when none is in it), and what went: the members first, then the
    markers in the body's order."""
    out: list[Stripped] = []
    members = [f for f in fields if f.kind == "member"]
    markers = [f for f in fields if f.kind != "member"]
    result: dict[str, Any] = body
    for f in members:
        result = _without_member(result, f, out)
    everywhere = [f for f in markers if f.kind != "scoped-marker"]
    if everywhere:
        found = _markers(result, everywhere, "", out)
        if found is not None:
            result = found
    for f in markers:
        if f.kind == "scoped-marker" and isinstance(result.get(f.path[0]), dict | list):
            found = _markers(result[f.path[0]], [Field(f.name, "marker", (CACHE,))], f.path[0], out)
            if found is not None:
                result = {**result, f.path[0]: found}
    return result, out


def strip_members(data: bytes, fields: list[Field], loads: Any, dumps: Any, tries: int = 4
                  ) -> tuple[bytes, list[Stripped]] | None:
    """``data`` (a JSON object's bytes) without the top-level ``fields`` (kind "member"), found from their bytes
    without parsing what comes before them; None when that cannot be done (parse the whole body then).

    Why: an agent's request keeps its knobs after its message array (Claude Code's ``context_management`` and
    ``output_config``, Codex's ``prompt_cache_key``), and parsing a megabyte of history to drop one of them costs
    ~7 ms. How: the last occurrence of the member's quoted name, preceded by ``{`` or ``,``, from which ``{`` + the
    rest of the body parses (``loads``) as one object holding that name, is where the body's top-level members
    from that one on begin (a name inside a nested object leaves unbalanced brackets after it, one inside a string
    cannot be followed by ``:``); those members are written again (``dumps``) without the field. Tried at the last
    ``tries`` occurrences of each name."""
    out, gone = data, []
    for f in fields:
        needle = dumps(f.path[0])
        end = len(out)
        for _ in range(tries):
            at = out.rfind(needle, 0, end)
            if at < 0:
                break  # not in the body
            sep = _before(out, at)  # where the ``,`` or ``{`` before it is
            rest = _object(b"{" + out[at:], loads) if sep >= 0 and out[sep] in b",{" else None
            if rest is not None and f.path[0] in rest:
                stripped, taken = strip(rest, [f])
                gone += taken
                if taken and stripped:
                    out = out[:at] + dumps(stripped)[1:]
                elif taken:  # it was the last member: the object closes before it
                    out = out[: _before(out, sep) + 1 if out[sep] == ord(",") else sep + 1] + b"}"
                break
            end = at
        else:
            return None
    return out, gone


def _before(data: bytes, at: int) -> int:
    """The index of the last byte before ``at`` that is not JSON whitespace (-1: none)."""
    i = at - 1
    while i >= 0 and data[i] in b" \t\r\n":
        i -= 1
    return i


def _object(data: bytes, loads: Any) -> dict[str, Any] | None:
    try:
        value = loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _without_member(body: dict[str, Any], f: Field, out: list[Stripped]) -> dict[str, Any]:
    """``body`` without the member path ``f.path`` (tag segments skipped), copied along the way; as it was if absent."""
    chain: list[tuple[dict[str, Any], str]] = []
    node: dict[str, Any] = body
    for i, seg in enumerate(f.path[:-1]):
        child = node.get(seg)
        if isinstance(child, dict):
            chain.append((node, seg))
            node = child
        elif i == 0 or node.get("type") != seg:  # absent; a union tag in the error's path is skipped
            return body
    last = f.path[-1]
    if last not in node:
        return body
    out.append(Stripped(".".join([*(key for _, key in chain), last]), f.name, node[last]))
    value: dict[str, Any] = {k: v for k, v in node.items() if k != last}
    for parent, key in reversed(chain):
        value = {**parent, key: value}
    return value


def _markers(node: Any, fields: list[Field], where: str, out: list[Stripped]) -> Any:
    """``node`` with the marker ``fields`` applied (a copy only along the way to a change), or None if unchanged."""
    if isinstance(node, list):
        new: list[Any] | None = None
        for i, v in enumerate(node):
            w = _markers(v, fields, f"{where}[{i}]", out)
            if w is not None:
                if new is None:
                    new = list(node)
                new[i] = w
        return new
    if not isinstance(node, dict):
        return None
    kind = node.get("type")
    changed: dict[str, Any] | None = None
    for key, v in node.items():
        here = f"{where}.{key}" if where else key
        if key == CACHE and isinstance(v, dict):
            marker = _marker(v, kind, fields, here, out)
            if marker is not v:
                changed = dict(node) if changed is None else changed
                if marker is None:
                    del changed[key]
                else:
                    changed[key] = marker
            continue
        if key in DATA_KEYS or (key == "input" and kind in CALLS):
            continue
        if isinstance(v, dict | list):
            w = _markers(v, fields, here, out)
            if w is not None:
                changed = dict(node) if changed is None else changed
                changed[key] = w
    return changed


def _marker(marker: dict[str, Any], owner: Any, fields: list[Field], where: str,
            out: list[Stripped]) -> dict[str, Any] | None:
    """A marker after ``fields``: the same object, one without some keys, or None (the marker goes)."""
    for f in fields:
        if f.kind == "marker" or (f.kind == "typed-marker" and owner == f.path[0]):
            out.append(Stripped(where, f.name, marker))
            return None
    keys = [f for f in fields if f.kind == "marker-key" and f.path[1] in marker]
    if not keys:
        return marker
    for f in keys:
        out.append(Stripped(f"{where}.{f.path[1]}", f.name, marker[f.path[1]]))
    gone = {f.path[1] for f in keys}
    return {k: v for k, v in marker.items() if k not in gone}
