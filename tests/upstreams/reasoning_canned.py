"""Streamed answers that carry reasoning, as the mock sends them: DeepSeek/Kimi Chat chunks with
``reasoning_content`` deltas, Anthropic events with signed thinking blocks.

DeepSeek's stream (as observed, Oaklight/llm-rosetta #356): the first chunk is ``{"role":"assistant","content":null,
"reasoning_content":""}``, then reasoning pieces, then the calls or the text. Anthropic's: ``content_block_start``
with ``{"type":"thinking","thinking":"","signature":""}``, ``thinking_delta`` pieces, one ``signature_delta``,
``content_block_stop``, then the other blocks.
"""

from __future__ import annotations

import json
from typing import Any

from tests.upstreams.thinking import ANTHROPIC, Ledger

CREATED = 1_700_000_000


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def pieces(text: str, n: int = 3) -> list[str]:
    """``text`` cut into about ``n`` pieces, as a stream sends it."""
    step = max(1, len(text) // n)
    return [text[i:i + step] for i in range(0, len(text), step)] or [""]


def chat_chunks(model: str, deltas: list[dict[str, Any]], finish: str) -> str:
    chunks = [{"id": "chatcmpl-think", "object": "chat.completion.chunk", "created": CREATED, "model": model,
               "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks[-1]["choices"][0]["finish_reason"] = finish
    return "".join(f"data: {_dump(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def reasoning_deltas(reasoning: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": None, "reasoning_content": ""},
            *({"reasoning_content": p} for p in pieces(reasoning))]


def chat_sse(model: str, reasoning: str, *, calls: list[tuple[str, str, str]] = (), text: str = "") -> str:
    """A thinking-mode answer: ``reasoning``, then the tool ``calls`` (id, name, arguments) or ``text``."""
    deltas = reasoning_deltas(reasoning)
    for k, (call_id, name, arguments) in enumerate(calls):
        deltas.append({"tool_calls": [{"index": k, "id": call_id, "type": "function",
                                       "function": {"name": name, "arguments": arguments}}]})
    deltas += [{"content": p} for p in (pieces(text) if text else [])]
    deltas.append({})
    return chat_chunks(model, deltas, "tool_calls" if calls else "stop")


def with_reasoning(captured_sse: str, reasoning: str) -> str:
    """A captured Chat stream with thinking added in front: the reasoning chunks, then the captured ones unchanged."""
    first = json.loads(next(line[6:] for line in captured_sse.splitlines() if line.startswith("data: {")))
    front = "".join(f"data: {_dump({**first, 'choices': [{'index': 0, 'delta': d, 'finish_reason': None}]})}\n\n"
                    for d in reasoning_deltas(reasoning))
    return front + captured_sse


def anthropic_sse(ledger: Ledger, model: str, thinking: str, *, signer: str = ANTHROPIC,
                  signature: str | None = None, tool_uses: list[tuple[str, str, dict[str, Any]]] = (),
                  text: str = "", message_id: str = "msg_think") -> str:
    """An answer whose first block is ``thinking`` signed by ``signer`` (or carrying ``signature`` as given), then
    the ``tool_uses`` (id, name, input) or a ``text`` block."""
    sig = ledger.sign(thinking, signer) if signature is None else signature
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"message": {"id": message_id, "type": "message", "role": "assistant", "model": model,
                                       "content": [], "stop_reason": None, "stop_sequence": None,
                                       "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ("content_block_start", {"index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        *(("content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": p}})
          for p in pieces(thinking)),
        ("content_block_delta", {"index": 0, "delta": {"type": "signature_delta", "signature": sig}}),
        ("content_block_stop", {"index": 0}),
    ]
    index = 1
    for tool_id, name, tool_input in tool_uses:
        events += [("content_block_start", {"index": index, "content_block": {"type": "tool_use", "id": tool_id,
                                                                              "name": name, "input": {}}}),
                   ("content_block_delta", {"index": index, "delta": {"type": "input_json_delta",
                                                                      "partial_json": _dump(tool_input)}}),
                   ("content_block_stop", {"index": index})]
        index += 1
    if text:
        events += [("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}),
                   *(("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": p}})
                     for p in pieces(text)),
                   ("content_block_stop", {"index": index})]
    stop = "tool_use" if tool_uses else "end_turn"
    events += [("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": 9}}),
               ("message_stop", {})]
    return "".join(f"event: {name}\ndata: {_dump({'type': name, **data})}\n\n" for name, data in events)


def issued_turn(ledger: Ledger, thinking: str, *, signer: str = ANTHROPIC, signature: str | None = None,
                tool_uses: list[tuple[str, str, dict[str, Any]]] = (), text: str = "") -> dict[str, Any]:
    """The assistant message a client that keeps everything stores for :func:`anthropic_sse`'s answer."""
    sig = ledger.sign(thinking, signer) if signature is None else signature
    content: list[dict[str, Any]] = [{"type": "thinking", "thinking": thinking, "signature": sig}]
    content += [{"type": "tool_use", "id": i, "name": n, "input": x} for i, n, x in tool_uses]
    if text:
        content.append({"type": "text", "text": text})
    return {"role": "assistant", "content": content}
