"""Upstreams that refuse request fields they do not take: each vendor's text and envelope, for strict mocks.

``refusal(vendor, fields, body)`` is the first of ``fields`` the body carries, refused as ``vendor`` refuses it
(None when it carries none). A field is a top-level member (``context_management``, ``prompt_cache_key``…),
``cache_control.ttl`` (the ``ttl`` of any marker) or ``<type>.cache_control`` (the marker of a block of that type);
anything else is a dotted path whose first segment is a top-level member. The envelopes, as reported:

- ``anthropic``: 400 ``{"type":"error","error":{"type":"invalid_request_error","message":"<path>: Extra inputs are
  not permitted"}}``, the path dotted with the block's type and the marker's (``messages.0.content.3.text.cache_control.
  ephemeral.ttl``; anthropics/claude-code #12122 and #14135, caozhiyuan/copilot-api #305);
- ``copilot``: GitHub Copilot's 400 ``{"message":"<path>: Extra inputs are not permitted",
  "code":"invalid_request_body"}`` (github/copilot-cli #762 for the envelope, anomalyco/opencode #24527 for
  ``output_config``);
- ``fastapi``: a FastAPI gateway's 422 ``{"detail":[{"type":"extra_forbidden","loc":["body",…],"msg":"Extra inputs
  are not permitted","input":…}]}``;
- ``azure``: 400 ``{"error":{"code":"unrecognized_request_argument","message":"Unrecognized request argument supplied:
  <name>"}}`` (vectorize-io/hindsight #3518);
- ``vllm``: 400 in the OpenAI shape whose ``message`` is the Python text of pydantic's list (vllm-project/vllm #10078,
  1Panel-dev/MaxKB #2912).
"""

from __future__ import annotations

from typing import Any

from tests.upstreams.access import as_dict, as_list, type_of
from tests.upstreams.errors import Rejection, anthropic_error

VENDORS = ("anthropic", "copilot", "fastapi", "azure", "vllm")
EXTRA = "Extra inputs are not permitted"
Path = list[str | int]


def refusal(vendor: str, fields: tuple[str, ...], body: dict[str, Any]) -> Rejection | None:
    for field in fields:
        found = _find(field, body)
        if found is not None:
            return rejection(vendor, *found)
    return None


def rejection(vendor: str, path: Path, value: Any) -> Rejection:
    """``vendor``'s answer refusing the field at ``path`` (segments, the union tags included) holding ``value``."""
    dotted = ".".join(str(p) for p in path)
    reason = f"refused:{dotted}"
    if vendor == "anthropic":
        return anthropic_error(f"{dotted}: {EXTRA}", reason=reason)
    if vendor == "copilot":
        return Rejection(400, {"message": f"{dotted}: {EXTRA}", "code": "invalid_request_body"}, reason)
    if vendor == "fastapi":
        entry = {"type": "extra_forbidden", "loc": ["body", *path], "msg": EXTRA, "input": value}
        return Rejection(422, {"detail": [entry]}, reason)
    if vendor == "azure":
        message = f"Unrecognized request argument supplied: {dotted}"
        return Rejection(400, {"error": {"code": "unrecognized_request_argument", "message": message}}, reason)
    if vendor == "vllm":
        entry = {"type": "extra_forbidden", "loc": ("body", *path), "msg": EXTRA, "input": value}
        return Rejection(400, {"object": "error", "message": str([entry]), "type": "BadRequestError", "param": None,
                               "code": 400}, reason)
    raise ValueError(f"unknown vendor {vendor!r}; expected one of {VENDORS}")


def _find(field: str, body: dict[str, Any]) -> tuple[Path, Any] | None:
    """Where ``field`` first occurs in ``body`` (its path and value), or None."""
    head, _, rest = field.partition(".")
    if field == "cache_control.ttl" or rest == "cache_control":
        for path, block in _blocks(body):
            marker = as_dict(block.get("cache_control"))
            if field == "cache_control.ttl" and "ttl" in marker:
                tag = [type_of(block) or "text"] if path[0] == "messages" else []  # system blocks are text only
                return [*path, *tag, "cache_control", "ephemeral", "ttl"], marker["ttl"]
            if field != "cache_control.ttl" and type_of(block) == head and marker:
                return [*path, head, "cache_control"], marker
        return None
    node: Any = body
    for key in field.split("."):
        if key not in as_dict(node):
            return None
        node = node[key]
    return list(field.split(".")), node


def _blocks(body: dict[str, Any]) -> list[tuple[Path, dict[str, Any]]]:
    """Every content block of ``system`` and of the messages, with its path, in body order."""
    out: list[tuple[Path, dict[str, Any]]] = [(["system", j], as_dict(b))
                                               for j, b in enumerate(as_list(body.get("system")))]
    for i, message in enumerate(as_list(body.get("messages"))):
        blocks = as_list(as_dict(message).get("content"))
        out += [(["messages", i, "content", j], as_dict(b)) for j, b in enumerate(blocks)]
    return out
