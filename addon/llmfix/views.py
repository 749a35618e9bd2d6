"""mitmweb / mitmproxy content views for what llmfix did to a request.

``llmfix diff``: the repairs, each change in one line, and a unified diff of the conversation
(roles, tool calls and call ids, text, media as ``<image/png 12 KB sha256:…>``). It is chosen
automatically for requests llmfix changed (or, in report mode, would change). Everything it shows
comes from ``flow.metadata["llmfix"]``, which mitmproxy saves with the flow.
"""

from __future__ import annotations

import difflib

from mitmproxy import contentviews, http

META = "llmfix"


def info_of(metadata: contentviews.Metadata) -> dict | None:
    flow = metadata.flow
    if not isinstance(flow, http.HTTPFlow) or metadata.http_message is not flow.request:
        return None
    info = flow.metadata.get(META)
    return info if isinstance(info, dict) and info.get("changes") else None


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


_registered = False


def register() -> None:
    """Register llmfix's views once per process (a script reload must not re-register them)."""
    global _registered
    if not _registered:
        contentviews.add(DiffView)
        _registered = True
