"""Two-turn sessions built on the real captures, for the reasoning repairs: turn 1 is the client's request and the
thinking answer the mock streams for it; turn 2 is the client's next request as captured, i.e. the way that client
replays the turn (Droid without ``reasoning_content``, opencode with ``""``, Claude Code with every thinking block
exactly as it came)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from llmfix import engine
from llmfix.dialects.base import Dialect
from llmfix.memory.learn import StreamLearner
from llmfix.memory.store import ReasoningStore, ToolCall
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.reasoning_canned import anthropic_sse, chat_sse, issued_turn, with_reasoning
from tests.upstreams.thinking import Ledger

THOUGHT = "The user wants both files at once.\nI will call Read twice in parallel, then describe them."
DROID_SSE = "droid/two_images__turn1_response.sse.txt"  # declares call_mock_a and call_mock_b
OPENCODE = "opencode/chat__deepseek-chat__single_png__turn2.json"
CLAUDE_CODE = "claude-code/sonnet45__single_png__turn2.json"
READ_A = ("toolu_mock_001_0", "Read", {"file_path": "/home/dev/project/a.png"})


@dataclass
class Session:
    turn1: dict[str, Any]  # the client's first request
    sse: str  # what the upstream streams for it
    turn2: dict[str, Any]  # the client's next request, as it replays turn 1
    reasoning: str = THOUGHT
    at: int = 0  # the index of the replayed assistant message in turn 2


def droid(version: str = "0.225.2", model: str = "deepseek-v4-flash") -> Session:
    """Factory Droid BYOK (Chat Completions): two parallel Read calls; turn 2 drops the reasoning."""
    turn1 = capture_json(f"droid/{version}__two_images_noimg__turn1.json")
    turn2 = capture_json(f"droid/{version}__two_images_noimg__turn2.json")
    for body in (turn1, turn2):
        body["model"] = model
    return Session(turn1, with_reasoning(capture_bytes(DROID_SSE).decode(), THOUGHT), turn2, at=3)


def opencode(model: str = "deepseek-v4-flash") -> Session:
    """opencode 1.18.33 (``@ai-sdk/openai-compatible``): a ``read`` call; turn 2 sends ``"reasoning_content": ""``
    (and the image in a user message, which DeepSeek's text-only models reject as well)."""
    turn2 = capture_json(OPENCODE)
    turn2["model"] = model
    turn1 = {**copy.deepcopy(turn2), "messages": copy.deepcopy(turn2["messages"][:2])}
    call = turn2["messages"][2]["tool_calls"][0]
    sse = chat_sse(model, THOUGHT, calls=[(call["id"], call["function"]["name"], call["function"]["arguments"])])
    return Session(turn1, sse, turn2, at=2)


def claude_code(ledger: Ledger, model: str = "claude-sonnet-4-5-20250929") -> Session:
    """Claude Code (Messages, thinking on): a Read call; turn 2 replays the thinking block as it came, signed."""
    turn2 = capture_json(CLAUDE_CODE)
    turn2["model"] = model
    turn1 = {**copy.deepcopy(turn2), "messages": copy.deepcopy(turn2["messages"][:1])}
    thought = "The user wants me to look at a.png. I'll read it."
    replayed = turn2["messages"][1]
    assert [b["id"] for b in replayed["content"]] == [READ_A[0]]  # what the capture's turn 1 answered
    sse = anthropic_sse(ledger, model, thought, tool_uses=[READ_A])
    replayed["content"] = [issued_turn(ledger, thought)["content"][0], *replayed["content"]]
    return Session(turn1, sse, turn2, thought, at=1)


# -- how llmfix sees them ----------------------------------------------------------------------------------------


def hear(store: ReasoningStore, dialect: str, sse: str, upstream: str) -> None:
    """llmfix's memory heard this answer stream by (as the proxy's learner feeds it)."""
    calls: list[ToolCall] = []
    learner = StreamLearner(dialect, calls.extend, on_reasoning=store.note, upstream=upstream)
    learner.feed(sse.encode())
    learner.feed(b"")


def run(dialect: Dialect, host: str, body: dict[str, Any] | bytes, store: Any) -> engine.Outcome:
    """One request through the engine, with this reasoning memory."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return engine.process(engine.Request(dialect, host, 443, raw), engine.Settings(reasoning=store))


def sent(outcome: engine.Outcome, body: dict[str, Any]) -> dict[str, Any]:
    """What reaches the upstream: the repaired body, or the body itself when nothing changed."""
    assert outcome.status != "failed", outcome.reason
    return json.loads(outcome.body) if outcome.body is not None else body
