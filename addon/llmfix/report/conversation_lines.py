"""The ``llmfix conversation`` view's text: any LLM request or answer as readable lines.

Requests: a header (model, tools, system) and the conversation rendered by :mod:`llmfix.report.render`.
Answers: JSON or streamed (reassembled by :mod:`llmfix.report.sse_answers`), with status, stop reason and
usage. Everything is redacted; a body that cannot be read gives a one-line explanation instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mitmproxy import http
from pydantic import ValidationError

from llmfix.body.conversation import BadBody, parse
from llmfix.dialects.base import Dialect
from llmfix.report import render
from llmfix.report.flowinfo import META, dialect_of, is_sse
from llmfix.report.redact import redact_text
from llmfix.report.sse_answers import dicts, sse_events

TEXT = 160
MAX_TOOLS = 12


def _names(tools: Any, pick: Callable[[dict], Any]) -> str:
    names = [str(pick(t) or t.get("type") or "?") for t in tools if isinstance(t, dict)] if isinstance(
        tools, list) else []
    more = f", …(+{len(names) - MAX_TOOLS})" if len(names) > MAX_TOOLS else ""
    return ", ".join(names[:MAX_TOOLS]) + more


def _tool_name(t: dict) -> Any:
    fn = t.get("function")
    return fn.get("name") if isinstance(fn, dict) else t.get("name")


def _system_text(system: Any) -> str | None:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict) and isinstance(b.get("text"), str))
    return None


def request_lines(dialect: Dialect, data: bytes, host: str) -> list[str]:
    try:
        body = json.loads(data)
    except ValueError as e:
        return [f"# not a JSON body ({e})"]
    if not isinstance(body, dict):
        return [f"# the body is a JSON {type(body).__name__}, not a {dialect} request"]
    facts = [f"{dialect} request to {host}"]
    if isinstance(body.get("model"), str):
        facts.append(f"model {body['model']}")
    if body.get("stream"):
        facts.append("stream")
    head = ["# " + " · ".join(facts)]
    if tools := _names(body.get("tools"), _tool_name):
        head.append(f"# tools: {tools}")
    system = _system_text(body.get(dialect.shape.system))
    if system:
        head.append(f"# {dialect.shape.system}: {redact_text(system, TEXT)!r}")
    try:
        conv = parse(dialect, body)
    except BadBody as e:
        return [*head, f"# cannot read the conversation: {e}"]
    if conv is None and isinstance(text := body.get(dialect.shape.key), str):  # a plain string input
        return [*head, "[0] message user", f"    {redact_text(text, TEXT)!r}"]
    return [*head, *(render.lines(dialect, conv.items) if conv else [])]


def answer_lines(dialect: Dialect, obj: dict[str, Any]) -> list[str]:
    """The assistant's side of a (reassembled) answer object as readable lines."""
    return dialect.answers.answer_lines(obj)


def _stop(obj: dict[str, Any]) -> str | None:
    """Why the model stopped: Chat ``finish_reason`` (first choice) or Anthropic ``stop_reason``."""
    choices = dicts(obj.get("choices"))
    reason = choices[0].get("finish_reason") if choices else obj.get("stop_reason")
    return f"stopped: {reason}" if isinstance(reason, str) else None


def _usage(usage: Any) -> str | None:
    if not isinstance(usage, dict):
        return None
    pairs = [("in", ("input_tokens", "prompt_tokens")), ("out", ("output_tokens", "completion_tokens"))]
    found = [f"{label} {usage[k]}" for label, keys in pairs for k in keys if isinstance(usage.get(k), int)]
    return f"tokens {' / '.join(found)}" if found else None


def response_lines(dialect: Dialect, response: http.Response, data: bytes) -> list[str]:
    streamed = is_sse(response)
    if streamed:
        events = sse_events(data)
        obj = dialect.answers.assemble(events)
        facts = [f"streamed {dialect} answer, {len(events)} events reassembled"]
    else:
        try:
            obj = json.loads(data)
        except ValueError as e:
            return [f"# HTTP {response.status_code}: not a JSON body ({e})"]
        if not isinstance(obj, dict):
            return [f"# HTTP {response.status_code}: a JSON {type(obj).__name__}"]
        facts = [f"{dialect} answer"]
    facts.insert(0, f"HTTP {response.status_code}")
    details = [f"{key} {obj[key]}" for key in ("model", "status") if isinstance(obj.get(key), str)]
    details += [x for x in (_stop(obj), _usage(obj.get("usage"))) if x]
    head = ["# " + " · ".join(facts), *(["# " + " · ".join(details)] if details else [])]
    if obj.get("error"):
        head.append(f"# error: {redact_text(json.dumps(obj['error'], ensure_ascii=False), 400)}")
        if not streamed and not any(k in obj for k in ("choices", "output", "content")):
            return head
    try:
        return [*head, *answer_lines(dialect, obj)]
    except ValidationError as e:
        return [*head, f"# cannot read the answer: {e.error_count()} unexpected shape(s)"]


def _as_sent(lines: list[str], info: Any) -> list[str]:
    if isinstance(info, dict) and info.get("changes") and info.get("mode") == "repair":
        lines.insert(1, f"# as sent upstream, after llmfix's {', '.join(info.get('repairs', []))}"
                        " (see the views 'llmfix diff' and 'llmfix original')")
    return lines


def message_text(dialect: Dialect, flow: Any, data: bytes, info: dict | None) -> str:
    """A request carried by a WebSocket message (a Responses ``response.create``) as readable lines."""
    return "\n".join(_as_sent(request_lines(dialect, data, flow.request.pretty_host), info)) + "\n"


def conversation_text(flow: http.HTTPFlow, message: http.Message, data: bytes) -> str:
    dialect = dialect_of(flow)
    if dialect is None:
        return "(not an LLM API request llmfix knows: no conversation to show)\n"
    if message is flow.request:
        lines = _as_sent(request_lines(dialect, data, flow.request.pretty_host), flow.metadata.get(META))
    else:
        assert isinstance(message, http.Response)
        lines = response_lines(dialect, message, data)
    return "\n".join(lines) + "\n"


