"""Whatever path a rejection names, in whatever vendor's envelope, what llmfix learns from it and strips never takes
anything of the conversation: its messages or input items (only cache markers may leave them), the system prompt's
text, the tool declarations, a call's arguments, the model, ``stream``.

Paths are drawn from the words real error paths are made of (members, block types and union tags, indices, marker
keys, pydantic's tags) and put in each vendor's envelope (tests/upstreams/field_rules.py); the bodies are the captures
of Claude Code, Codex, opencode and pi-ai, with a call whose arguments, a tool whose schema and a text that are
someone's data named like what may be stripped. Each learned field is applied the way llmfix applies it, through
``engine.process`` with the field learned for the upstream (and only that repair on).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from llmfix import engine
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.retry import rejections
from llmfix.retry.decide import Fixed
from tests.property.budget import BUDGET
from tests.upstreams import field_rules
from tests.upstreams.captures import capture_json

WORDS = ["body", "messages", "input", "system", "tools", "content", "text", "thinking", "tool_use", "tool_result",
         "image", "cache_control", "ephemeral", "ttl", "scope", "type", "input_schema", "properties", "parameters",
         "context_management", "output_config", "effort", "format", "prompt_cache_key", "metadata", "user_id",
         "model", "stream", "instructions", "edits", "keep", "id", "name", "arguments", "function", "custom",
         "typed-dict", "tool_choice", "reasoning", "include", "client_metadata", "service_tier", "previous_response_id",
         "output", "summary", "signature", "source", "data", "diagnostics", "max_tokens", "stream_options"]
SEGMENTS = st.one_of(st.sampled_from(WORDS), st.integers(0, 5),
                     st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8))
REAL = [["context_management"], ["output_config"], ["output_config", "effort"], ["prompt_cache_key"], ["metadata"],
        ["diagnostics"], ["thinking", "adaptive", "display"], ["client_metadata"], ["include"], ["text", "verbosity"],
        ["reasoning", "effort"], ["store"], ["tool_choice"], ["parallel_tool_calls"], ["stream_options"],
        ["messages", 3, "content", 0, "tool_result", "cache_control"], ["system", 2, "cache_control", "ephemeral",
                                                                        "scope"],
        ["messages", 0, "content", 1, "text", "cache_control"], ["tools", 0, "cache_control"], ["cache_control"]]
"""Paths of fields the captures carry: what a rejection that teaches something names."""
PATHS = st.one_of(st.sampled_from(REAL), st.lists(SEGMENTS, min_size=1, max_size=7),
                  st.tuples(st.lists(SEGMENTS, max_size=3), st.sampled_from(REAL)).map(lambda t: [*t[0], *t[1]]))
DATA = {"cache_control": {"type": "ephemeral", "ttl": "1h"}, "context_management": "keep", "output_config": 1}


def claude_code(name: str) -> dict[str, Any]:
    body = capture_json(name)
    call = next(i for i, m in enumerate(body["messages"]) if m["role"] == "assistant")  # its Read, then the result
    body["messages"][call]["content"].append({"type": "tool_use", "id": "toolu_data", "name": "Configure",
                                              "input": DATA})
    body["messages"][call + 1]["content"].insert(1, {"type": "tool_result", "tool_use_id": "toolu_data",
                                                     "content": "cache_control.ttl: Extra inputs are not permitted"})
    body["tools"].append({"name": "Configure", "description": "context_management",
                          "input_schema": {"type": "object", "properties": {k: {"type": "object"} for k in DATA}}})
    return body


def codex() -> dict[str, Any]:
    body = capture_json("codex/turn2_request.json")
    body["input"].append({"type": "function_call", "call_id": "call_data", "name": "configure",
                          "arguments": json.dumps(DATA)})
    return body


BODIES: list[tuple[Dialect, dict[str, Any]]] = [
    (MESSAGES, claude_code("claude-code/single_png__turn2.json")),
    (MESSAGES, claude_code("claude-code/sonnet45__single_png__turn2.json")),
    (MESSAGES, capture_json("pi-ai/anthropic_messages.json")),
    (RESPONSES, codex()),
    (RESPONSES, capture_json("pi-ai/openai_responses.json")),
    (CHAT, {**capture_json("opencode/chat__mock-vision__two_png__turn2.json"), "prompt_cache_key": "ses_1"}),
]
CONVERSATION = {MESSAGES: "messages", RESPONSES: "input", CHAT: "messages"}
KEPT = ("model", "stream", "system", "tools", "instructions", "previous_response_id")


def unmarked(value: Any) -> Any:
    """``value`` without any cache marker (a ``cache_control`` object): what may go from the conversation."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if not (k == "cache_control" and isinstance(v, dict))}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def data_of(value: Any) -> list[Any]:
    """Every call's arguments and every tool's schema, exactly as they are."""
    found: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if v.get("type") == "tool_use":
                found.append(v.get("input"))
            found += [v[k] for k in ("input_schema", "parameters", "arguments") if k in v]
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return found


@BUDGET
@given(index=st.integers(0, len(BODIES) - 1), vendor=st.sampled_from(field_rules.VENDORS), paths=st.lists(
    PATHS, min_size=1, max_size=3))
def test_no_path_in_any_envelope_takes_conversation_content(index: int, vendor: str, paths: list[list[Any]]) -> None:
    dialect, body = BODIES[index]
    learned: list[tuple[str, bool]] = []
    for path in paths:
        rejection = field_rules.rejection(vendor, path, None)
        found = rejections.match(str(dialect), rejection.status, json.dumps(rejection.body).encode())
        if found is not None:
            assert found.rule.name == "refused-field" or found.rule.flags or found.rule.facts
            learned += [f for f in found.flags if f[0].startswith("strip:")]
    raw = json.dumps(body).encode()
    settings = engine.Settings(quirks=Fixed(tuple(learned)), enabled=frozenset({"strip-refused-fields"}))
    out = engine.process(engine.Request(dialect, "relay.test", 443, raw), settings)
    assert out.status != "failed", out.reason
    assert all(c.repair == "strip-refused-fields" for c in out.changes)
    event("stripped something" if out.changes else "nothing to strip")
    got = json.loads(out.body) if out.body is not None else body
    key = CONVERSATION[dialect]
    assert unmarked(got[key]) == unmarked(body[key])
    assert data_of(got) == data_of(body)
    for member in KEPT:
        assert (member in got) == (member in body), member
        if member in body:
            assert unmarked(got[member]) == unmarked(body[member]), member
    gone = {k for k in body if k not in got}
    assert gone <= {name.removeprefix("strip:").split(".")[0] for name, _ in learned}
