"""The one-pass pairing check (``wire/paired.py``) on a list that ends with calls still open: its answer comes
without the walk, and it is the walk's answer (an open end is never certain; the same calls answered are)."""

from __future__ import annotations

from typing import Any

import pytest

from llmfix.body.conversation import typed
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.wire import paired

_USER = {"role": "user", "content": "go"}
CASES: dict[Dialect, tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]] = {
    CHAT: ([_USER], {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}),
    RESPONSES: ([_USER], {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
                        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}),
    MESSAGES: ([_USER], {"role": "assistant", "content": [
        {"type": "tool_use", "id": "c1", "name": "ls", "input": {}}]},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "a"}]}),
}


@pytest.mark.parametrize("dialect", list(CASES))
@pytest.mark.parametrize("start", [0, 1])
def test_an_open_end_is_not_certain_and_its_answer_is(dialect: Dialect, start: int) -> None:
    head, call, answer = CASES[dialect]
    assert paired.settled(dialect, typed(dialect, [*head, call]), start, None) is None
    assert paired.settled(dialect, typed(dialect, [*head, call, answer]), start, None) is not None


def test_a_responses_call_answered_before_it_is_still_walked() -> None:
    """The walk pairs Responses ids as sets: an output before its call, both new, pairs (no early None)."""
    _head, call, answer = CASES[RESPONSES]
    items = typed(RESPONSES, [_USER, answer, call])
    assert paired.settled(RESPONSES, items, 1, None) is not None
    assert paired.settled(RESPONSES, items, 2, None) is None  # its output is before start: not new
