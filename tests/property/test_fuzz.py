"""Promise 3 (fail open) under generated hostile input: valid conversations with one value replaced by any JSON.

A conversation from ``strategies`` gets one node — anywhere: the body, a message, a part, a tool call,
an output — replaced by an arbitrary JSON value (wrong types at every level), or its bytes cut short.
``engine.process`` must never raise; a failure names its reason; a repair is valid JSON that keeps the
top-level fields; and the same input gives the same outcome twice.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from llmfix import engine
from llmfix.dialects.registry import named
from llmfix.engine import Request
from tests.property.budget import BUDGET
from tests.property.strategies import CONVERSATIONS
from tests.property.test_promises import llmfix

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8) | st.sampled_from(["tool", "user", "image_url", "input_image", "function_call_output",
                                             "tool_result", "text", "data:image/png;base64,AA=="]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "role", "content", "text", "image_url", "url", "tool_calls", "tool_call_id", "id",
                         "call_id", "output", "function", "arguments", "source", "tool_use_id"]), children, max_size=3),
    max_leaves=8,
)


@st.composite
def mutated(draw: Any, value: Any) -> tuple[Any, str]:
    """``value`` with one node (chosen by walking down from the top) replaced by any JSON value."""
    path: list[str] = []

    def walk(node: Any) -> Any:
        children = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) \
            if isinstance(node, list) else []
        if not children or draw(st.integers(0, 3)) == 0:
            return draw(json_values)
        key, child = draw(st.sampled_from(children))
        path.append(str(key))
        copy = dict(node) if isinstance(node, dict) else list(node)
        copy[key] = walk(child)
        return copy

    return walk(value), "/".join(path) or "(body)"


@pytest.mark.parametrize("dialect", list(CONVERSATIONS))
@BUDGET
@given(data=st.data())
def test_any_broken_conversation_is_repaired_or_passed_with_a_reason(dialect: str, data: st.DataObject) -> None:
    host = data.draw(st.sampled_from(["openai", "xai", "deepseek", "spec"]), label="host")
    conv = data.draw(CONVERSATIONS[dialect](host), label="conversation")
    body, where = data.draw(mutated(conv.body()), label="mutation")
    raw = orjson.dumps(body)
    if data.draw(st.integers(0, 9), label="cut") == 0:
        raw = raw[: data.draw(st.integers(0, len(raw)), label="cut at")]
    request = Request(named(dialect), conv.host.name, 443, raw, None, "fuzz")
    with llmfix("knows", conv.calls) as one, llmfix("knows", conv.calls) as two:
        first, second = engine.process(request, one), engine.process(request, two)
    event(f"{dialect}: {first.status}")
    assert (first.status, first.reason, first.body) == (second.status, second.reason, second.body)
    if first.status == "failed":
        assert first.reason and len(first.reason) < 500
    elif first.status == "repaired":
        out = orjson.loads(first.body)
        assert isinstance(body, dict) and list(out) == list(body), where
