"""A gateway test double that behaves like axonhub before its fix (bug B1), or like its Chat outbound (B4).

It listens on 127.0.0.1, takes a client's request, changes it the way the real gateway did, and sends
it on to its upstream through an HTTP(S) proxy (llmfix) — so llmfix sees both legs:

- ``mode="drop-media"``: Responses in, Responses out; a tool output's images are dropped — image-only
  becomes ``""``, text + image becomes the text (axonhub ``outbound_convert.go`` before PR #2117).
  Anthropic in, Anthropic out: image blocks leave ``tool_result`` content the same way.
- ``mode="to-chat"``: Responses in, Chat Completions out, images left inside the ``role:"tool"``
  message (axonhub's older Chat outbound, axonhub #2179).

Bounded: every socket has a timeout, the server stops on exit.
"""

from __future__ import annotations

import json
import ssl
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx

from tests.e2e.loopback_http import LoopbackHTTP

TEXT_TYPES = ("input_text", "output_text", "text")


def drop_media(body: dict[str, Any]) -> dict[str, Any]:
    body = json.loads(json.dumps(body))
    for item in body.get("input", []) if isinstance(body.get("input"), list) else []:
        if item.get("type") in ("function_call_output", "custom_tool_call_output") and isinstance(item["output"], list):
            texts = [p["text"] for p in item["output"] if p.get("type") in TEXT_TYPES]
            item["output"] = "".join(texts)
    for message in body.get("messages", []):
        for block in message["content"] if isinstance(message.get("content"), list) else []:
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                block["content"] = [b for b in block["content"] if b.get("type") != "image"]
    return body


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """Responses → Chat Completions, the way a naive gateway does it (images stay in tool messages)."""

    def parts(content: Any) -> Any:
        if isinstance(content, str):
            return content
        out = []
        for p in content:
            if p.get("type") in TEXT_TYPES:
                out.append({"type": "text", "text": p["text"]})
            elif p.get("type") == "input_image":
                out.append({"type": "image_url", "image_url": {"url": p["image_url"]}})
        return out

    messages: list[dict[str, Any]] = []
    for item in body["input"]:
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item["role"], "content": parts(item["content"])})
        elif kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            if messages and messages[-1]["role"] == "assistant" and messages[-1].get("tool_calls"):
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": parts(item["output"])})
    return {"model": body["model"], "messages": messages, "stream": False}


class Gateway(LoopbackHTTP):
    def __init__(self, *, mode: str, proxy_url: str, verify: ssl.SSLContext, upstream: str) -> None:
        self.mode = mode
        self.upstream = upstream
        self.client = httpx.Client(proxy=proxy_url, verify=verify, trust_env=False, timeout=30)
        self.forwarded: list[dict[str, Any]] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            timeout = 30

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                out = to_chat(body) if gateway.mode == "to-chat" else drop_media(body)
                gateway.forwarded.append(out)
                answer = gateway.client.post(gateway.upstream, json=out)
                self.send_response(answer.status_code)
                self.send_header("content-type", answer.headers.get("content-type", "application/json"))
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self.client.close()
