"""Codex-shaped Responses WebSocket messages, built from the capture of Codex 0.171 (tests/fixtures/codex-ws/).

``create(input, previous_response_id=…, generate=…)`` is a ``response.create`` message with the fields of
Codex's turn 1 in Codex's order (its tools, reasoning, ``store: false``, client metadata…) and the given input;
``dumps`` writes it the way Codex does (serde_json: compact, UTF-8 as is). The items of the captured session:
``developer()`` (the base instructions), ``prompt()``, ``call()`` (the ``view_image`` call the mock streamed)
and ``output()`` (its ``function_call_output`` carrying the PNG).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

from tests.upstreams.captures import capture_json, capture_path

FILES = ("codex-ws/1_warmup", "codex-ws/2_turn1", "codex-ws/3_turn2")
ORDER = ("type", "model", "stream", "previous_response_id", "input", "tools", "tool_choice", "parallel_tool_calls",
         "reasoning", "store", "include", "prompt_cache_key", "text", "generate", "client_metadata")


@cache
def _captured() -> tuple[tuple[dict[str, Any], list[dict[str, Any]]], ...]:
    return tuple((capture_json(f"{name}.json"),
                  [json.loads(line) for line in capture_path(f"{name}.events.jsonl").read_text().splitlines()])
                 for name in FILES)


def messages() -> list[dict[str, Any]]:
    """The captured client messages (fresh copies), in order: warm-up, turn 1, turn 2."""
    return [copy.deepcopy(message) for message, _ in _captured()]


def server_events(n: int) -> list[dict[str, Any]]:
    """The mock's answer to the ``n``-th captured message, one event per server message."""
    return copy.deepcopy(_captured()[n][1])


def create(items: list[dict[str, Any]], *, previous_response_id: str | None = None,
           generate: bool | None = None) -> dict[str, Any]:
    """A ``response.create`` like Codex's turn 1, with ``items`` as its input."""
    turn1 = messages()[1]
    fields = turn1 | {"input": items, "previous_response_id": previous_response_id, "generate": generate}
    return {k: fields[k] for k in ORDER if fields.get(k) is not None}


def dumps(message: dict[str, Any]) -> bytes:
    """The message's text as Codex sends it (serde_json::to_string: no spaces, non-ASCII as is)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


def developer() -> dict[str, Any]:
    return messages()[0]["input"][0]


def prompt() -> dict[str, Any]:
    return messages()[1]["input"][-1]


def call() -> dict[str, Any]:
    """The ``function_call`` item of the captured ``view_image`` call, as the client resends it in a history."""
    done = next(e for e in server_events(1) if e["type"] == "response.output_item.done")
    item = done["item"]
    return {"type": "function_call", "status": "completed", "id": item["id"], "name": item["name"],
            "arguments": item["arguments"], "call_id": item["call_id"]}


def output() -> dict[str, Any]:
    return messages()[2]["input"][0]
