"""What Anthropic Messages upstreams answer a request they refuse with (:mod:`llmfix.retry.rules` for the shape).

- Anthropic-compatible vendors rejecting ``role:"system"`` in ``messages[]``: DeepSeek 400 ``messages[1].role:
  unknown variant `system`, expected `user` or `assistant``` (Qwen the same), GLM 422 ``Input should be 'user' or
  'assistant'`` with ``"input":"system"``, MiniMax 400 ``invalid params, chat content has invalid message role:
  system (2013)``, a gateway's ``messages[1].role must be either 'user' or 'assistant', but got 'system'``
  (as the vendors' Anthropic-compatibility pages and their users report them). Their flag,
  ``anthropic_system_messages``, comes with fold-system-messages.
- Serde vendors rejecting an image block inside a ``tool_result``: inferred, not captured: DeepSeek's
  ``/anthropic`` deserializer names content positions as in its other texts (``messages[N].content[K].content[J]:
  unknown variant `image`, expected `text```); only that nested position (a tool_result's own content) teaches
  ``anthropic_tool_result_media``.
- Pairing texts (``messages.N: `tool_use` ids were found without `tool_result` blocks immediately after…``,
  ``unexpected `tool_use_id` found in `tool_result` blocks``; anthropics/claude-code #473, #1894): the pairing
  repair is always on, so they teach nothing.
- Anthropic's signature check: ``messages.N.content.M: Invalid `signature` in `thinking` block`` and
  ``messages.N.content.M.thinking.signature: Field required``. Only the upstream can judge a signature, and the
  text names the block: the rule teaches facts, not a flag (:func:`foreign_thinking`).
"""

from __future__ import annotations

import re
from typing import Any

from llmfix.dialects.messages.learn_thinking import FOREIGN, TYPES, block_key, fact_key, marker_key
from llmfix.memory.store import Reasoning
from llmfix.retry.rules import NO_SYSTEM_MESSAGES, NO_TOOL_RESULT_MEDIA, Match, Rule, lesson, rule

_THINKING_BLOCK = re.compile(r"messages\.(\d+)\.content\.(\d+)(?:\.thinking\.signature: Field required|: Invalid "
                             r"`signature` in `thinking` block)")


def foreign_thinking(found: Match, body: dict[str, Any], upstream: str) -> list[Reasoning]:
    """What Anthropic's signature rejection teaches about the body llmfix sent: the block it names (``messages.N.
    content.M``) is not this upstream's, and this upstream rejects blocks (the marker drop-foreign-thinking asks
    first, its value new with every lesson). Nothing when the text names no thinking block of an older assistant
    turn: the latest one is never changed, so a rejection of it teaches nothing that could be resent."""
    hit = _THINKING_BLOCK.search(found.text)
    messages = body.get("messages")
    if hit is None or not isinstance(messages, list):
        return []
    n, m = int(hit.group(1)), int(hit.group(2))
    latest = max((i for i, msg in enumerate(messages) if isinstance(msg, dict) and msg.get("role") == "assistant"),
                 default=-1)
    content = messages[n].get("content") if n < latest and isinstance(messages[n], dict) else None
    block = content[m] if isinstance(content, list) and m < len(content) and isinstance(content[m], dict) else None
    key = block_key(block) if block is not None and block.get("type") in TYPES else None
    if key is None:
        return []
    why = f"{found.rule.name} at messages.{n}.content.{m}"
    fact = Reasoning(FOREIGN, fact_key(key, upstream), why, upstream)
    return [fact, Reasoning(FOREIGN, marker_key(upstream), lesson([fact]), upstream)]


RULES: tuple[Rule, ...] = (
    rule("messages-image-in-tool-result", (400, 422),
         r"messages\[\d+\]\.content\[\d+\]\.content\[\d+\](?:\.type)?: unknown variant `image`", NO_TOOL_RESULT_MEDIA),
    rule("messages-system-role-serde", (400,),
         r"messages\[\d+\]\.role: unknown variant `system`, expected `user` or `assistant`", NO_SYSTEM_MESSAGES),
    rule("messages-system-role-literal", (422,),
         r"(?s)Input should be 'user' or 'assistant'.*\bsystem\b", NO_SYSTEM_MESSAGES),
    rule("messages-system-role-minimax", (400,),
         r"invalid message role: system \(2013\)", NO_SYSTEM_MESSAGES),
    rule("messages-system-role-gateway", (400,),
         r"role must be either 'user' or 'assistant', but got 'system'", NO_SYSTEM_MESSAGES),
    rule("messages-missing-tool-result", (400,),
         r"`tool_use` ids were found without `tool_result` blocks immediately after"),
    rule("messages-orphan-tool-result", (400,),
         r"unexpected `tool_use_id` found in `tool_result` blocks"),
    rule("messages-thinking-signature", (400,), _THINKING_BLOCK.pattern, facts=foreign_thinking),
)
