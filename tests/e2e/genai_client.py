"""A real ``google-genai`` client (Google's Python SDK) reaching the strict Gemini mock through a real mitmdump.

The client keeps its real base URL (``https://generativelanguage.googleapis.com``, API version ``v1beta``) and goes
through the proxy with ``HttpOptions(client_args={"proxy": …, "verify": …})`` — the SDK hands ``client_args`` to its
httpx client (https://googleapis.github.io/python-genai/, "Proxy"); the loopback redirect of the test's mitmdump
sends the flows to the mock. ``vertex=True`` gives an express-mode Vertex client
(``aiplatform.googleapis.com/v1beta1/publishers/google/models/…``).

    client = genai_client.client(proxy)
    first, history = genai_client.turn1(client, MODEL, PROMPT)    # streamed; the calls and their signatures
    answer = genai_client.turn2(client, MODEL, history)           # the function responses; a text answer
    genai_client.rejection(lambda: client.models.generate_content(...))   # (status, message) of a ClientError

`broken_histories` gives the shapes Gemini refuses (google-gemini/gemini-cli #6379, #16543, #11814, #13467, #3054;
QwenLM/qwen-code #1186) built from a real turn 1, each with the text the mock answers.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from google import genai
from google.genai import errors, types

from tests.e2e.harness import Mitmdump
from tests.upstreams.gemini_errors import (
    CALL_PLACEMENT,
    CORRUPTED,
    COUNT_MISMATCH,
    EMPTY_TEXT,
    missing_signature,
    unknown_name,
)

KEY = "genai-test-fake-key-0123456789"
BROKEN = ("lost-signature", "resumed-duplicates", "split-responses", "call-after-text", "foreign-signature",
          "empty-text", "svg-image", "mcp-schema")
"""The names of `broken_histories`, in order: the cases a bare proxy shows refused and llmfix shows answered."""
READ_FILE = types.FunctionDeclaration(
    name="read_file", description="Read a file",
    parameters_json_schema={"type": "object", "properties": {"file_path": {"type": "string"}}, "required": [
        "file_path"]})
MCP_SCHEMA = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": False,
              "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}}}


def client(proxy: Mitmdump, *, vertex: bool = False) -> genai.Client:
    """A ``genai.Client`` with a fake key whose every request goes through ``proxy`` (trusting only its CA)."""
    args = {"proxy": proxy.url, "verify": proxy.ssl_context()}
    options = types.HttpOptions(client_args=args, timeout=60_000)
    if vertex:
        return genai.Client(vertexai=True, api_key=KEY, http_options=options)
    return genai.Client(api_key=KEY, http_options=options)


def config(raw_tools: list[dict[str, Any]] | None = None) -> types.GenerateContentConfig:
    """``read_file`` as the tool, thoughts included; ``raw_tools`` replaces ``tools`` in the request body as it is
    (the SDK's ``extra_body``), for schemas its own types would not let through (an MCP server's ``$schema``)."""
    options = types.HttpOptions(extra_body={"tools": raw_tools}) if raw_tools is not None else None
    return types.GenerateContentConfig(tools=[types.Tool(function_declarations=[READ_FILE])], http_options=options,
                                       thinking_config=types.ThinkingConfig(include_thoughts=True))


def turn1(gc: genai.Client, model: str, prompt: str) -> tuple[list[types.Part], list[types.Content]]:
    """Stream the first turn; returns the answer's parts (thought summaries left out, as Gemini CLI leaves them)
    and the history with it: ``[user, model]``."""
    user = types.Content(role="user", parts=[types.Part(text=prompt)])
    parts: list[types.Part] = []
    for chunk in gc.models.generate_content_stream(model=model, contents=[user], config=config()):
        for candidate in chunk.candidates or []:
            parts += [p for p in (candidate.content.parts or []) if not p.thought]
    return parts, [user, types.Content(role="model", parts=parts)]


def responses_for(calls: list[types.Part], outputs: list[str] | None = None) -> types.Content:
    """One user content answering each call of ``calls`` (one ``functionResponse`` per call, in order)."""
    outputs = outputs or [f"contents of {p.function_call.args}" for p in calls if p.function_call]
    made = [types.Part(function_response=types.FunctionResponse(
        id=p.function_call.id, name=p.function_call.name, response={"output": out}))
        for p, out in zip([p for p in calls if p.function_call], outputs, strict=True)]
    return types.Content(role="user", parts=made)


def turn2(gc: genai.Client, model: str, history: list[types.Content], *,
          raw_tools: list[dict[str, Any]] | None = None) -> types.GenerateContentResponse:
    """The second turn, unary: ``history`` (ending in the function responses) sent as it is."""
    return gc.models.generate_content(model=model, contents=history, config=config(raw_tools))


def rejection(send: Callable[[], Any]) -> tuple[int, str]:
    """``(status, message)`` of the ``ClientError`` that ``send()`` raises; fails if it raises none."""
    try:
        send()
    except errors.ClientError as e:
        return e.code, e.message or ""
    raise AssertionError("the request was accepted")


def _without_signatures(content: types.Content) -> types.Content:
    out = copy.deepcopy(content)
    for part in out.parts or []:
        part.thought_signature = None
    return out


def broken_histories(history: list[types.Content], answers: types.Content,
                     foreign_signature: bytes) -> dict[str, tuple[list[types.Content], list[dict] | None, str]]:
    """Named broken turn-2 histories built from a real ``[user, model]`` turn 1 and its ``answers``, each with the
    raw tools it is sent with (None: the usual ``read_file``) and the message Gemini answers it:
    ``{name: (history, raw_tools, text)}``."""
    user, model = history
    first_call = next(p.function_call for p in model.parts or [] if p.function_call)
    signed = copy.deepcopy(model)
    signed.parts[0].thought_signature = foreign_signature
    doubled = types.Content(role="user", parts=[*answers.parts, *copy.deepcopy(answers.parts)])
    halves = [types.Content(role="user", parts=[p]) for p in answers.parts or []]
    svg = types.Content(role="user", parts=[*answers.parts, types.Part(inline_data=types.Blob(
        mime_type="image/svg+xml", data=b"<svg xmlns='http://www.w3.org/2000/svg'/>"))])
    chatter = types.Content(role="model", parts=[types.Part(text="Let me look.")])
    empty = types.Content(role="user", parts=[types.Part(text="")])
    read_file = READ_FILE.model_dump(mode="json", by_alias=True, exclude_none=True)
    mcp_tools = [{"functionDeclarations": [read_file, {"name": "mcp_tool", "description": "an MCP tool",
                                                      "parameters": MCP_SCHEMA}]}]
    at = "tools[0].function_declarations[1].parameters"
    schema_text = "\n".join([unknown_name("$schema", at), unknown_name("additionalProperties", at),
                             unknown_name("exclusiveMinimum", f"{at}.properties[0].value")])
    made = {
        "lost-signature": ([user, _without_signatures(model), answers], None, missing_signature(
            "gemini", str(first_call.name), 2)),
        "resumed-duplicates": ([user, model, doubled], None, COUNT_MISMATCH),
        "split-responses": ([user, model, *halves], None, COUNT_MISMATCH),
        "call-after-text": ([user, chatter, model, answers], None, CALL_PLACEMENT),
        "foreign-signature": ([user, signed, answers], None, CORRUPTED),
        "empty-text": ([empty, user, model, answers], None, EMPTY_TEXT),
        "svg-image": ([user, model, svg], None, "Unsupported MIME type: image/svg+xml"),
        "mcp-schema": ([user, model, answers], mcp_tools, schema_text),
    }
    assert tuple(made) == BROKEN
    return made
