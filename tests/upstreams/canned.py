"""Minimal valid answers of each dialect, parseable by the ``openai`` and ``anthropic`` SDKs.

``default_json(dialect, request)`` is the non-streamed body; ``default_sse(dialect, request)`` is the
streamed one as SSE text (events separated by blank lines; Responses and Anthropic use ``event:`` lines).
"""

from __future__ import annotations

import json
from typing import Any

from tests.upstreams.rules import Dialect

MOCK_TEXT = "ok from mock"
CREATED = 1_700_000_000


def _model(request: dict[str, Any]) -> str:
    model = request.get("model")
    return model if isinstance(model, str) else "mock-model"


def default_json(dialect: Dialect, request: dict[str, Any]) -> dict[str, Any]:
    """A complete non-streamed answer for ``dialect``."""
    if dialect == "chat":
        return _chat_completion(_model(request))
    if dialect == "responses":
        return _response(_model(request), "completed", [_output_message()])
    return _anthropic_message(_model(request), [{"type": "text", "text": MOCK_TEXT}], "end_turn", 3)


def default_sse(dialect: Dialect, request: dict[str, Any]) -> str:
    """A complete streamed answer for ``dialect`` as SSE text."""
    model = _model(request)
    if dialect == "chat":
        return _chat_sse(model)
    if dialect == "responses":
        return _responses_sse(model)
    return _anthropic_sse(model)


def completed_response(sse_text: str) -> dict[str, Any]:
    """The ``response`` of the ``response.completed`` event of a Responses SSE text ({} when it has none)."""
    for block in sse_text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
        if '"response.completed"' not in data:
            continue
        try:
            event = json.loads(data)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") == "response.completed" and isinstance(event.get("response"),
                                                                                               dict):
            return event["response"]
    return {}


def _chat_completion(model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-mock", "object": "chat.completion", "created": CREATED, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": MOCK_TEXT, "refusal": None},
                     "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def _chat_sse(model: str) -> str:
    chunk = {
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": CREATED, "model": model,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": MOCK_TEXT}, "finish_reason": "stop"}],
    }
    return f"data: {_dump(chunk)}\n\ndata: [DONE]\n\n"


def _output_message() -> dict[str, Any]:
    return {
        "id": "msg_mock", "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": MOCK_TEXT, "annotations": []}],
    }


def _response(model: str, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    usage = None if status != "completed" else {
        "input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 13,
    }
    return {
        "id": "resp_mock", "object": "response", "created_at": CREATED, "status": status, "model": model,
        "output": output, "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
        "parallel_tool_calls": True, "temperature": 1.0, "top_p": 1.0, "tool_choice": "auto", "tools": [],
        "usage": usage,
    }


def _responses_sse(model: str) -> str:
    message = _output_message()
    part = message["content"][0]
    events = [
        ("response.created", {"response": _response(model, "in_progress", [])}),
        ("response.in_progress", {"response": _response(model, "in_progress", [])}),
        ("response.output_item.added", {"output_index": 0,
                                        "item": {**message, "status": "in_progress", "content": []}}),
        ("response.content_part.added", {"item_id": "msg_mock", "output_index": 0, "content_index": 0,
                                         "part": {**part, "text": ""}}),
        ("response.output_text.delta", {"item_id": "msg_mock", "output_index": 0, "content_index": 0,
                                        "delta": MOCK_TEXT, "logprobs": []}),
        ("response.output_text.done", {"item_id": "msg_mock", "output_index": 0, "content_index": 0,
                                       "text": MOCK_TEXT, "logprobs": []}),
        ("response.content_part.done", {"item_id": "msg_mock", "output_index": 0, "content_index": 0,
                                        "part": part}),
        ("response.output_item.done", {"output_index": 0, "item": message}),
        ("response.completed", {"response": _response(model, "completed", [message])}),
    ]
    return "".join(
        f"event: {name}\ndata: {_dump({'type': name, 'sequence_number': seq, **data})}\n\n"
        for seq, (name, data) in enumerate(events)
    )


def _anthropic_message(model: str, content: list[dict[str, Any]], stop: str | None, out: int) -> dict[str, Any]:
    return {
        "id": "msg_mock", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": out},
    }


def _anthropic_sse(model: str) -> str:
    events = [
        ("message_start", {"message": _anthropic_message(model, [], None, 1)}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": MOCK_TEXT}}),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 3}}),
        ("message_stop", {}),
    ]
    return "".join(f"event: {name}\ndata: {_dump({'type': name, **data})}\n\n" for name, data in events)


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
