"""Gemini's OpenAI-compatible door (``POST /v1beta/openai/chat/completions``): its rules and its answers.

https://ai.google.dev/gemini-api/docs/openai. Behind the door is the Gemini API: the Chat request is turned into
``contents`` (system messages out, an assistant message one model content — its text, then one ``functionCall`` per
tool call carrying ``extra_content.google.thought_signature`` as its ``thoughtSignature`` — and each run of ``tool``
messages one user content of ``functionResponse`` parts), and the native rules judge that: the same signature rule
in the current turn (which starts at the last ``user`` message), the same pairing texts, the same Schema for
``tools[k].function.parameters`` (reported at ``tools[0].function_declarations[k].parameters``, QwenLM/qwen-code
#1186). Errors come wrapped in a JSON array, ``[{"error": …}]`` (manthanabc/paws #103, coreply/coreply #18).

Answers: the signature rides on each signed tool call as ``extra_content: {"google": {"thought_signature": …}}``;
streamed (``chat.completion.chunk``, ``data: [DONE]`` last), each call comes whole in its own delta, its ``index``
not incremented for parallel calls (NousResearch/hermes-agent #62937: ``tool_index="same"``; ``"omit"`` leaves it
out, as noho/dayu-agent #45 captured; ``"increment"`` is OpenAI's way), and the signature on a trailing delta right
after the call it belongs to, whose tool-call entry has no index (HKUDS/OpenHarness PR #338:
``signature_delta="trailing"``; ``"inline"`` puts it in the call's own delta, as dayu-agent #45 shows it).
"""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from tests.upstreams.access import as_dict, as_list
from tests.upstreams.gemini_canned import GeminiAnswer
from tests.upstreams.gemini_errors import GeminiError
from tests.upstreams.gemini_rules import check_pairing, check_structure
from tests.upstreams.gemini_schema import check_declarations
from tests.upstreams.gemini_signatures import SignatureLedger, requires_signatures

CREATED = 1_767_225_600
ToolIndex = Literal["same", "omit", "increment"]
SignatureDelta = Literal["trailing", "inline"]


@dataclass
class DoorStyle:
    """How the door streams tool calls (see the module docstring)."""

    tool_index: ToolIndex = "same"
    signature_delta: SignatureDelta = "trailing"


def signature_of(tool_call: Any) -> Any:
    """``tool_call.extra_content.google.thought_signature``, None when absent."""
    return as_dict(as_dict(as_dict(tool_call).get("extra_content")).get("google")).get("thought_signature")


def _user_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    parts = []
    for piece in as_list(content):
        piece = as_dict(piece)
        if piece.get("type") == "text":
            parts.append({"text": piece.get("text")})
        elif piece.get("type") == "image_url":
            url = str(as_dict(piece.get("image_url")).get("url", ""))
            head, _, data = url.partition(",")
            mime = head.removeprefix("data:").split(";")[0] or "image/png"
            parts.append({"inlineData": {"mimeType": mime, "data": data}})
    return parts


def to_contents(messages: list[Any]) -> list[dict[str, Any]]:
    """The native ``contents`` the door makes of Chat ``messages``."""
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for message in messages:
        message = as_dict(message)
        role = message.get("role")
        if role in ("system", "developer"):
            continue
        if role == "assistant":
            parts = [{"text": message["content"]}] if isinstance(message.get("content"), str) and message[
                "content"] else []
            for call in as_list(message.get("tool_calls")):
                fn = as_dict(as_dict(call).get("function"))
                names[str(as_dict(call).get("id"))] = str(fn.get("name"))
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {}
                part: dict[str, Any] = {"functionCall": {"name": fn.get("name"), "args": args}}
                if signature_of(call):
                    part["thoughtSignature"] = signature_of(call)
                parts.append(part)
            contents.append({"role": "model", "parts": parts})
        elif role == "tool":
            response = {"functionResponse": {"name": names.get(str(message.get("tool_call_id")), "unknown"),
                                             "response": {"output": message.get("content")}}}
            last = contents[-1] if contents else None
            if last is not None and last["role"] == "user" and last.get("tool"):
                last["parts"].append(response)
            else:
                contents.append({"role": "user", "parts": [response], "tool": True})
        else:
            contents.append({"role": "user", "parts": _user_parts(message.get("content"))})
    return [{k: v for k, v in c.items() if k != "tool"} for c in contents]


def check(body: dict[str, Any], ledger: SignatureLedger, *, schemas: bool = True) -> GeminiError | None:
    """The door's rejection of a Chat ``body``, or None (``schemas=False``: tool schemas not judged)."""
    if not isinstance(body, dict):
        return None
    decls = []
    for k, tool in enumerate(as_list(body.get("tools"))):
        fn = as_dict(as_dict(tool).get("function"))
        decl = {key: fn[key] for key in ("name", "description", "parameters") if key in fn}
        decls.append((f"tools[0].function_declarations[{k}]", decl))
    contents = to_contents(as_list(body.get("messages")))
    model = str(body.get("model", "")).removeprefix("models/")
    return ((check_declarations(decls) if schemas else None)
            or check_structure(contents, "door")
            or check_pairing(contents)
            or ledger.check(contents, backend="door", model=model))


# ---------------------------------------------------------------------------------------------------- answers
def _tool_calls(answer: GeminiAnswer, ledger: SignatureLedger, model: str) -> list[dict[str, Any]]:
    signs = requires_signatures(model)
    calls = []
    for n, call in enumerate(answer.calls):
        entry: dict[str, Any] = {"function": {"arguments": json.dumps(call.args, separators=(",", ":")),
                                              "name": call.name},
                                 "id": call.id or f"function-call-{uuid.uuid4()}", "type": "function"}
        signature = call.signature
        if signature is None and signs and (n == 0 or answer.sequential):
            signature = ledger.sign_call(call.name, call.args, answer.signer or "gemini")
        if signature:
            entry = {"extra_content": {"google": {"thought_signature": signature}}, **entry}
        calls.append(entry)
    answer.issued[:] = calls
    return calls


def _usage(body: dict[str, Any]) -> dict[str, int]:
    prompt = len(json.dumps(body.get("messages", []))) // 4
    return {"completion_tokens": 12, "prompt_tokens": prompt, "total_tokens": prompt + 12}


def completion(answer: GeminiAnswer, ledger: SignatureLedger, body: dict[str, Any]) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` of ``answer``."""
    model = str(body.get("model", "gemini-mock"))
    message: dict[str, Any] = {"role": "assistant"}
    if answer.calls:
        message["tool_calls"] = _tool_calls(answer, ledger, model)
    else:
        message["content"] = answer.text
    choice = {"finish_reason": "tool_calls" if answer.calls else "stop", "index": 0, "message": message}
    return {"choices": [choice], "created": CREATED, "id": secrets.token_urlsafe(16), "model": model,
            "object": "chat.completion", "usage": _usage(body)}


def chunks(answer: GeminiAnswer, ledger: SignatureLedger, body: dict[str, Any], style: DoorStyle) -> list[dict]:
    """The ``chat.completion.chunk`` objects of ``answer``, in order."""
    model = str(body.get("model", "gemini-mock"))
    head = {"created": CREATED, "id": secrets.token_urlsafe(16), "model": model, "object": "chat.completion.chunk"}
    deltas: list[dict[str, Any]] = []
    for n, call in enumerate(_tool_calls(answer, ledger, model) if answer.calls else []):
        entry = dict(call)
        signature = entry.pop("extra_content", None)
        if style.tool_index != "omit":
            entry["index"] = n if style.tool_index == "increment" else 0
        if signature and style.signature_delta == "inline":
            entry = {"extra_content": signature, **entry}
        deltas.append({"role": "assistant", "tool_calls": [entry]})
        if signature and style.signature_delta == "trailing":
            deltas.append({"tool_calls": [{"extra_content": signature}]})
    if not answer.calls:
        text = answer.text or ""
        size = max(1, -(-len(text) // max(1, answer.chunks)))
        deltas += [{"role": "assistant", "content": text[i:i + size]} for i in range(0, len(text), size)] or [
            {"role": "assistant", "content": ""}]
    out = [{**head, "choices": [{"delta": d, "index": 0}]} for d in deltas]
    finish = "tool_calls" if answer.calls else "stop"
    out.append({**head, "choices": [{"delta": {}, "finish_reason": finish, "index": 0}], "usage": _usage(body)})
    return out


def sse_text(items: list[dict[str, Any]], error: dict[str, Any] | None = None) -> str:
    """OpenAI-style SSE (``data: …\\n\\n``, ``data: [DONE]`` last); an error chunk instead of ``[DONE]``."""
    text = "".join(f"data: {json.dumps(item, separators=(',', ':'))}\n\n" for item in items)
    return text + (f"data: {json.dumps(error, separators=(',', ':'))}\n\n" if error is not None else "data: [DONE]\n\n")
