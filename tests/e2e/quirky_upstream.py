"""A strict mock upstream with extra vendor quirks, for the repair-and-retry tests.

``QuirkyUpstream(rules, extra)`` answers like ``MockUpstream(rules)`` except that ``extra(path, body)``
is asked first and its `Rejection`, if any, is the answer. The vendors it plays have no llmfix
profile (their hosts are unknown to llmfix), so llmfix treats them by the public spec until it learns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.upstreams.access import as_dict, as_list, type_of
from tests.upstreams.errors import Rejection, column_after, deepseek_error
from tests.upstreams.handler import MockHandler
from tests.upstreams.mock import MockUpstream

Extra = Callable[[str, dict[str, Any]], Rejection | None]
SERDE = "Failed to deserialize the JSON body into the target type"


class _QuirkyHandler(MockHandler):
    def _parse(self, raw: bytes, headers: dict[str, str], rules: str) -> tuple[Any, Rejection | None]:
        data, rejection = super()._parse(raw, headers, rules)
        if rejection is None and isinstance(data, dict):
            rejection = self.mock.extra(self.path, data)  # type: ignore[attr-defined]
        return data, rejection


class QuirkyUpstream(MockUpstream):
    def __init__(self, rules: str, extra: Extra = lambda path, body: None) -> None:
        super().__init__(rules)
        self.extra = extra

    def start(self) -> QuirkyUpstream:
        super().start()
        assert self._server is not None
        self._server.RequestHandlerClass = _QuirkyHandler
        return self


def deepseek_anthropic_system(path: str, body: dict[str, Any]) -> Rejection | None:
    """DeepSeek's ``/anthropic``: ``role:"system"`` inside ``messages[]`` (session-killers.md §2.3 [141])."""
    for index, message in enumerate(as_list(body.get("messages"))):
        if as_dict(message).get("role") == "system":
            return deepseek_error(
                f"{SERDE}: messages[{index}].role: unknown variant `system`, expected `user` or `assistant` "
                f"at line 1 column {column_after(body, 'messages', index)}", reason="system-role")
    return None


def deepseek_anthropic_pairing(path: str, body: dict[str, Any]) -> Rejection | None:
    """DeepSeek's ``/anthropic`` text for an unanswered ``tool_use`` (session-killers.md §1.4 [77]), OpenAI shape."""
    messages = as_list(body.get("messages"))
    for index, message in enumerate(messages):
        ids = [as_dict(b).get("id") for b in as_list(as_dict(message).get("content")) if type_of(b) == "tool_use"]
        if as_dict(message).get("role") == "assistant" and ids and index == len(messages) - 1:
            return deepseek_error(
                f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{ids[0]}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                reason="missing-tool-result")
    return None
