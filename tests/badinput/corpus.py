"""Hostile and broken request bodies on routed LLM paths, as data: each must pass unchanged with ONE warning.

A :class:`Case` names a body (built lazily: the big ones — 50 MB, 70 MB, a million elements, a
decompression bomb — are generated when a test asks for them, never stored), the headers it is sent
with, the route (host and path, always one llmfix handles), and a regex of the reason the warning must
give. ``known`` marks cases where llmfix does not (yet) keep the promise; the tests run them as
``xfail(strict=True)`` with that text, so a fix makes them fail loudly until the mark is removed.

Every body is deterministic (seeded), so a failure reproduces.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import brotli

try:
    from compression import zstd  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python < 3.14
    from backports import zstd  # type: ignore[no-redef]

from tests.upstreams.captures import capture_bytes

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
MESSAGES = "/v1/messages"
MB = 1024 * 1024

@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], bytes]
    reason: str  # regex the single warning must match
    path: str = CHAT
    host: str = "api.openai.com"
    headers: dict[str, str] = field(default_factory=dict)
    known: str | None = None  # why llmfix breaks the promise here (xfail strict)
    e2e: bool = False  # also sent through the real mitmdump
    big: bool = False

    def body(self) -> bytes:
        """The body; big ones are built afresh each time (a few seconds, never kept in memory)."""
        return self.make() if self.big else _built(self.name)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "application/json")


def _j(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _tool_run(**tool: object) -> list[dict[str, object]]:
    """An assistant call and its tool message, with ``tool`` overriding fields of the tool message."""
    return [
        {"role": "user", "content": "read a.png"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.png", **tool},
    ]


def _chat(messages: object, **extra: object) -> bytes:
    return _j({"model": "gpt-4.1", "messages": messages, **extra})


def _xai() -> bytes:
    return capture_bytes("pi-ai/xai_responses.json")


def _png_base64(size: int, seed: int = 6) -> str:
    """``size`` bytes of seeded noise, base64: a stand-in for a screenshot that does not compress."""
    return base64.b64encode(random.Random(seed).randbytes(size)).decode()


def _big_chat(size: int) -> bytes:
    """A Chat request whose tool message carries one image of about ``size`` bytes (hoist-tool-media applies)."""
    url = "data:image/png;base64," + _png_base64(size * 3 // 4)
    parts = [{"type": "text", "text": "a.png"}, {"type": "image_url", "image_url": {"url": url}}]
    return _chat(_tool_run(content=parts))


def _big_xai(size: int) -> bytes:
    body = json.loads(_xai())
    body["input"][3]["output"][1]["image_url"] = "data:image/png;base64," + _png_base64(size * 3 // 4)
    return _j(body)


def _zstd_streamed(data: bytes) -> bytes:
    """A zstd frame written by a streaming compressor: no content size in its header."""
    c = zstd.ZstdCompressor()
    return c.compress(data) + c.flush()


def _bomb(size: int) -> bytes:
    """A gzip body of a few hundred KB that decodes to a ``size``-byte valid-looking Chat request."""
    prefix = b'{"model":"gpt-4.1","messages":[{"role":"tool","tool_call_id":"c","content":"'
    suffix = b'"}]}'
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"A" * MB
    out = [c.compress(prefix)]
    for _ in range(size // MB):
        out.append(c.compress(chunk))
    out.append(c.compress(suffix))
    out.append(c.flush())
    return b"".join(out)


def _million(item: bytes, head: bytes = b"") -> bytes:
    return b'{"model":"gpt-4.1",' + head + b'"messages":[' + b",".join([item] * 1_000_000) + b"]}"


CASES: list[Case] = [
    # ---------------------------------------------------------------- not JSON
    Case("json-trailing-comma", lambda: _chat(_tool_run())[:-2] + b",]}", "not valid JSON"),
    Case("json-truncated-half", lambda: _xai()[: len(_xai()) // 2], "not a JSON object", RESPONSES, "api.x.ai",
         e2e=True),
    Case("json-unterminated-string", lambda: b'{"model":"gpt-4.1","messages":[{"role":"tool","content":"abc}]}',
         "not valid JSON"),
    Case("json-nan-literal", lambda: b'{"messages":[{"role":"tool","tool_call_id":"c","content":NaN}]}',
         "not valid JSON"),
    Case("json-number-out-of-range", lambda: b'{"messages":[],"temperature":1' + b"0" * 5000 + b"}",
         "not valid JSON"),
    Case("json-lone-surrogate-escape", lambda: b'{"messages":[{"role":"tool","tool_call_id":"c","content":"\\ud800"}]}',
         "not valid JSON"),
    Case("json-duplicate-key-last-wins", lambda: b'{"messages":[],"messages":5}', "'messages' is a JSON int"),
    Case("json-single-quotes", lambda: b"{'messages': [{'role': 'tool'}]}", "not valid JSON"),
    # ---------------------------------------------------------------- encodings
    Case("gzip-truncated", lambda: gzip.compress(_xai())[:-40], "cannot decode Content-Encoding 'gzip'.*truncated",
         RESPONSES, "api.x.ai", {"content-encoding": "gzip"}, e2e=True),
    Case("gzip-garbage", lambda: b"\x1f\x8b\x08\x00" + bytes(range(256)), "cannot decode Content-Encoding 'gzip'",
         RESPONSES, "api.x.ai", {"content-encoding": "gzip"}),
    Case("gzip-header-on-plain-json", _xai, "cannot decode Content-Encoding 'gzip'", RESPONSES, "api.x.ai",
         {"content-encoding": "gzip"}),
    Case("gzip-of-invalid-json", lambda: gzip.compress(b'{"input": [1, 2'), "not a JSON object", RESPONSES, "api.x.ai",
         {"content-encoding": "gzip"}),
    Case("zstd-no-content-size-invalid-json", lambda: _zstd_streamed(_xai()[:-3] + b"!!}"), "not valid JSON",
         RESPONSES, "api.x.ai", {"content-encoding": "zstd"}, e2e=True),
    Case("zstd-truncated-frame", lambda: _zstd_streamed(_xai())[:-12], "cannot decode Content-Encoding 'zstd'",
         RESPONSES, "api.x.ai", {"content-encoding": "zstd"}),
    Case("br-truncated", lambda: brotli.compress(_xai())[:-10], "cannot decode Content-Encoding 'br'", RESPONSES,
         "api.x.ai", {"content-encoding": "br"}),
    Case("deflate-garbage", lambda: b"\x78\x9c" + bytes(64), "cannot decode Content-Encoding 'deflate'", RESPONSES,
         "api.x.ai", {"content-encoding": "deflate"}),
    Case("stacked-gzip-br", lambda: brotli.compress(gzip.compress(_xai())), "stacked Content-Encoding 'gzip, br'",
         RESPONSES, "api.x.ai", {"content-encoding": "gzip, br"}, e2e=True),
    Case("unknown-encoding-snappy", _xai, "unknown Content-Encoding 'snappy'", RESPONSES, "api.x.ai",
         {"content-encoding": "snappy"}),
    # ---------------------------------------------------------------- wrong types, top level
    Case("top-level-array", lambda: _j(_tool_run()), "not a JSON object"),
    Case("top-level-number", lambda: b"42", "not a JSON object", e2e=True),
    Case("top-level-string", lambda: b'"messages"', "not a JSON object"),
    Case("top-level-null", lambda: b"null", "not a JSON object"),
    Case("messages-not-a-list", lambda: _j({"model": "gpt-4.1", "messages": {"role": "tool", "content": "x"}}),
         "'messages' is a JSON dict, not an array", e2e=True),
    Case("messages-missing", lambda: _j({"model": "gpt-4.1", "prompt": "tool"}), "no 'messages' field"),
    Case("input-a-number", lambda: _j({"model": "grok-4.3", "input": 5}), "'input' is a JSON int", RESPONSES,
         "api.x.ai"),
    Case("anthropic-messages-a-string", lambda: _j({"model": "claude-sonnet-4-5", "messages": "tool_result"}),
         "'messages' is a JSON str", MESSAGES, "api.anthropic.com"),
    # ---------------------------------------------------------------- wrong types, inside a tool run
    Case("message-not-an-object-in-tool-run", lambda: _chat([*_tool_run(), "hello"]),
         r"unexpected shape at messages\[3\]"),
    Case("role-a-number-in-tool-run", lambda: _chat([*_tool_run(), {"role": 7, "content": "x"}]),
         r"unexpected shape at messages\[3\]\.role", e2e=True),
    Case("tool-content-a-number", lambda: _chat(_tool_run(content=3)), r"messages\[2\]\.content"),
    Case("tool-content-parts-wrong-types", lambda: _chat(_tool_run(content=[1, "x"])), r"messages\[2\]\.content"),
    Case("tool-image-part-without-url", lambda: _chat(_tool_run(content=[{"type": "image_url"}])),
         r"messages\[2\]\.content\[0\]: Field required"),
    Case("tool-calls-not-a-list", lambda: _chat([{"role": "assistant", "tool_calls": {"id": "c"}},
                                                 {"role": "tool", "tool_call_id": "c", "content": "x"}]),
         r"messages\[0\]\.tool_calls"),
    Case("tool-call-arguments-an-object",
         lambda: _chat([{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}]},
                        {"role": "tool", "tool_call_id": "c", "content": "x"}]),
         r"messages\[0\]\.tool_calls\[0\]\.function\.arguments"),
    Case("responses-output-a-number",
         lambda: _j({"input": [{"type": "function_call_output", "call_id": "c", "output": 5}]}),
         r"input\[0\]\.output", RESPONSES, "api.x.ai", e2e=True),
    Case("responses-output-part-image-url-a-number",
         lambda: _j({"input": [{"type": "function_call_output", "call_id": "c",
                                "output": [{"type": "input_image", "image_url": 5}]}]}),
         r"input\[0\]\.output\[0\]\.image_url: Input should be a valid string", RESPONSES, "api.x.ai"),
    Case("responses-item-type-a-list", lambda: _j({"model": "gpt-4.1", "input": [{"type": ["function_call"]}]}),
         r"input\[0\]", RESPONSES, e2e=True),
    Case("responses-call-id-a-number",
         lambda: _j({"input": [{"type": "function_call_output", "call_id": 5, "output": "x"}]}),
         r"input\[0\]\.call_id", RESPONSES, "api.x.ai"),
    Case("anthropic-tool-use-id-a-number",
         lambda: _j({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": 5}]}]}),
         r"messages\[0\]\.content\[0\]\.tool_use_id", MESSAGES, "api.anthropic.com"),
    # ---------------------------------------------------------------- wrong types, no tool in sight (finding)
    Case("message-not-an-object", lambda: _chat(["hello"]), r"unexpected shape at messages\[0\]"),
    Case("role-a-number", lambda: _chat([{"role": 7, "content": "hi"}]), r"messages\[0\]\.role", e2e=True),
    Case("user-content-a-number", lambda: _chat([{"role": "user", "content": 3}]), r"messages\[0\]\.content"),
    Case("responses-item-a-number", lambda: _j({"model": "grok-4.3", "input": [1, 2]}), r"input\[0\]", RESPONSES,
         "api.x.ai"),
    # ---------------------------------------------------------------- empty, binary, not UTF-8
    Case("empty-body", lambda: b"", "empty body", e2e=True),
    Case("whitespace-body", lambda: b" \r\n\t ", "not a JSON object"),
    Case("binary-noise", lambda: random.Random(1).randbytes(4096), "not a JSON object", e2e=True),
    Case("binary-framed-as-object", lambda: b"{" + random.Random(2).randbytes(4096) + b"}", "not valid JSON"),
    Case("latin-1-text", lambda: '{"messages":[{"role":"tool","tool_call_id":"c","content":"café"}]}'.encode("latin-1"),
         "not valid JSON", e2e=True),
    Case("utf-16", lambda: _chat(_tool_run()).decode().encode("utf-16"), "not a JSON object"),
    Case("utf-8-bom", lambda: b"\xef\xbb\xbf" + _chat(_tool_run()), "not a JSON object"),
    Case("nul-bytes-in-json", lambda: b'{"messages":[{"role":"tool",\x00"content":"x"}]}', "not valid JSON"),
    # ---------------------------------------------------------------- nesting and size
    # not e2e: the mock upstream's json.loads dies of RecursionError on it (tests/upstreams/handler.py catches
    # only ValueError), so it cannot record what it received
    Case("nested-100k-top-level", lambda: b"[" * 100_000 + b"]" * 100_000, "not a JSON object"),
    Case("nested-100k-in-messages", lambda: b'{"messages":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
         "recursion limit"),
    Case("nested-100k-in-tool-content",
         lambda: b'{"messages":[{"role":"tool","tool_call_id":"c","content":' + b"[" * 100_000 + b"]" * 100_000
         + b"}]}",
         "recursion limit"),
    Case("million-numbers-in-a-tool-body", lambda: _million(b"1", b'"tool_choice":"tool",'),
         r"unexpected shape at messages\[0\]", big=True),  # e2e: test_a_slow_bad_body_does_not_stall_other_flows
    Case("million-numbers-no-tools", lambda: _million(b"1"), r"unexpected shape at messages\[0\]", big=True),
    Case("50mb-truncated", lambda: _big_chat(50 * MB)[: 50 * MB], "not a JSON object", e2e=True, big=True),
    Case("50mb-invalid-json-in-tool-body", lambda: _big_chat(50 * MB)[:-10] + b"}]}]}", "not valid JSON", big=True),
    Case("50mb-invalid-json-no-tools",
         lambda: b'{"model":"gpt-4.1","messages":[{"role":"user","content":"' + b"A" * (50 * MB) + b'"},]}',
         "not valid JSON", big=True),
    Case("70mb-valid-over-max-body", lambda: _big_xai(70 * MB), r"body of \d+ bytes exceeds llmfix_max_body=67108864",
         RESPONSES, "api.x.ai", e2e=True, big=True),
    Case("gzip-bomb-200mb", lambda: _bomb(200 * MB), r"decoded body (of \d+ bytes )?exceeds llmfix_max_body",
         headers={"content-encoding": "gzip"}, e2e=True, big=True),
]


@cache
def _built(name: str) -> bytes:
    return next(c for c in CASES if c.name == name).make()


assert len({c.name for c in CASES}) == len(CASES), "case names must be unique"
