"""Regenerate the recorded flows in ``flows/`` from the captured client requests in ``tests/fixtures/``.

    uv run python flows/make_flows.py [OUT_DIR]      # default: flows/

Issue 7: each flow goes the way a user's flow does. A client request (with made-up credentials in its
headers) passes through llmfix as in a live proxy, gets a made-up upstream answer, and is then written by
the ``llmfix.capture`` command, so the files are produced by its redaction path: the request as the
client sent it, no credential, and an ``.expect.json`` that ``tests/test_flows.py`` checks on replay.
Ids and timestamps are fixed, so running this twice writes the same files.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "addon"))

import mitmproxy.types  # noqa: E402
from mitmproxy import connection, http  # noqa: E402
from mitmproxy.test import taddons  # noqa: E402

from llmfix.proxy import LLMFix  # noqa: E402
from llmfix.report.capture import Capture  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
FAKE_KEY = "sk-fake-0123456789abcdefghijklmnop"  # shaped like a key, so redaction must remove it


def _sse(events: list[tuple[str | None, dict | str]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def responses_answer(model: str, text: str) -> bytes:
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]}
    resp = {"id": "resp_1", "object": "response", "status": "completed", "model": model, "output": [msg],
            "usage": {"input_tokens": 120, "output_tokens": 9, "total_tokens": 129}}
    return _sse([
        ("response.created", {"type": "response.created", "response": {**resp, "status": "in_progress",
                                                                        "output": []}}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                        "item": {**msg, "status": "in_progress", "content": []}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 0,
                                        "content_index": 0, "delta": text}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": msg}),
        ("response.completed", {"type": "response.completed", "response": resp}),
    ])


def chat_answer(model: str, text: str) -> bytes:
    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": int(T0), "model": model}
    return _sse([
        (None, {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                                      "finish_reason": None}]}),
        (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 912}}),
        (None, "[DONE]"),
    ])


def messages_answer(model: str, text: str) -> bytes:
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
           "stop_reason": None, "usage": {"input_tokens": 900, "output_tokens": 1}}
    return _sse([
        ("message_start", {"type": "message_start", "message": msg}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 9}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def interrupted(name: str) -> bytes:
    """A capture with its last tool result removed and a new user prompt after it: Esc during the tool (B6)."""
    body = json.loads((FIXTURES / name).read_bytes())
    if "input" in body:  # Codex: the function_call_output never written
        body["input"] = [it for it in body["input"] if it.get("type") != "function_call_output"]
        body["input"].append({"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": "Never mind. What now?"}]})
    else:  # Claude Code: the user message carrying the tool_result replaced by the next prompt
        body["messages"][-1] = {"role": "user", "content": [{"type": "text", "text": "Never mind. What now?"}]}
    return json.dumps(body, indent=2, ensure_ascii=False).encode()


def client_flow(name: str, url: str, body: bytes, headers: dict[str, str]) -> http.HTTPFlow:
    """A flow as a live proxy has it when llmfix's request hook runs; ``body`` as on the wire."""
    ids = (str(uuid.uuid5(uuid.NAMESPACE_URL, f"llmfix-flows/{name}/{part}")) for part in ("flow", "client", "server"))
    flow_id, client_id, server_id = ids
    request = http.Request.make("POST", url, b"", headers)
    request.raw_content = body  # make() would encode it again per Content-Encoding
    request.headers["content-length"] = str(len(body))
    request.timestamp_start, request.timestamp_end = T0, T0 + 0.01
    client = connection.Client(id=client_id, peername=("127.0.0.1", 50000), sockname=("127.0.0.1", 8080),
                               timestamp_start=T0)
    server = connection.Server(id=server_id, address=(request.host, request.port), sni=request.host,
                               timestamp_start=T0 + 0.02)
    f = http.HTTPFlow(client, server, live=True)
    f.id, f.timestamp_created, f.request = flow_id, T0, request
    return f


def answer(f: http.HTTPFlow, body: bytes) -> None:
    """The upstream's (made-up) streamed answer, as mitmproxy stores it with store_streamed_bodies."""
    f.response = http.Response.make(200, body, {"content-type": "text/event-stream", "x-request-id": "req-1",
                                                "set-cookie": "__cf_bm=abc; HttpOnly"})
    f.response.timestamp_start, f.response.timestamp_end = T0 + 0.5, T0 + 1.0


def headers_for(host: str, *, gzipped: bool = False) -> dict[str, str]:
    h = {"host": host, "content-type": "application/json", "accept": "text/event-stream",
         "authorization": f"Bearer {FAKE_KEY}", "x-api-key": FAKE_KEY, "cookie": "session=abc123",
         "user-agent": "llmfix-flows/1"}
    return h | {"content-encoding": "gzip"} if gzipped else h


def flows() -> dict[str, tuple[http.HTTPFlow, bytes]]:
    """name → (the client's flow, the upstream's answer)."""
    xai = (FIXTURES / "pi-ai" / "xai_responses.json").read_bytes()
    parallel = (FIXTURES / "pi-ai" / "xai_responses_parallel_tools.json").read_bytes()
    droid = (FIXTURES / "droid" / "0.225.2__two_images__turn2.json").read_bytes()
    codex = (FIXTURES / "codex" / "turn2_request.json").read_bytes()
    xai_url, chat_url, openai_url = ("https://api.x.ai/v1/responses", "https://api.deepseek.com/v1/chat/completions",
                                     "https://api.openai.com/v1/responses")
    return {
        # B3: pi-ai's array tool output to xAI → hoist-tool-media
        "xai-responses-hoist-tool-media": (
            client_flow("xai", xai_url, xai, headers_for("api.x.ai")),
            responses_answer("grok-4.3", "A small red square.")),
        # the same bug with two parallel calls, gzip-compressed as some clients send it
        "xai-responses-parallel-gzip": (
            client_flow("xai-parallel-gzip", xai_url, gzip.compress(parallel, mtime=0),
                        headers_for("api.x.ai", gzipped=True)),
            responses_answer("grok-4.3", "Two squares.")),
        # B2: Droid's turn 2; offline there is no memory of turn 1, so the orphan becomes a user message
        "droid-two-images-turn2-untangle": (
            client_flow("droid", chat_url, droid, headers_for("api.deepseek.com")),
            chat_answer("mock-model", "Both images are small squares.")),
        # B6: Codex interrupted during view_image (output removed): pair-tool-calls adds an output saying so
        "codex-responses-interrupted-pair-tool-calls": (
            client_flow("codex-interrupted", openai_url, interrupted("codex/turn2_request.json"),
                        headers_for("api.openai.com")),
            responses_answer("gpt-5.5", "The view_image call was interrupted; running it again.")),
        # B6: Claude Code, Esc during Read: an is_error tool_result first in the next user message
        "claude-code-messages-interrupted-pair-tool-calls": (
            client_flow("claude-code-interrupted", "https://api.anthropic.com/v1/messages",
                        interrupted("claude-code/single_png__turn2.json"), headers_for("api.anthropic.com")),
            messages_answer("claude-sonnet-4-5", "The Read was interrupted.")),
        # B8: opencode with a Mistral model id cut both parallel ids to callmock0: made unique, 9 alphanumerics
        "opencode-mistral-chat-duplicate-ids-pair-tool-calls": (
            client_flow("opencode-mistral", "https://api.mistral.ai/v1/chat/completions",
                        (FIXTURES / "opencode" / "chat__mistral-medium-latest__two_png__turn2.json").read_bytes(),
                        headers_for("api.mistral.ai")),
            chat_answer("mistral-medium-latest", "Two small squares.")),
        # valid for OpenAI: must pass byte-identical
        "codex-turn2-openai-untouched": (
            client_flow("codex", openai_url, codex, headers_for("api.openai.com")),
            responses_answer("gpt-5.5", "It is a red square.")),
    }


async def main(out: Path = HERE) -> None:
    fix, capture = LLMFix(), Capture()
    with taddons.context(fix, capture) as tctx:
        tctx.configure(fix, llmfix_memory=":memory:")
        for name, (f, body) in flows().items():
            await fix.request(f)  # as live: llmfix repairs it and keeps the client's original
            answer(f, body)
            print(capture.capture([f], mitmproxy.types.Path(out / f"{name}.flow")))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE))
