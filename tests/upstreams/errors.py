"""The `Rejection` value and the error-body shape of each upstream.

Every strict rule in this package returns a `Rejection` built by one of these helpers, so the
status code and the JSON body look like what the real upstream sends (see wire-formats.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

XAI_DESERIALIZE = (
    "Failed to deserialize the JSON body into the target type: input: "
    "data did not match any variant of untagged enum ModelInput"
)
XAI_INVALID_ARGUMENT = "Client specified an invalid argument"


@dataclass(frozen=True)
class Rejection:
    """What a strict upstream answers for a request it refuses."""

    status: int
    body: dict[str, Any]
    reason: str

    @property
    def message(self) -> str:
        """The human-readable error text, whatever the vendor's body shape."""
        error = self.body.get("error")
        if isinstance(error, dict):
            return str(error.get("message", ""))
        return str(error or "")


def openai_error(
    message: str, *, reason: str, param: str | None = None, code: str | None = None, status: int = 400
) -> Rejection:
    """OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return Rejection(status=status, body={"error": error}, reason=reason)


def deepseek_error(message: str, *, reason: str) -> Rejection:
    """DeepSeek's shape: OpenAI-like, with ``param: null`` and ``code: "invalid_request_error"``."""
    return openai_error(message, reason=reason, param=None, code="invalid_request_error")


def xai_error(message: str, *, reason: str, status: int = 422) -> Rejection:
    """xAI's shape: ``{"code": "Client specified an invalid argument", "error": "..."}``."""
    return Rejection(status=status, body={"code": XAI_INVALID_ARGUMENT, "error": message}, reason=reason)


def anthropic_error(message: str, *, reason: str, status: int = 400) -> Rejection:
    """Anthropic's shape: ``{"type": "error", "error": {"type": "invalid_request_error", "message"}}``."""
    error = {"type": "invalid_request_error", "message": message}
    return Rejection(status=status, body={"type": "error", "error": error}, reason=reason)


def invalid_json(rules: str, detail: str) -> Rejection:
    """The answer to a body that is not a JSON object, in the vendor's shape (always 400)."""
    reason = "invalid-json"
    if rules == "xai":
        return xai_error(f"Failed to parse the request body as JSON: {detail}", reason=reason, status=400)
    if rules == "anthropic":
        return anthropic_error(f"There was an error parsing the body: {detail}", reason=reason)
    if rules == "deepseek":
        return deepseek_error(f"Failed to parse the request body as JSON: {detail}", reason=reason)
    return openai_error(
        f"We could not parse the JSON body of your request. ({detail})", reason=reason
    )


def column_after(body: dict[str, Any], key: str, index: int | None = None) -> int:
    """A plausible serde column: the end of ``body[key]`` (or of ``body[key][index]``) in compact JSON.

    Rust's serde reports ``at line 1 column N`` after the value it failed on; clients send compact
    JSON on one line, so the length of the compact prefix is a realistic N.
    """
    parts = [f"{_dump(k)}:{_dump(v)}" for k, v in _items_before(body, key)]
    value = body.get(key)
    if index is not None and isinstance(value, list):
        head = "[" + ",".join(_dump(x) for x in value[: index + 1])
    else:
        head = _dump(value)
    text = "{" + ",".join([*parts, f"{_dump(key)}:{head}"])
    return len(text.encode())


def _items_before(body: dict[str, Any], key: str) -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for k, v in body.items():
        if k == key:
            break
        items.append((k, v))
    return items


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
