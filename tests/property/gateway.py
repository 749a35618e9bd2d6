"""What a gateway between the client and the upstream does to tool-result media (the two legs of DESIGN §2).

Each tool result with media is forwarded by the gateway in one of these ways (chosen per result):

- ``dropped``: the media are gone, the text stays (axonhub before PR #2117: an image-only output
  becomes ``""``, text + image becomes the text) — restore-tool-media must put them back;
- ``hoisted``: the text stays and the media move into one user message after the run of results
  (the canonical repair of pi-ai, LiteLLM, sub2api — the gateway already did it) — nothing is missing;
- ``intact``: forwarded as sent.

:func:`to_chat` is the gateway converting a Responses conversation to Chat Completions (axonhub's
mirror path), applying the same per-result choice.
"""

from __future__ import annotations

import json
from typing import Any

MEDIA = ("input_image", "input_file")
FATES = ("dropped", "hoisted", "intact")


def _text(parts: list[dict[str, Any]]) -> str:
    return "\n".join(p["text"] for p in parts if p.get("type") in ("input_text", "text"))


def responses(items: list[dict[str, Any]], fates: dict[str, str]) -> list[dict[str, Any]]:
    """The gateway's Responses ``input``: each output with media treated as ``fates[call_id]`` says."""
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # media hoisted out of the current run of outputs
    for item in items:
        is_output = str(item.get("type", "")).endswith("_call_output")
        if not is_output and pending:
            out.append({"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": "Attached image(s) from tool result:"}, *pending]})
            pending = []
        output = item.get("output")
        fate = fates.get(item.get("call_id", ""), "intact")
        if is_output and isinstance(output, list) and any(p["type"] in MEDIA for p in output) and fate != "intact":
            out.append({**item, "output": _text(output)})
            if fate == "hoisted":  # a file_id-only image cannot go into a user message everywhere: lost
                pending += [p for p in output
                            if p["type"] in MEDIA and (p.get("image_url") or p["type"] != "input_image")]
            continue
        out.append(item)
    if pending:
        out.append({"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "Attached image(s) from tool result:"}, *pending]})
    return out


def messages(items: list[dict[str, Any]], fates: dict[str, str]) -> list[dict[str, Any]]:
    """The gateway's Anthropic ``messages``: tool_result media dropped, or moved to image blocks after the results."""
    out: list[dict[str, Any]] = []
    for message in items:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            out.append(message)
            continue
        blocks: list[dict[str, Any]] = []
        hoisted: list[dict[str, Any]] = []
        for block in content:
            inner = block.get("content")
            fate = fates.get(block.get("tool_use_id", ""), "intact")
            if block.get("type") != "tool_result" or not isinstance(inner, list) or fate == "intact" or not any(
                    b.get("type") in ("image", "document") for b in inner):
                blocks.append(block)
                continue
            text = [b for b in inner if b.get("type") == "text"]
            blocks.append({**block, "content": text} if text else {k: v for k, v in block.items() if k != "content"})
            if fate == "hoisted":
                hoisted += [b for b in inner if b.get("type") in ("image", "document")]
        first_other = next((i for i, b in enumerate(blocks) if b.get("type") != "tool_result"), len(blocks))
        blocks[first_other:first_other] = hoisted  # after all tool_result blocks (they must come first)
        out.append({**message, "content": blocks})
    return out


def _chat_part(p: dict[str, Any]) -> dict[str, Any] | None:
    if p["type"] in ("input_text", "output_text"):
        return {"type": "text", "text": p["text"]}
    if p["type"] == "input_image":
        if not p.get("image_url"):
            return None  # a file_id image: the gateway cannot carry it (axonhub drops it silently)
        detail = {"detail": p["detail"]} if p.get("detail") in ("auto", "low", "high") else {}
        return {"type": "image_url", "image_url": {"url": p["image_url"], **detail}}
    if p["type"] == "input_file":
        file = {"file_data": p["file_data"], "filename": p.get("filename", "file")} if p.get("file_data") else \
            {"file_id": p.get("file_id") or p.get("file_url")}
        return {"type": "file", "file": file}
    return None


def _chat_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [c for c in (_chat_part(p) for p in content) if c is not None]


def to_chat(items: list[dict[str, Any]], fates: dict[str, str]) -> list[dict[str, Any]]:
    """A Responses ``input`` as the Chat ``messages`` a converting gateway sends (reasoning items dropped)."""
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        is_output = kind == "function_call_output"
        if not is_output and pending:
            out.append({"role": "user", "content": [{"type": "text", "text": "Attached image(s) from tool result:"},
                                                    *pending]})
            pending = []
        if kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            if out and out[-1].get("role") == "assistant" and out[-1].get("tool_calls"):
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif is_output:
            output = item["output"]
            fate = fates.get(item["call_id"], "intact")
            if isinstance(output, str):
                content: Any = output
            elif fate == "intact":
                content = _chat_content(output) or ""
            else:
                content = _text(output)
                if fate == "hoisted":
                    pending += [c for c in (_chat_part(p) for p in output if p["type"] in MEDIA) if c is not None]
            out.append({"role": "tool", "tool_call_id": item["call_id"], "content": content})
        elif kind == "reasoning":
            continue
        elif item.get("role") == "assistant":
            out.append({"role": "assistant", "content": _text(item["content"]) if isinstance(item["content"], list)
                        else item["content"]})
        elif "role" in item:
            role = "system" if item["role"] == "developer" else item["role"]
            out.append({"role": role, "content": _chat_content(item["content"])})
    if pending:
        out.append({"role": "user", "content": [{"type": "text", "text": "Attached image(s) from tool result:"},
                                                *pending]})
    return out


def dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
