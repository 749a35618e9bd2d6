"""Strict rules of Anthropic-compatible Messages endpoints (DeepSeek, GLM, MiniMax) on top of Anthropic's.

They take only ``user`` and ``assistant`` in ``messages[]``; Claude Code >= 2.1.154 also sends
``role:"system"`` entries there (session-killers.md §2.3, exact texts and statuses):

- DeepSeek ``/anthropic``: 400, DeepSeek's error shape (the same as its Chat API, e.g.
  ``{"error":{"message":…,"type":"invalid_request_error","param":null,"code":"invalid_request_error"}}``,
  musistudio/claude-code-router #881), serde's text for the first bad entry:
  ``Failed to deserialize the JSON body into the target type: messages[1].role: unknown variant `system`,
  expected `user` or `assistant` at line 1 column 1932``.
- Zhipu GLM (``open.bigmodel.cn``, ``api.z.ai``): 422, FastAPI's validation body, one entry per bad
  message: ``{"detail":[{"type":"literal_error","loc":["body","messages",1,"role"],"msg":"Input should be
  'user' or 'assistant'","input":"system","ctx":{"expected":"'user' or 'assistant'"}}]}``.
- MiniMax: 400 ``invalid params, chat content has invalid message role: system (2013)`` in its
  Anthropic-shaped body ``{"type":"error","error":{"type":"bad_request_error","message":…,"http_code":"400"},
  "request_id":…}`` (session-killers §1.4 [96]).

Inference: the column is where serde stops, right after the ``"system"`` value of a compact body.
"""

from __future__ import annotations

import json
from typing import Any

from tests.upstreams.access import as_dict, as_list
from tests.upstreams.errors import Rejection, deepseek_error

ROLES = ("user", "assistant")
MINIMAX_REQUEST_ID = "05b7e2a3c4d5e6f708192a3b4c5d6e7f"


def bad_roles(body: dict[str, Any]) -> list[tuple[int, Any]]:
    """(index, role) of every message whose role is not user or assistant."""
    out = []
    for index, message in enumerate(as_list(body.get("messages"))):
        role = as_dict(message).get("role")
        if role not in ROLES:
            out.append((index, role))
    return out


def check_deepseek(body: dict[str, Any]) -> Rejection | None:
    bad = bad_roles(body)
    if not bad:
        return None
    index, role = bad[0]
    return deepseek_error(
        "Failed to deserialize the JSON body into the target type: "
        f"messages[{index}].role: unknown variant `{role}`, expected `user` or `assistant` "
        f"at line 1 column {_role_column(body, index)}",
        reason="system-role-in-messages",
    )


def check_glm(body: dict[str, Any]) -> Rejection | None:
    bad = bad_roles(body)
    if not bad:
        return None
    detail = [
        {"type": "literal_error", "loc": ["body", "messages", index, "role"],
         "msg": "Input should be 'user' or 'assistant'", "input": role,
         "ctx": {"expected": "'user' or 'assistant'"}}
        for index, role in bad
    ]
    return Rejection(status=422, body={"detail": detail}, reason="system-role-in-messages")


def check_minimax(body: dict[str, Any]) -> Rejection | None:
    bad = bad_roles(body)
    if not bad:
        return None
    error = {"type": "bad_request_error",
             "message": f"invalid params, chat content has invalid message role: {bad[0][1]} (2013)",
             "http_code": "400"}
    return Rejection(status=400, body={"type": "error", "error": error, "request_id": MINIMAX_REQUEST_ID},
                     reason="system-role-in-messages")


CHECKS = {"deepseek": check_deepseek, "glm": check_glm, "minimax": check_minimax}


def check(rules: str, body: dict[str, Any]) -> Rejection | None:
    """The vendor's role rule, when ``rules`` names an Anthropic-compatible vendor; else None."""
    fn = CHECKS.get(rules)
    return fn(body) if fn is not None else None


def _role_column(body: dict[str, Any], index: int) -> int:
    """1-based column just after ``"system"`` of ``messages[index]`` in the compact JSON of ``body``."""
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    start = text.find('"messages":[')
    pos = start + len('"messages":[')
    for message in as_list(body.get("messages"))[:index]:
        pos += len(json.dumps(message, separators=(",", ":"), ensure_ascii=False)) + 1
    own = json.dumps(as_list(body.get("messages"))[index], separators=(",", ":"), ensure_ascii=False)
    at = own.find('"role":')
    value = json.dumps(as_dict(as_list(body.get("messages"))[index]).get("role"))
    return len(text[:pos].encode()) + len(own[: at + len('"role":') + len(value)].encode())
