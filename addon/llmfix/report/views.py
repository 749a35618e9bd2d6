"""mitmweb / mitmproxy content views: what llmfix did to a request, and any LLM conversation, readable.

Promise 7 ("Visible"): every change is shown where the user looks. mitmweb does not show
``flow.metadata``; these views are how it surfaces there (and in mitmproxy's console, and in
``mitmdump --flow-detail 3``):

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

from mitmproxy import contentviews, http

from llmfix.body.conversation import BadBody
from llmfix.engine import decode
from llmfix.report.conversation_lines import conversation_text, message_text
from llmfix.report.flowinfo import META, dialect_of, http_of, info_of, is_sse, socket_request
from llmfix.report.redact import redact, redact_text

TEXT = 160


# -- llmfix diff ----------------------------------------------------------------------------------------


def diff_text(info: dict) -> str:
    mode = info.get("mode", "repair")
    verb = "repaired by" if mode == "repair" else "report mode, llmfix would apply"
    names = ", ".join(info.get("repairs", []))
    head = [f"# {verb}: {names}  (profile {info.get('profile')}, model {info.get('model')})"]
    head += [f"#   {line}" for line in info.get("lines", [])]
    diff = difflib.unified_diff(info.get("before", []), info.get("after", []), "as sent by the client",
                                "as sent upstream" if mode == "repair" else "as llmfix would send it", lineterm="", n=2)
    return "\n".join([*head, *_retry_lines(info.get("retry")), "", *diff]) + "\n"


def learned_text(learned: list[dict[str, object]]) -> str:
    """What a retry learned, in words: flags as ``flag=value``, facts as their kind and the start of their key."""
    return ", ".join(f"{x['flag']}={str(x['value']).lower()}" if "flag" in x else f"{x.get('fact')} {x.get('key')}"
                     for x in learned) or "nothing"


def _retry_lines(retry: object) -> list[str]:
    """The first attempt of a request llmfix resent (repair-and-retry): its rejection, what was learned, the outcome."""
    if not isinstance(retry, dict):
        return []
    learned = learned_text(retry.get("learned", []))
    lines = [f"# first attempt answered {retry.get('status')} ({retry.get('rule')}): {retry.get('error')}",
             f"# learned {learned}; resent once (flow {str(retry.get('resend_flow'))[:8]}) → {retry.get('outcome')}",
             "# the first answer, as the upstream sent it:"]
    return lines + [f"#   {line}" for line in str(retry.get("first_response", "")).splitlines()]


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


def message_original(metadata: contentviews.Metadata, data: bytes) -> str:
    """A WebSocket message (or any other non-HTTP message) as sent: the client's original of one llmfix changed."""
    info = info_of(metadata)
    original = info.get("original") if info else None
    if not isinstance(original, bytes):
        return pretty_redacted(data)
    names = ", ".join(info.get("repairs", [])) if info else ""
    return (f"# the message as the client sent it; llmfix changed it ({names}) before sending it upstream\n"
            "# media and base64 summarised, secrets masked\n" + pretty_redacted(original))


class OriginalView(contentviews.Contentview):
    name = "llmfix original"
    syntax_highlight = "yaml"  # mitmproxy highlights JSON with its YAML highlighter; '#' lines are comments

    def prettify(self, data: bytes, metadata: contentviews.Metadata) -> str:
        found = http_of(metadata)
        if found is None:
            return message_original(metadata, data)
        return original_text(found[0], found[1], data)

    def render_priority(self, data: bytes, metadata: contentviews.Metadata) -> float:
        return -1


class ConversationView(contentviews.Contentview):
    name = "llmfix conversation"
    syntax_highlight = "none"

    def prettify(self, data: bytes, metadata: contentviews.Metadata) -> str:
        found = http_of(metadata)
        if found is None:
            dialect = socket_request(metadata)
            if dialect is None or metadata.flow is None:
                return "(not an LLM request or answer llmfix can show as a conversation)\n"
            return message_text(dialect, metadata.flow, data, info_of(metadata))
        return conversation_text(found[0], found[1], data)

    def render_priority(self, data: bytes, metadata: contentviews.Metadata) -> float:
        found = http_of(metadata)
        if found is None:
            return 0.5 if socket_request(metadata) is not None else -1
        if dialect_of(found[0]) is None:
            return -1
        # streamed answers have no other readable view; JSON keeps mitmproxy's JSON view by default
        return 2 if found[1] is found[0].response and is_sse(found[1]) else 0.5


_registered = False


def register() -> None:
    """Register llmfix's views once per process (a script reload must not re-register them)."""
    global _registered
    if not _registered:
        for view in (DiffView, OriginalView, ConversationView):
            contentviews.add(view)
        _registered = True
