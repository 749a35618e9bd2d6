"""mitmweb / mitmproxy content views: what llmfix did to a request, and any LLM conversation, readable.

Promise 7 ("Visible") and issue 7. mitmweb does not show ``flow.metadata``; these views are how it
surfaces there (and in mitmproxy's console, and in ``mitmdump --flow-detail 3``):

- ``llmfix diff``: the repairs, each change in one line, and a unified diff of the conversation
  (roles, tool calls and call ids, text, media as ``<image/png 12 KB sha256:…>``). Chosen automatically
  for requests llmfix changed (or, in report mode, would change). It reads ``flow.metadata["llmfix"]``,
  which mitmproxy saves with the flow.
- ``llmfix original``: the request as the client sent it, before llmfix touched it, as pretty JSON with
  media and base64 summarised and secrets masked (:func:`llmfix.report.redact.redact`). For any other message
  it shows that message the same way. Never chosen automatically.
- ``llmfix conversation``: any LLM request, and any LLM answer — JSON or streamed (SSE of Chat chunks,
  Responses events or Anthropic events, reassembled) — as the same readable lines as the diff. Chosen
  automatically for streamed answers, which mitmproxy otherwise shows raw. Streamed bodies are only
  kept when mitmproxy runs with ``--set store_streamed_bodies=true``.

Every view only reads; a body it cannot read gives a short explanation instead of an error.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from typing import Any

from mitmproxy import contentviews, http
from pydantic import TypeAdapter, ValidationError

from llmfix import route
from llmfix.body.conversation import BadBody, parse
from llmfix.engine import decode
from llmfix.report import render
from llmfix.report.redact import redact, redact_text
from llmfix.route import Dialect
from llmfix.wire import anthropic as an
from llmfix.wire import chat as ch
from llmfix.wire import responses as rs

META = "llmfix"
DIALECT = "llmfix_dialect"  # the same key as llmfix.proxy.ROUTE (proxy imports this module)
TEXT = 160
MAX_TOOLS = 12

# -- which flow, which message ------------------------------------------------------------------------


def _http(metadata: contentviews.Metadata) -> tuple[http.HTTPFlow, http.Message] | None:
    flow, message = metadata.flow, metadata.http_message
    if not isinstance(flow, http.HTTPFlow) or message is None:
        return None
    return (flow, message) if message is flow.request or message is flow.response else None


def info_of(metadata: contentviews.Metadata) -> dict | None:
    """llmfix's record of a request it changed, when ``metadata`` is that request."""
    found = _http(metadata)
    if found is None or found[1] is not found[0].request:
        return None
    info = found[0].metadata.get(META)
    return info if isinstance(info, dict) and info.get("changes") else None


def dialect_of(flow: http.HTTPFlow) -> Dialect | None:
    """The API dialect of an LLM flow: as llmfix routed it, or from the request line of a flow it never saw."""
    seen = flow.metadata.get(DIALECT)
    if isinstance(seen, str) and seen in Dialect.__members__.values():
        return Dialect(seen)
    r = flow.request
    return route.dialect_for(r.method, r.path, r.headers.get("content-type"))


def _is_sse(message: http.Message) -> bool:
    return message.headers.get("content-type", "").lower().startswith("text/event-stream")


# -- llmfix diff ----------------------------------------------------------------------------------------


def diff_text(info: dict) -> str:
    mode = info.get("mode", "repair")
    verb = "repaired by" if mode == "repair" else "report mode, llmfix would apply"
    names = ", ".join(info.get("repairs", []))
    head = [f"# {verb}: {names}  (profile {info.get('profile')}, model {info.get('model')})"]
    head += [f"#   {line}" for line in info.get("lines", [])]
    diff = difflib.unified_diff(info.get("before", []), info.get("after", []), "as sent by the client",
                                "as sent upstream" if mode == "repair" else "as llmfix would send it", lineterm="", n=2)
    return "\n".join([*head, "", *diff]) + "\n"


class DiffView(contentviews.Contentview):
    name = "llmfix diff"
    syntax_highlight = "none"

    def prettify(self, data: bytes, metadata: contentviews.Metadata) -> str:
        info = info_of(metadata)
        return diff_text(info) if info else "(llmfix changed nothing in this message)\n"

    def render_priority(self, data: bytes, metadata: contentviews.Metadata) -> float:
        return 2 if info_of(metadata) else -1


# -- llmfix original --------------------------------------------------------------------------------------


def pretty_redacted(data: bytes) -> str:
    """Pretty JSON (or text) with media and base64 summarised and secrets masked; texts are not cut."""
    try:
        value = json.loads(data)
    except ValueError:
        return redact_text(data.decode("utf-8", "replace"), 0) + "\n"
    return json.dumps(redact(value, 0), indent=2, ensure_ascii=False) + "\n"


def original_text(flow: http.HTTPFlow, message: http.Message, data: bytes) -> str:
    info = flow.metadata.get(META)
    info = info if isinstance(info, dict) and message is flow.request else {}
    names = ", ".join(info.get("repairs", []))
    original = info.get("original")
    if isinstance(original, bytes):
        try:
            data = decode(original, message.headers.get("content-encoding"))
        except BadBody as e:
            return f"# the client's original body cannot be decoded: {e}\n"
        what = f"the request as the client sent it; llmfix changed it ({names}) before sending it upstream"
    elif info.get("mode") == "report" and info.get("changes"):
        what = f"the request as the client sent it, and as it went upstream (report mode: llmfix would apply {names})"
    elif message is flow.request:
        what = "the request as the client sent it; llmfix did not change it"
    else:
        what = "the answer as the upstream sent it"
    return f"# {what}\n# media and base64 summarised, secrets masked\n" + pretty_redacted(data)


class OriginalView(contentviews.Contentview):
    name = "llmfix original"
    syntax_highlight = "yaml"  # mitmproxy highlights JSON with its YAML highlighter; '#' lines are comments

    def prettify(self, data: bytes, metadata: contentviews.Metadata) -> str:
        found = _http(metadata)
        if found is None:
            return pretty_redacted(data)
        return original_text(found[0], found[1], data)

    def render_priority(self, data: bytes, metadata: contentviews.Metadata) -> float:
        return -1


# -- llmfix conversation: requests -------------------------------------------------------------------------


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
    system = _system_text(body.get("instructions" if dialect is Dialect.RESPONSES else "system"))
    if system:
        head.append(f"# {'instructions' if dialect is Dialect.RESPONSES else 'system'}: "
                    f"{redact_text(system, TEXT)!r}")
    if dialect is Dialect.RESPONSES and isinstance(body.get("input"), str):
        return [*head, "[0] message user", f"    {redact_text(body['input'], TEXT)!r}"]
    try:
        conv = parse(dialect, body)
    except BadBody as e:
        return [*head, f"# cannot read the conversation: {e}"]
    return [*head, *(render.lines(dialect, conv.items) if conv else [])]


# -- llmfix conversation: answers ----------------------------------------------------------------------------


def sse_events(data: bytes) -> list[tuple[str, Any]]:
    """``(event name, decoded data)`` for each event of an SSE body; ``[DONE]`` gives ``("done", None)``."""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    events: list[tuple[str, Any]] = []
    for block in text.split("\n\n"):
        name, lines = "", []
        for line in block.split("\n"):
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                name = value
            elif field == "data":
                lines.append(value)
        if not lines:
            continue
        payload = "\n".join(lines)
        if payload.strip() == "[DONE]":
            events.append(("done", None))
            continue
        try:
            events.append((name, json.loads(payload)))
        except ValueError:
            events.append((name, payload))
    return events


def _dicts(value: Any) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def chat_answer(events: list[tuple[str, Any]]) -> dict[str, Any]:
    """Chat Completions chunks → the equivalent ``chat.completion`` object."""
    out: dict[str, Any] = {}
    choices: dict[Any, dict[str, Any]] = {}
    for _, d in events:
        if not isinstance(d, dict):
            continue
        for key in ("model", "usage", "error"):
            if d.get(key):
                out[key] = d[key]
        for c in _dicts(d.get("choices")):
            acc = choices.setdefault(c.get("index", 0), {"role": None, "text": [], "reasoning": [], "calls": {},
                                                         "finish": None})
            delta = c.get("delta") if isinstance(c.get("delta"), dict) else {}
            acc["role"] = acc["role"] or delta.get("role")
            for key, into in (("content", "text"), ("reasoning_content", "reasoning"), ("reasoning", "reasoning")):
                if isinstance(delta.get(key), str):
                    acc[into].append(delta[key])
            for pos, tc in enumerate(_dicts(delta.get("tool_calls"))):
                call = acc["calls"].setdefault(tc.get("index", pos), {"id": None, "name": None, "args": []})
                fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                call["id"] = call["id"] or tc.get("id")
                call["name"] = call["name"] or fn.get("name")
                if isinstance(fn.get("arguments"), str):
                    call["args"].append(fn["arguments"])
            acc["finish"] = c.get("finish_reason") or acc["finish"]
    out["choices"] = [{
        "index": i,
        "message": {
            "role": acc["role"] or "assistant",
            "content": "".join(acc["text"]) or None,
            **({"reasoning_content": "".join(acc["reasoning"])} if acc["reasoning"] else {}),
            **({"tool_calls": [{"id": c["id"] or "?", "type": "function",
                                "function": {"name": c["name"] or "?", "arguments": "".join(c["args"])}}
                               for c in acc["calls"].values()]} if acc["calls"] else {}),
        },
        "finish_reason": acc["finish"],
    } for i, acc in choices.items()]
    return out


def responses_answer(events: list[tuple[str, Any]]) -> dict[str, Any]:
    """Responses events → the equivalent ``response`` object (the final one when the stream has it)."""
    final: dict[str, Any] = {}
    items: dict[Any, dict[str, Any]] = {}
    for name, d in events:
        if not isinstance(d, dict):
            continue
        kind = d.get("type") or name
        if isinstance(d.get("response"), dict):
            final = {**final, **{k: v for k, v in d["response"].items() if v is not None}}
        elif kind == "error":
            final["error"] = d.get("error", d)
        elif kind in ("response.output_item.added", "response.output_item.done") and isinstance(d.get("item"), dict):
            items[d.get("output_index", len(items))] = dict(d["item"])
        elif kind == "response.output_text.delta" and isinstance(item := items.get(d.get("output_index")), dict):
            parts = item.setdefault("content", [])
            if not parts or not isinstance(parts[-1], dict) or parts[-1].get("type") != "output_text":
                parts.append({"type": "output_text", "text": ""})
            parts[-1] = {**parts[-1], "text": parts[-1].get("text", "") + str(d.get("delta", ""))}
        elif kind == "response.function_call_arguments.delta" and isinstance(
                item := items.get(d.get("output_index")), dict):
            item["arguments"] = str(item.get("arguments", "")) + str(d.get("delta", ""))
    if not final.get("output"):
        final["output"] = [items[k] for k in sorted(items, key=lambda k: (not isinstance(k, int), k))]
    return final


def anthropic_answer(events: list[tuple[str, Any]]) -> dict[str, Any]:
    """Anthropic Messages events → the equivalent ``message`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": []}
    blocks: dict[Any, dict[str, Any]] = {}
    json_parts: dict[Any, list[str]] = {}
    for name, d in events:
        if not isinstance(d, dict):
            continue
        kind, index = d.get("type") or name, d.get("index")
        if kind == "message_start" and isinstance(d.get("message"), dict):
            message = {**d["message"], "content": []}
        elif kind == "content_block_start" and isinstance(d.get("content_block"), dict):
            blocks[index] = dict(d["content_block"])
        elif kind == "content_block_delta" and index in blocks and isinstance(delta := d.get("delta"), dict):
            for key in ("text", "thinking"):
                if isinstance(delta.get(key), str):
                    blocks[index][key] = str(blocks[index].get(key, "")) + delta[key]
            if isinstance(delta.get("partial_json"), str):
                json_parts.setdefault(index, []).append(delta["partial_json"])
        elif kind == "message_delta":
            message.update({k: v for k, v in (d.get("delta") or {}).items() if v is not None})
            if isinstance(d.get("usage"), dict):
                message["usage"] = {**(message.get("usage") or {}), **d["usage"]}
        elif kind == "error":
            message["error"] = d.get("error", d)
    for index, parts in json_parts.items():
        try:
            blocks[index]["input"] = json.loads("".join(parts) or "{}")
        except ValueError:
            blocks[index]["input"] = "".join(parts)
    message["content"] = [blocks[k] for k in sorted(blocks, key=lambda k: (not isinstance(k, int), k))]
    return message


_ASSEMBLE = {Dialect.CHAT: chat_answer, Dialect.RESPONSES: responses_answer, Dialect.MESSAGES: anthropic_answer}
_RS_ITEMS: TypeAdapter[list[Any]] = TypeAdapter(list[rs.Item])


def _with_extras(lines: list[str], extras: dict[int, list[str]]) -> list[str]:
    """Insert extra lines (reasoning) right after the header line ``[i] …`` of item ``i``."""
    out: list[str] = []
    for line in lines:
        out.append(line)
        if line.startswith("[") and (i := line[1:].split("]", 1)[0]).isdigit():
            out.extend(f"    {x}" for x in extras.get(int(i), []))
    return out


def answer_lines(dialect: Dialect, obj: dict[str, Any]) -> list[str]:
    """The assistant's side of a (reassembled) answer object as readable lines."""
    if dialect is Dialect.CHAT:
        msgs, extras = [], {}
        for i, c in enumerate(_dicts(obj.get("choices"))):
            m = c.get("message") if isinstance(c.get("message"), dict) else {}
            msgs.append(m)
            reasoning = m.get("reasoning_content") or m.get("reasoning")
            extras[i] = [f"reasoning {redact_text(reasoning, TEXT)!r}"] if isinstance(reasoning, str) else []
        return _with_extras(render.lines(dialect, TypeAdapter(list[ch.Message]).validate_python(msgs)), extras)
    if dialect is Dialect.RESPONSES:
        output = _dicts(obj.get("output"))
        extras = {i: [f"summary {redact_text(s['text'], TEXT)!r}" for s in _dicts(item.get("summary"))
                      if isinstance(s.get("text"), str)] for i, item in enumerate(output)}
        return _with_extras(render.lines(dialect, _RS_ITEMS.validate_python(output)), extras)
    content = _dicts(obj.get("content"))
    extras = {0: [f"thinking {redact_text(b['thinking'], TEXT)!r}" for b in content
                  if b.get("type") == "thinking" and isinstance(b.get("thinking"), str)]}
    blocks = [b for b in content if b.get("type") != "thinking"]
    message = an.Message.model_validate({"role": obj.get("role", "assistant"), "content": blocks})
    return _with_extras(render.lines(dialect, [message]), extras)


def _stop(obj: dict[str, Any]) -> str | None:
    """Why the model stopped: Chat ``finish_reason`` (first choice) or Anthropic ``stop_reason``."""
    choices = _dicts(obj.get("choices"))
    reason = choices[0].get("finish_reason") if choices else obj.get("stop_reason")
    return f"stopped: {reason}" if isinstance(reason, str) else None


def _usage(usage: Any) -> str | None:
    if not isinstance(usage, dict):
        return None
    pairs = [("in", ("input_tokens", "prompt_tokens")), ("out", ("output_tokens", "completion_tokens"))]
    found = [f"{label} {usage[k]}" for label, keys in pairs for k in keys if isinstance(usage.get(k), int)]
    return f"tokens {' / '.join(found)}" if found else None


def response_lines(dialect: Dialect, response: http.Response, data: bytes) -> list[str]:
    streamed = _is_sse(response)
    if streamed:
        events = sse_events(data)
        obj = _ASSEMBLE[dialect](events)
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


def conversation_text(flow: http.HTTPFlow, message: http.Message, data: bytes) -> str:
    dialect = dialect_of(flow)
    if dialect is None:
        return "(not an LLM API request llmfix knows: no conversation to show)\n"
    if message is flow.request:
        lines = request_lines(dialect, data, flow.request.pretty_host)
        info = flow.metadata.get(META)
        if isinstance(info, dict) and info.get("changes") and info.get("mode") == "repair":
            lines.insert(1, f"# as sent upstream, after llmfix's {', '.join(info.get('repairs', []))}"
                            " (see the views 'llmfix diff' and 'llmfix original')")
    else:
        assert isinstance(message, http.Response)
        lines = response_lines(dialect, message, data)
    return "\n".join(lines) + "\n"


class ConversationView(contentviews.Contentview):
    name = "llmfix conversation"
    syntax_highlight = "none"

    def prettify(self, data: bytes, metadata: contentviews.Metadata) -> str:
        found = _http(metadata)
        if found is None:
            return "(not an HTTP message)\n"
        return conversation_text(found[0], found[1], data)

    def render_priority(self, data: bytes, metadata: contentviews.Metadata) -> float:
        found = _http(metadata)
        if found is None or dialect_of(found[0]) is None:
            return -1
        # streamed answers have no other readable view; JSON keeps mitmproxy's JSON view by default
        return 2 if found[1] is found[0].response and _is_sse(found[1]) else 0.5


_registered = False


def register() -> None:
    """Register llmfix's views once per process (a script reload must not re-register them)."""
    global _registered
    if not _registered:
        for view in (DiffView, OriginalView, ConversationView):
            contentviews.add(view)
        _registered = True
