"""Hypothesis strategies: multi-turn conversations in the three dialects, as real clients send them.

A :class:`Conversation` is a list of *turns* (``chunks``): turn 0 is the preamble (system/developer
text and the user's first message), every later turn starts with the model's answer (an assistant
message, or Responses reasoning + call items) followed by what the client adds (tool results, user
messages). Turn N's request is the concatenation of turns 0..N — exactly how a client resends its history.

Only shapes llmfix claims to repair, or valid ones, are generated (per upstream, see :data:`HOSTS`):

- Chat: tool runs of 1–5 calls whose results are strings, text-part arrays, or arrays with images,
  files and audio (B4, B5); Droid's interleaving (a user image message after each tool result, the
  assistant's ``tool_calls`` trimmed to the unbroken run, B2); declarations missing at random; the
  calls known or not to llmfix's memory.
- Responses: function and custom tool calls, outputs as strings or arrays of text/image/file parts
  (B3), images by URL or by ``file_id`` only (xAI cannot take those: placeholder), reasoning items,
  calls grouped before their outputs or paired with them, pi-ai's per-output user image messages.
- Messages: tool_use/tool_result with text, image and document blocks, thinking blocks (valid; llmfix
  must leave them byte-identical).

Never generated here (broken tool histories — calls without results, orphans, duplicate ids,
text before Anthropic results — are made from these by :mod:`tests.property.breakage`), and never
generated at all because llmfix does not claim to repair them: images outside tool results for an
upstream that takes none (DeepSeek), ``custom_tool_call_output`` or a ``file_id``-only image outside
tool outputs for xAI.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from llmfix.memory.store import ToolCall
from tests.images import b64, image_bytes

# ---------------------------------------------------------------------------------------------- hosts


@dataclass(frozen=True)
class Host:
    name: str
    rules: str  # the rule set of tests/upstreams/rules.py
    models: tuple[str | None, ...]
    user_media: bool = True  # may non-tool messages carry images (DeepSeek: no)
    custom_tools: bool = True  # may the Responses input carry custom_tool_call(_output) items (xAI: no)


HOSTS: dict[str, Host] = {
    "openai": Host("api.openai.com", "openai", ("gpt-4.1", "gpt-5", "o3-mini")),
    "xai": Host("api.x.ai", "xai", ("grok-4.3", "grok-code-fast-1"), custom_tools=False),
    "deepseek": Host("api.deepseek.com", "deepseek", ("deepseek-chat", "deepseek-reasoner"), user_media=False),
    "anthropic": Host("api.anthropic.com", "anthropic", ("claude-sonnet-4-5",)),
    "openrouter": Host("openrouter.ai", "spec", ("openai/gpt-4.1", "x-ai/grok-code-fast-1", "deepseek/deepseek-chat")),
    "spec": Host("llm.internal.example", "spec", ("mock-model", None)),
}
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
KEYS = {"chat": "messages", "responses": "input", "messages": "messages"}


@dataclass
class Conversation:
    dialect: str
    host: Host
    model: str | None
    chunks: list[list[dict[str, Any]]]
    top: dict[str, Any]  # the other top-level fields, in order; the message list goes first
    calls: list[ToolCall] = field(default_factory=list)  # every call the model issued (for a memory that knows them)
    pretty: bool = False

    @property
    def key(self) -> str:
        return KEYS[self.dialect]

    def body(self, turns: int | None = None) -> dict[str, Any]:
        chunks = self.chunks if turns is None else self.chunks[:turns]
        items = [item for chunk in chunks for item in chunk]
        head = {"model": self.model} if self.model is not None else {}
        return {**head, self.key: items, **self.top}

    def raw(self, turns: int | None = None) -> bytes:
        body = self.body(turns)
        if self.pretty:
            return json.dumps(body, indent=2, ensure_ascii=False).encode()
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


# ---------------------------------------------------------------------------------------------- leaves

# text with quotes, newlines, non-ASCII and astral characters; no lone surrogates (not valid UTF-8)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=16)
message_texts = texts.map(lambda t: t if t.strip() else f"{t}.")
"""Texts of Anthropic messages: never blank (Anthropic refuses a blank text block; drop-empty-text drops one)."""
words = st.text("abcdefghij .-_/", min_size=1, max_size=10)
tool_names = st.sampled_from(["Read", "read", "view_image", "Bash", "apply_patch", "screenshot"])
payloads = st.binary(min_size=1, max_size=24).map(lambda b: base64.b64encode(b).decode())


def data_url(mime: str) -> st.SearchStrategy[str]:
    return payloads.map(lambda p: f"data:{mime};base64,{p}")


def image_payload(fmt: str) -> st.SearchStrategy[str]:
    """The base64 of a real (tiny) image of ``fmt``: the strict upstreams decode every image, as the real ones do.
    One in eight is too wide for Anthropic (8200 px), one in eight truncated (no upstream can decode it): what
    fit-images exists for, mixed into every history."""
    fits = st.integers(0, 4095).map(lambda seed: b64(image_bytes(fmt, seed)))
    wide = st.integers(0, 15).map(lambda seed: b64(image_bytes(fmt, seed, (8200, 2))))
    broken = st.integers(0, 15).map(lambda seed: b64(image_bytes(fmt, seed)[: 10 + seed]))
    return st.sampled_from(["fits"] * 6 + ["wide", "broken"]).flatmap(
        lambda kind: {"fits": fits, "wide": wide, "broken": broken}[kind])


def image_data_url(fmt: str) -> st.SearchStrategy[str]:
    return image_payload(fmt).map(lambda p: f"data:image/{fmt};base64,{p}")


tokens = st.binary(min_size=1, max_size=8).map(bytes.hex)  # URL- and id-safe
http_image_urls = tokens.map(lambda t: f"https://img.example/{t}.png")
image_urls = st.one_of(image_data_url("png"), image_data_url("jpeg"), http_image_urls)


# ---------------------------------------------------------------------------------------------- chat

def chat_image() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda url, detail: {"type": "image_url", "image_url": {"url": url, **({"detail": detail} if detail else {})}},
        image_urls, st.sampled_from([None, "auto", "low", "high"]),
    )


chat_file = st.builds(lambda u, n: {"type": "file", "file": {"file_data": u, "filename": f"{n}.pdf"}},
                      data_url("application/pdf"), st.sampled_from(["a", "report", "x y"]))
chat_audio = st.builds(lambda p: {"type": "input_audio", "input_audio": {"data": p, "format": "wav"}}, payloads)


def chat_text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


# what a tool result carries: ("str", text) | ("parts", [parts]); media only in "parts"
@st.composite
def chat_tool_result(draw: Any) -> tuple[str, list[dict[str, Any]]]:
    kind = draw(st.sampled_from(["str", "str", "texts", "text+image", "image", "images", "text+file", "audio",
                                 "empty"]))
    text = draw(texts)
    if kind == "str":
        return "str", [chat_text_part(text)]
    if kind == "empty":
        return "str", [chat_text_part("")]
    if kind == "texts":
        return "parts", [chat_text_part(t) for t in draw(st.lists(texts, min_size=1, max_size=3))]
    if kind == "text+image":
        return "parts", [chat_text_part(text), draw(chat_image())]
    if kind == "image":
        return "parts", [draw(chat_image())]
    if kind == "images":
        return "parts", [chat_text_part(text), *draw(st.lists(chat_image(), min_size=2, max_size=3))]
    if kind == "text+file":
        return "parts", [chat_text_part(text), draw(chat_file)]
    return "parts", [chat_text_part(text), draw(chat_audio)]


def _chat_user(draw: Any, host: Host) -> dict[str, Any]:
    if host.user_media and draw(st.booleans()):
        return {"role": "user", "content": [chat_text_part(draw(texts)), draw(chat_image())]}
    if draw(st.booleans()):
        return {"role": "user", "content": [chat_text_part(t) for t in draw(st.lists(texts, min_size=1, max_size=2))]}
    return {"role": "user", "content": draw(texts)}


@st.composite
def chat_tool_turn(draw: Any, turn: int, host: Host) -> tuple[list[dict[str, Any]], list[ToolCall]]:
    k = draw(st.integers(1, 5))
    calls = [
        {"id": f"call_{turn}_{i}_{draw(st.sampled_from(['a', 'Zq', 'x9']))}", "type": "function",
         "function": {"name": draw(tool_names), "arguments": json.dumps({"path": draw(words)})}}
        for i in range(k)
    ]
    results = [draw(chat_tool_result()) for _ in range(k)]
    style = draw(st.sampled_from(["inline", "droid"])) if host.user_media else "inline"
    messages: list[dict[str, Any]] = []
    cut: int | None = None  # index of the first tool message followed by an interleaved user message
    for i, (call, (kind, parts)) in enumerate(zip(calls, results, strict=True)):
        media = [p for p in parts if p["type"] != "text"]
        if style == "droid":
            # Droid: the tool message keeps the text; its media follow in a user message of their own
            text = "\n".join(p["text"] for p in parts if p["type"] == "text")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
            if media:
                messages.append({"role": "user",
                                 "content": [chat_text_part("Image content from tool result:"), *media]})
                if cut is None:
                    cut = i
        elif kind == "str":
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": parts[0]["text"]})
        else:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": parts})
    declared = list(calls)
    if style == "droid" and cut is not None and draw(st.booleans()):
        declared = calls[: cut + 1]  # Droid trims tool_calls to the unbroken run of tool messages
    elif draw(st.integers(0, 3)) == 0:
        keep = draw(st.lists(st.booleans(), min_size=k, max_size=k))
        declared = [c for c, kept in zip(calls, keep, strict=True) if kept]
    content = draw(st.one_of(st.none(), texts)) if declared else draw(texts)
    assistant: dict[str, Any] = {"role": "assistant", "content": content}
    if declared:
        assistant["tool_calls"] = declared
    chunk = [assistant, *messages]
    if draw(st.integers(0, 3)) == 0:
        chunk.append(_chat_user(draw, host))
    known = [ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"], "chat") for c in calls]
    return chunk, known


@st.composite
def chat_conversation(draw: Any, host_name: str) -> Conversation:
    host = HOSTS[host_name]
    preamble: list[dict[str, Any]] = []
    if draw(st.booleans()):
        preamble.append({"role": "system", "content": draw(texts)})
    preamble.append(_chat_user(draw, host))
    chunks = [preamble]
    calls: list[ToolCall] = []
    for turn in range(1, draw(st.integers(1, 3)) + 1):
        if draw(st.integers(0, 3)) == 0:
            chunks.append([{"role": "assistant", "content": draw(texts)}, _chat_user(draw, host)])
        else:
            chunk, known = draw(chat_tool_turn(turn, host))
            chunks.append(chunk)
            calls.extend(known)
    top = draw(st.sampled_from([{}, {"stream": True}, {"stream": True, "stream_options": {"include_usage": True},
                                                        "max_tokens": 4096, "temperature": 0.2}]))
    return Conversation("chat", host, draw(st.sampled_from(host.models)), chunks, top, calls, draw(st.booleans()))


# ---------------------------------------------------------------------------------------------- responses

def responses_image(host: Host, in_tool: bool) -> st.SearchStrategy[dict[str, Any]]:
    by_url = st.builds(lambda u, d: {"type": "input_image", "image_url": u, "detail": d},
                       image_urls, st.sampled_from(["auto", "low", "high", "original"]))
    by_id = st.builds(lambda t: {"type": "input_image", "file_id": f"file-{t}", "detail": "auto"}, tokens)
    # a file_id-only image outside a tool output would be rejected by xAI and llmfix does not claim that
    return st.one_of(by_url, by_id) if in_tool or host.rules != "xai" else by_url


responses_file = st.one_of(
    st.builds(lambda u: {"type": "input_file", "file_data": u, "filename": "doc.pdf"}, data_url("application/pdf")),
    st.builds(lambda t: {"type": "input_file", "file_id": f"file-{t}"}, tokens),
)


@st.composite
def responses_output(draw: Any, host: Host) -> str | list[dict[str, Any]]:
    kind = draw(st.sampled_from(["str", "str", "text", "text+image", "image", "images", "text+file", "empty"]))
    text = draw(texts)
    if kind == "str":
        return text
    if kind == "empty":
        return ""
    if kind == "text":
        return [{"type": "input_text", "text": text}]
    if kind == "text+image":
        return [{"type": "input_text", "text": text}, draw(responses_image(host, True))]
    if kind == "image":
        return [draw(responses_image(host, True))]
    if kind == "images":
        return [draw(responses_image(host, True)) for _ in range(draw(st.integers(2, 3)))]
    return [{"type": "input_text", "text": text}, draw(responses_file)]


def _responses_user(draw: Any, host: Host) -> dict[str, Any]:
    shape = draw(st.sampled_from(["str", "parts", "media"] if host.user_media else ["str", "parts"]))
    if shape == "str":
        return {"role": "user", "content": draw(texts)}
    content = [{"type": "input_text", "text": draw(texts)}]
    if shape == "media":
        content.append(draw(responses_image(host, False)))
    typed = {"type": "message"} if draw(st.booleans()) else {}
    return {**typed, "role": "user", "content": content}


def _assistant_message(draw: Any, turn: int) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": f"msg_{turn}", "status": "completed",
            "content": [{"type": "output_text", "text": draw(texts), "annotations": []}]}


@st.composite
def responses_tool_turn(draw: Any, turn: int, host: Host) -> tuple[list[dict[str, Any]], list[ToolCall]]:
    k = draw(st.integers(1, 5))
    items_calls: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    known: list[ToolCall] = []
    for i in range(k):
        call_id = f"call_{turn}_{i}"
        custom = host.custom_tools and draw(st.integers(0, 4)) == 0
        name = draw(tool_names)
        args = json.dumps({"path": draw(words)})
        if custom:
            call = {"type": "custom_tool_call", "call_id": call_id, "name": "apply_patch", "input": draw(texts)}
            known.append(ToolCall(call_id, "apply_patch", call["input"], "responses", "custom"))
        else:
            call = {"type": "function_call", "call_id": call_id, "name": name, "arguments": args}
            if draw(st.booleans()):
                call = {"type": "function_call", "id": f"fc_{turn}_{i}", "call_id": call_id, "name": name,
                        "arguments": args, "status": "completed"}
            known.append(ToolCall(call_id, name, args, "responses"))
        items_calls.append(call)
        output_type = "custom_tool_call_output" if custom else "function_call_output"
        outputs.append({"type": output_type, "call_id": call_id, "output": draw(responses_output(host))})
    layout = draw(st.sampled_from(["grouped", "paired", "pi"]))
    chunk: list[dict[str, Any]] = []
    if draw(st.booleans()):
        chunk.append({"type": "reasoning", "id": f"rs_{turn}",
                      "summary": [{"type": "summary_text", "text": draw(texts)}],
                      "encrypted_content": "gAAAAB" + draw(payloads)})
    if layout == "grouped":
        chunk += [*items_calls, *outputs]
    elif layout == "paired":
        for call, out in zip(items_calls, outputs, strict=True):
            chunk += [call, out]
    else:  # pi-ai's openai-responses-shared: a string output, then its images in a user message right after
        for call, out in zip(items_calls, outputs, strict=True):
            parts = out["output"] if isinstance(out["output"], list) else []
            text = "\n".join(p["text"] for p in parts if p["type"] == "input_text")
            media = [p for p in parts if p["type"] != "input_text" and p.get("image_url")]
            chunk += [call, {**out, "output": text if isinstance(out["output"], list) else out["output"]}]
            if media and host.user_media:
                chunk.append({"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": "Attached image(s) from tool result:"},
                                          *media]})
    if draw(st.integers(0, 3)) == 0:
        chunk.append(_responses_user(draw, host))
    return chunk, known


@st.composite
def responses_conversation(draw: Any, host_name: str) -> Conversation:
    host = HOSTS[host_name]
    preamble: list[dict[str, Any]] = []
    if draw(st.booleans()):
        preamble.append({"role": "developer", "content": draw(texts)})
    preamble.append(_responses_user(draw, host))
    chunks = [preamble]
    calls: list[ToolCall] = []
    for turn in range(1, draw(st.integers(1, 3)) + 1):
        if draw(st.integers(0, 3)) == 0:
            chunks.append([_assistant_message(draw, turn), _responses_user(draw, host)])
        else:
            chunk, known = draw(responses_tool_turn(turn, host))
            chunks.append(chunk)
            calls.extend(known)
    top = draw(st.sampled_from([{}, {"stream": True, "store": False},
                                {"stream": True, "store": False, "reasoning": {"effort": "high"},
                                 "include": ["reasoning.encrypted_content"]}]))
    return Conversation("responses", host, draw(st.sampled_from(host.models)), chunks, top, calls,
                        draw(st.booleans()))


# ---------------------------------------------------------------------------------------------- messages

anthropic_image = st.one_of(
    st.sampled_from(["png", "jpeg", "webp"]).flatmap(lambda f: image_payload(f).map(
        lambda p: {"type": "image", "source": {"type": "base64", "media_type": f"image/{f}", "data": p}})),
    st.builds(lambda u: {"type": "image", "source": {"type": "url", "url": u}}, http_image_urls),
)
anthropic_document = st.builds(
    lambda p: {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": p}}, payloads)


@st.composite
def anthropic_result_content(draw: Any) -> Any:
    kind = draw(st.sampled_from(["str", "text", "text+image", "image", "images", "document", "none"]))
    text = {"type": "text", "text": draw(texts)}
    if kind == "str":
        return draw(texts)
    if kind == "text":
        return [text]
    if kind == "text+image":
        return [text, draw(anthropic_image)]
    if kind == "image":
        return [draw(anthropic_image)]
    if kind == "images":
        return [draw(anthropic_image), draw(anthropic_image)]
    if kind == "document":
        return [text, draw(anthropic_document)]
    return None


def _anthropic_user(draw: Any) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"role": "user", "content": [{"type": "text", "text": draw(message_texts)}, draw(anthropic_image)]}
    return {"role": "user", "content": draw(message_texts)}


@st.composite
def messages_tool_turn(draw: Any, turn: int) -> tuple[list[dict[str, Any]], list[ToolCall]]:
    k = draw(st.integers(1, 5))
    blocks: list[dict[str, Any]] = []
    if draw(st.booleans()):
        blocks.append({"type": "thinking", "thinking": draw(texts), "signature": "sig" + draw(payloads)})
    if draw(st.booleans()):
        blocks.append({"type": "text", "text": draw(message_texts)})
    results: list[dict[str, Any]] = []
    known: list[ToolCall] = []
    for i in range(k):
        tool_id = f"toolu_{turn}_{i}"
        tool_input = {"file_path": draw(words)}
        blocks.append({"type": "tool_use", "id": tool_id, "name": draw(tool_names), "input": tool_input})
        known.append(ToolCall(tool_id, blocks[-1]["name"], json.dumps(tool_input), "messages"))
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id}
        content = draw(anthropic_result_content())
        if content is not None:
            result["content"] = content
        if draw(st.integers(0, 4)) == 0:
            result["is_error"] = True
        results.append(result)
    if draw(st.booleans()):
        results.append({"type": "text", "text": draw(message_texts)})  # text may follow the tool_result blocks
    if draw(st.booleans()):
        results[-1] = {**results[-1], "cache_control": {"type": "ephemeral"}}
    return [{"role": "assistant", "content": blocks}, {"role": "user", "content": results}], known


@st.composite
def messages_conversation(draw: Any, host_name: str) -> Conversation:
    host = HOSTS[host_name]
    chunks = [[_anthropic_user(draw)]]
    calls: list[ToolCall] = []
    for turn in range(1, draw(st.integers(1, 3)) + 1):
        if draw(st.integers(0, 3)) == 0:
            chunks.append([{"role": "assistant", "content": [{"type": "text", "text": draw(message_texts)}]},
                           _anthropic_user(draw)])
        else:
            chunk, known = draw(messages_tool_turn(turn))
            chunks.append(chunk)
            calls.extend(known)
    top = {"system": draw(texts), "max_tokens": 4096, **draw(st.sampled_from([{}, {"stream": True}]))}
    model = draw(st.sampled_from(HOSTS["anthropic"].models + host.models))
    return Conversation("messages", host, model, chunks, top, calls, draw(st.booleans()))


CONVERSATIONS = {"chat": chat_conversation, "responses": responses_conversation, "messages": messages_conversation}
