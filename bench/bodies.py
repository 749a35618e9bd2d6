"""Request bodies for the bench, built from the real captures in ``tests/fixtures`` (read-only).

Every body is compact JSON (as clients send it). Images are base64 of seeded random bytes
(incompressible, like a PNG), so runs are reproducible.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from functools import cache
from pathlib import Path

import orjson

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
MB = 1 << 20


def _fixture(rel: str) -> dict:
    return json.loads((FIXTURES / rel).read_text())


@cache
def data_url(b64_chars: int, seed: int = 0) -> str:
    """A ``data:image/png;base64,`` URL whose payload is ``b64_chars`` long (a multiple of 4)."""
    raw = random.Random(seed).randbytes(b64_chars // 4 * 3)
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def dumps(obj: dict) -> bytes:
    return orjson.dumps(obj)


def non_llm(size: int = 2048) -> bytes:
    """A JSON upload that is no LLM API call (POST /upload)."""
    base = {"kind": "telemetry", "events": []}
    i = 0
    while len(dumps(base)) < size:
        base["events"].append({"id": i, "name": f"event-{i}", "value": i * 3.5, "tags": ["a", "b"]})
        i += 1
    return dumps(base)


def chat_small(size: int = 2048) -> bytes:
    """A ~2 KB Chat Completions request with one tool round trip (valid: needs no repair)."""
    body = {
        "model": "gpt-4.1",
        "stream": False,
        "messages": [
            {"role": "system", "content": "You are a helpful coding assistant. Answer briefly."},
            {"role": "user", "content": "List the files in the project and tell me what the build uses."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_bench_ls", "type": "function",
                 "function": {"name": "shell", "arguments": "{\"command\":[\"ls\",\"-la\"]}"}}]},
            {"role": "tool", "tool_call_id": "call_bench_ls", "content": ""},
            {"role": "user", "content": "Thanks. Which of these matter for the build?"},
        ],
        "tools": [{"type": "function", "function": {
            "name": "shell", "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}},
                           "required": ["command"]}}}],
    }
    listing = []
    while len(dumps(body)) < size:
        listing.append(f"-rw-r--r-- 1 dev dev {1000 + len(listing) * 37:6d} file_{len(listing):03d}.py")
        body["messages"][3]["content"] = "\n".join(listing)
    return dumps(body)


def codex_padded(size: int = 200 * 1024) -> bytes:
    """The Codex turn-2 capture (Responses, gpt-5.5, view_image output with an image), its history padded
    with earlier shell turns (function_call + string output + assistant message) to ``size`` bytes.
    Valid for api.openai.com: needs no repair."""
    body = _fixture("codex/turn2_request.json")
    head, tail = body["input"][:4], body["input"][4:]
    turns: list[dict] = []
    out_text = "\n".join(f"src/module_{j:03d}.rs:{j * 7}: fn handler_{j}() -> Result<()> {{ ... }}" for j in range(30))
    k = 0
    while True:
        body["input"] = head + turns + tail
        if len(dumps(body)) >= size:
            break
        cid = f"call_bench_pad_{k:04d}"
        turns += [
            {"type": "function_call", "status": "completed", "id": f"fc_bench_{k:04d}", "name": "shell",
             "arguments": json.dumps({"command": ["rg", "-n", f"handler_{k}", "src"]}), "call_id": cid},
            {"type": "function_call_output", "call_id": cid, "output": out_text},
            {"type": "message", "role": "assistant", "id": f"msg_bench_{k:04d}",
             "content": [{"type": "output_text", "text": f"Step {k}: found the handlers; looking further."}]},
        ]
        k += 1
    return dumps(body)


def image_user_message(image_b64: int = 10 * MB) -> bytes:
    """Responses to api.openai.com: a user message with text and a ~10 MB base64 image. No tool calls,
    valid: needs no repair."""
    body = {
        "model": "gpt-4.1",
        "stream": False,
        "input": [
            {"role": "developer", "content": "You are a test assistant."},
            {"role": "user", "content": [
                {"type": "input_text", "text": "What is in this screenshot?"},
                {"type": "input_image", "detail": "auto", "image_url": data_url(image_b64)},
            ]},
        ],
    }
    return dumps(body)


def codex_image_output(image_b64: int = 10 * MB) -> bytes:
    """The Codex turn-2 capture with its view_image output carrying a ~10 MB image (to api.openai.com,
    where array outputs are valid: needs no repair, but llmfix observes tool outputs)."""
    body = _fixture("codex/turn2_request.json")
    body["input"][-1]["output"][0]["image_url"] = data_url(image_b64)
    return dumps(body)


@cache
def _xai_template() -> dict:
    return _fixture("pi-ai/xai_responses.json")


def xai_repair(image_b64: int = 10 * MB, call_id: str = "call_mock_1", seed: int = 0) -> bytes:
    """The pi-ai → xAI capture (B3: ``function_call_output.output`` is ``[input_text, input_image]``) with
    a ~``image_b64``-byte image: needs hoist-tool-media for api.x.ai."""
    body = copy.deepcopy(_xai_template())
    for item in body["input"]:
        if item.get("call_id") == "call_mock_1":
            item["call_id"] = call_id
        if item.get("type") == "function_call_output":
            for part in item["output"]:
                if part.get("type") == "input_image":
                    part["image_url"] = data_url(image_b64, seed)
    return dumps(body)


def sse_request() -> bytes:
    """A small streamed Responses request (no tools)."""
    return dumps({"model": "gpt-4.1", "stream": True, "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Say hello, token by token."}]}]})


def million_messages() -> bytes:
    """A Chat request of 1,000,000 one-word user messages (~30 MB) ending in a valid tool round trip: the worst
    case for parsing (one JSON object per item, no base64) that llmfix must parse (a tool message is there)."""
    item = b'{"role":"user","content":"hi"}'
    run = (b'{"role":"assistant","content":null,"tool_calls":[{"id":"call_m","type":"function",'
           b'"function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_m","content":"ok"}')
    return b'{"model":"gpt-4.1","messages":[' + b",".join([item] * 1_000_000) + b"," + run + b"]}"
