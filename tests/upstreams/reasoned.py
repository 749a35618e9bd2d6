"""Answers of a reasoning model for the strict mock, built on the Codex captures, and the turns a client replays.

The Codex captures (``tests/fixtures/codex/``) were made against a mock that issued no reasoning; a gpt-5.5 answer
to Codex has a reasoning item first. :func:`codex_answer` gives the captured answer (turn 1: the ``view_image``
call; turn 2: the final message) with a reasoning item sealed by an organization before it (ids tagged per test,
so that tests sharing one mock never share an item), streamed as OpenAI streams it: ``response.output_item.added``
carries an incomplete ``encrypted_content`` (the spec warns it may), ``.done`` and ``response.completed`` the whole.
:func:`codex_turn2` is the turn-2 request Codex sends after it (its capture, with the reasoning item and the
tagged ids), the shape the ways of losing the state are applied to.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.upstreams.canned import completed_response
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.reasoning_items_rules import Organization

CODEX_CALL_ID = "call_mock883ae17f536f41f8a10f_0"


def responses_sse(response: dict[str, Any]) -> str:
    """A complete Responses stream of ``response`` (its ``output`` items, in order) as SSE text."""
    head = {k: v for k, v in response.items() if k != "output"}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**head, "status": "in_progress", "output": []}},
        {"type": "response.in_progress", "response": {**head, "status": "in_progress", "output": []}},
    ]
    for index, item in enumerate(response["output"]):
        added = {**item, "status": "in_progress"}
        if item.get("type") == "reasoning" and isinstance(item.get("encrypted_content"), str):
            added["encrypted_content"] = item["encrypted_content"][: len(item["encrypted_content"]) // 2]
        if item.get("type") == "message":
            added["content"] = []
        if item.get("type") == "function_call":
            added["arguments"] = ""
        events.append({"type": "response.output_item.added", "output_index": index, "item": added})
        if item.get("type") == "function_call":
            events.append({"type": "response.function_call_arguments.delta", "item_id": item["id"],
                           "output_index": index, "delta": item["arguments"]})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": {**head, "status": "completed",
                                                              "output": response["output"]}})
    return "".join(f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n}, separators=(',', ':'))}\n\n"
                   for n, e in enumerate(events))


def reasoning_item(org: Organization, item_id: str, summary: str | None = None) -> dict[str, Any]:
    parts = [{"type": "summary_text", "text": summary}] if summary else []
    return {"id": item_id, "type": "reasoning", "summary": parts, "encrypted_content": org.seal(item_id)}


def codex_answer(turn: int, org: Organization, tag: str, *, summary: str | None = None) -> dict[str, Any]:
    """The captured answer of Codex's turn ``turn`` (1: the call, 2: the message), led by a reasoning item."""
    response = copy.deepcopy(completed_response(capture_bytes(f"codex/turn{turn}_response.sse.txt").decode()))
    for item in response["output"]:
        item["id"] = f"{item['id']}_{tag}"
        if item.get("type") == "function_call":
            item["call_id"] = f"{CODEX_CALL_ID}_{tag}"
    response["id"] = f"{response['id']}_{tag}"
    response["output"].insert(0, reasoning_item(org, f"rs_{tag}_{turn}", summary))
    return response


def codex_turn2(answer: dict[str, Any]) -> dict[str, Any]:
    """Codex's turn-2 request after ``answer`` (:func:`codex_answer` of turn 1): the capture, whose call item and
    output take the answer's ids, with the answer's reasoning item replayed before the call, as Codex replays it."""
    body = capture_json("codex/turn2_request.json")
    reasoning, call = answer["output"]
    items = body["input"]
    assert items[4]["type"] == "function_call" and items[5]["type"] == "function_call_output"
    items[4] = {**items[4], "id": call["id"], "call_id": call["call_id"]}
    items[5] = {**items[5], "call_id": call["call_id"]}
    items.insert(4, {"type": "reasoning", "id": reasoning["id"], "summary": reasoning["summary"],
                     "encrypted_content": reasoning["encrypted_content"]})
    return body
