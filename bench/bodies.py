"""Request bodies for the bench, built from the real captures in ``tests/fixtures`` (read-only).

Every body is compact JSON (as clients send it). Images are real PNGs padded with seeded random bytes
(incompressible, like a PNG's data), so runs are reproducible.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path

import orjson

from tests.images import padded_png

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
MB = 1 << 20


def _fixture(rel: str) -> dict:
    return json.loads((FIXTURES / rel).read_text())


@cache
def data_url(b64_chars: int, seed: int = 0) -> str:
    """A ``data:image/png;base64,`` URL whose payload is ``b64_chars`` long (a multiple of 4): a real PNG (llmfix
    decodes every image once, and the upstreams refuse what is none), padded with seeded random bytes."""
    return "data:image/png;base64," + base64.b64encode(padded_png(b64_chars // 4 * 3, seed, noise=True)).decode()


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


@cache
def screenshot(mb: float = 10) -> bytes:
    """A PNG screenshot of about ``mb`` MB, as a 4K screen gives one: lines of text on white above a photo-like
    (noisy) band, the band sized so the file reaches the size. Seeded: the same bytes every run."""
    from PIL import Image, ImageDraw

    width, height = 3840, 2400
    im = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(im)
    for y in range(0, height, 18):
        draw.text((12, y), f"{y:5d}  def handler(request): return render(request, 'page.html', context)  " * 6,
                  fill=(30, 30, 30))
    band = max(1, min(height, int(mb * MB / (3 * width))))
    im.paste(Image.frombytes("RGB", (width, band), random.Random(7).randbytes(width * band * 3)), (0, height - band))
    buf = __import__("io").BytesIO()
    im.save(buf, "PNG", compress_level=1)
    return buf.getvalue()


def screenshot_variant(png: bytes, i: int) -> bytes:
    """``png`` with a private chunk naming ``i`` after its header: other bytes (another hash), the same pixels,
    so each variant costs llmfix one whole conversion."""
    import struct
    import zlib

    data = f"variant {i}".encode()
    chunk = struct.pack(">I", len(data)) + b"llFx" + data + struct.pack(">I", zlib.crc32(b"llFx" + data))
    return png[:33] + chunk + png[33:]


def claude_screenshot(png: bytes) -> bytes:
    """Claude Code's turn-2 capture with ``png`` as the screenshot its Read tool returned: over Anthropic's 5 MB
    of base64, so fit-images re-encodes it for api.anthropic.com."""
    body = _fixture("claude-code/single_png__turn2.json")
    body["messages"][3]["content"][0]["content"][0]["source"]["data"] = base64.b64encode(png).decode()
    body["stream"] = False
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


# ------------------------------------------------------------------------- history-size sweep ----------
#
# A long agent session resends its whole history on every turn, and nearly every such request needs no
# repair. Each builder below takes one real capture (its system prompt, tools and last tool round trip
# kept as captured) and inserts earlier tool turns shaped the way that client sends them until the body
# reaches ``size`` bytes. Every body is valid for its upstream (api.openai.com / api.anthropic.com): the
# bench checks that llmfix forwards each one byte-identical. Below ~40 KB the capture's long texts are cut
# and its tool list dropped, so a 2 KB body is a 2 KB body.

HISTORY_SIZES = {"2k": 2 * 1024, "200k": 200 * 1024, "1m": MB, "5m": 5 * MB}


def _shrunk(body: dict, size: int) -> dict:
    """The capture itself when ``size`` can hold it; else without its tools and with every long string cut."""
    if len(dumps(body)) <= size:
        return body

    def cut(v: object) -> object:
        if isinstance(v, str):
            return v if v.startswith("data:") or len(v) <= 160 else v[:160]
        if isinstance(v, list):
            return [cut(x) for x in v]
        if isinstance(v, dict):
            return {k: cut(x) for k, x in v.items()}
        return v

    body = {k: cut(v) for k, v in body.items() if k not in ("tools", "client_metadata", "system")}
    return body


def _tool_output(k: int, lines: int = 24) -> str:
    """A grep-like tool output, different in every turn (no two turns share their strings)."""
    return "\n".join(f"src/module_{(k * 31 + j) % 997:03d}.rs:{j * 7 + k}: fn handler_{k}_{j}() -> Result<()> "
                     "{ let cfg = Config::load(&path)?; ... }" for j in range(lines))


def _pad(body: dict, key: str, at: int, size: int, turn: Callable[[int], list[dict]]) -> bytes:
    """``body[key]`` with turns ``turn(0), turn(1), …`` inserted at index ``at`` until ``size`` bytes."""
    items = body[key]
    head, tail = items[:at], items[at:]
    base = len(dumps(body))
    turns: list[dict] = []
    grown = 0
    k = 0
    while base + grown < size:
        new = turn(k)
        grown += sum(len(dumps(t)) + 1 for t in new)
        turns += new
        k += 1
    body = {**body, key: head + turns + tail}
    return dumps(body)


def history_responses(size: int) -> bytes:
    """Codex CLI (Responses, gpt-5.5, to api.openai.com): the turn-2 capture with ``size`` bytes of shell
    turns (reasoning summary, function_call, string output, assistant message) before its last round trip."""
    body = _shrunk(_fixture("codex/turn2_request.json"), size)
    return _pad(body, "input", 4, size, _responses_turn)


def _responses_turn(k: int) -> list[dict]:
    cid = f"call_hist_{k:05d}"
    return [
        {"type": "function_call", "status": "completed", "id": f"fc_hist_{k:05d}", "name": "shell",
         "arguments": json.dumps({"command": ["rg", "-n", f"handler_{k}", "src"], "workdir": "/home/dev/project"}),
         "call_id": cid},
        {"type": "function_call_output", "call_id": cid, "output": _tool_output(k)},
        {"type": "message", "role": "assistant", "id": f"msg_hist_{k:05d}",
         "content": [{"type": "output_text", "text": f"Step {k}: the handlers are in module {k % 997}."}]},
    ]


def history_messages(size: int) -> bytes:
    """Claude Code (Anthropic Messages, to api.anthropic.com): the single_png turn-2 capture with ``size``
    bytes of Bash turns (assistant text + tool_use, user tool_result as a string or text blocks) before its
    last round trip, alternating user/assistant as the API requires."""
    body = _shrunk(_fixture("claude-code/single_png__turn2.json"), size)
    return _pad(body, "messages", 2, size, _messages_turn)


def _messages_turn(k: int) -> list[dict]:
    tid = f"toolu_hist_{k:05d}"
    out = _tool_output(k)
    content: str | list[dict] = out if k % 2 else [{"type": "text", "text": out}]
    return [
        {"role": "assistant", "content": [
            {"type": "text", "text": f"Looking for handler_{k}."},
            {"type": "tool_use", "id": tid, "name": "Bash",
             "input": {"command": f"rg -n handler_{k} src", "description": "Find the handler"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": content}]},
    ]


def history_chat(size: int) -> bytes:
    """Droid / opencode (Chat Completions, to api.openai.com): Droid 0.225.2's single_image turn-2 capture
    with ``size`` bytes of Execute turns (assistant tool_calls, tool message with a string) after the user's
    request, before its last round trip."""
    body = _shrunk(_fixture("droid/0.225.2__single_image__turn2.json"), size)
    return _pad(body, "messages", 3, size, _chat_turn)


def _chat_turn(k: int) -> list[dict]:
    cid = f"call_hist_{k:05d}"
    return [
        {"role": "assistant", "content": f"Looking for handler_{k}.", "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": "Execute", "arguments": json.dumps({"command": f"rg -n handler_{k} src"})}}]},
        {"role": "tool", "tool_call_id": cid, "content": _tool_output(k)},
    ]


def history_images(size: int, images: int = 3, text: int = 200 * 1024) -> bytes:
    """Codex CLI (Responses, to api.openai.com): a ``text``-byte shell history and ``images`` view_image round
    trips, each output an ``input_image`` of about (``size`` − ``text``) / ``images`` bytes; the capture's own
    last round trip ends it. No repair: OpenAI takes images in function_call_output."""
    body = orjson.loads(history_responses(text))
    each = max(4, (size - len(dumps(body))) // images // 4 * 4)
    for n in range(images):
        cid = f"call_hist_img_{n}"
        body["input"][4:4] = [
            {"type": "function_call", "status": "completed", "id": f"fc_hist_img_{n}", "name": "view_image",
             "arguments": json.dumps({"path": f"/home/dev/project/screen_{n}.png"}), "call_id": cid},
            {"type": "function_call_output", "call_id": cid,
             "output": [{"type": "input_image", "image_url": data_url(each, seed=100 + n), "detail": "original"}]},
        ]
    return dumps(body)


HISTORIES: dict[str, tuple[str, str, Callable[[int], bytes]]] = {
    # key: (dialect, host, builder)
    "responses": ("responses", "api.openai.com", history_responses),
    "messages": ("messages", "api.anthropic.com", history_messages),
    "chat": ("chat", "api.openai.com", history_chat),
}


NEXT_TURN: dict[str, Callable[[int], list[dict]]] = {
    # what a session appends to its history each turn: a tool call and its result
    "responses": lambda k: _responses_turn(k)[:2],
    "messages": _messages_turn,
    "chat": _chat_turn,
}


class Session:
    """Requests of agent sessions whose history is ``base``: request ``i`` is ``base`` with turns appended at the
    end of its message array, as a client resends it, each request extending the one before by one tool round
    trip. So that a cell's body size stays put, a session ends when it has grown by ``growth`` (at least 16
    turns) and the next one starts again from ``base`` (new call ids). A session's earlier turns come first:
    the warm-ups (``i < 0``, up to :data:`EARLIER`) are request 0's own session, as llmfix sees a long session
    that grew to this size. A new session's first request (:meth:`starts`) is llmfix's first sight of it: a
    bench measures those apart (in a real session the first sight is at its small beginning, not at 5 MB).

    Bodies under ``small`` bytes (llmfix parses them whole every time: no prefix to extend) grow by at most 4
    turns and have no first sight to set apart.

    Messages (Claude Code): the one ``cache_control`` breakpoint among the messages sits on the last block of
    the last message, as Claude Code puts it (capture ``claude-code/single_png__turn2.json``), so it moves
    on every turn: request N + 1 is request N with its last message changed (the marker gone) plus the
    new turn, not a byte-for-byte append."""

    EARLIER = 8

    def __init__(self, dialect: str, base: bytes, growth: float = 0.1, small: int = 16 * 1024) -> None:
        body = orjson.loads(base)
        self.key = "input" if dialect == "responses" else "messages"
        self.body, self.items = body, body[self.key]
        self.rolling = dialect == "messages"
        if self.rolling:
            self.items = [_unmarked(m) for m in self.items]
        self.turn = NEXT_TURN[dialect]
        per_turn = sum(len(dumps(t)) + 1 for t in self.turn(0))
        self.small = len(base) < small
        self.offset = 0 if self.small else self.EARLIER
        self.length = 4 if self.small else max(2 * self.EARLIER, int(len(base) * growth / per_turn))

    def _at(self, i: int) -> tuple[int, int]:
        if i < 0 and self.small:  # a session of their own
            return 10_000 - i, 0
        return divmod(i + self.offset, self.length)

    def starts(self, i: int) -> bool:
        """Whether request ``i`` (≥ 0) is the first of a session (llmfix cannot extend a request it saw)."""
        return not self.small and i >= 0 and self._at(i)[1] == 0

    def __call__(self, i: int) -> bytes:
        s, k = self._at(i)
        new = [t for j in range(k + 1) for t in self.turn(1_000_000 * (s + 1) + j)]
        items = self.items + new
        if self.rolling:
            items[-1] = _marked(items[-1])
        return dumps({**self.body, self.key: items})


def _unmarked(message: dict) -> dict:
    content = message.get("content")
    if not isinstance(content, list) or not any("cache_control" in b for b in content):
        return message
    return {**message, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in content]}


def _marked(message: dict) -> dict:
    content = message["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    return {**message, "content": [*content[:-1], {**content[-1], "cache_control": {"type": "ephemeral"}}]}


def session(dialect: str, base: bytes, growth: float = 0.1) -> Session:
    return Session(dialect, base, growth)
