"""What the real upstreams reject: one entry point shared by the mock servers and the tests.

``check(rules, path, body)`` picks the dialect from the path (``/responses``, ``/chat/completions``,
``/messages``) and the vendor's reading from ``rules``; it returns the first `Rejection` the real
upstream would answer, or None when the body would be accepted. Pure: no I/O, never raises on odd
bodies (only on an unknown rule-set name).

The ``gemini`` rules read Gemini's doors from the path (tests/upstreams/gemini_mock.py): here only the pure rules
(no thought signatures, which need what a mock issued), and the error object unwrapped (``{"error": …}``, even
where the wire wraps it in an array).
"""

from __future__ import annotations

from typing import Any, Literal

from tests.upstreams import (
    chat_rules,
    compat_rules,
    empty_rules,
    image_rules,
    messages_rules,
    reasoning_rules,
    responses_rules,
)
from tests.upstreams.errors import Rejection

__all__ = ["RULE_SETS", "Rejection", "check", "dialect_of", "rules_for_host"]

Dialect = Literal["responses", "chat", "messages"]
RULE_SETS = ("xai", "openai", "deepseek", "anthropic", "spec", "glm", "minimax", "moonshot", "gemini")
HOST_RULES = {
    "api.x.ai": "xai",
    "api.openai.com": "openai",
    "api.deepseek.com": "deepseek",
    "api.anthropic.com": "anthropic",
    "open.bigmodel.cn": "glm",
    "api.z.ai": "glm",
    "api.minimax.io": "minimax",
    "api.moonshot.ai": "moonshot",
    "api.moonshot.cn": "moonshot",
    "generativelanguage.googleapis.com": "gemini",
    "cloudcode-pa.googleapis.com": "gemini",
    "daily-cloudcode-pa.googleapis.com": "gemini",
    # gateways in front of a vendor: hosts llmfix has no profile for, answering as the vendor behind them
    "deepseek.gateway.test": "deepseek",
    "claude.gateway.test": "anthropic",
}


def rules_for_host(host: str | None) -> str:
    """The rule set of a real upstream host (port ignored); ``"spec"`` for any other host."""
    name = (host or "").strip().lower()
    if name.count(":") == 1:  # host:port (a bare IPv6 address has several colons)
        name = name.partition(":")[0]
    if name == "aiplatform.googleapis.com" or name.endswith("-aiplatform.googleapis.com") or name.endswith(
            ".rep.googleapis.com"):
        return "gemini"  # Vertex: global, regional ({location}-aiplatform…) and Gemini CLI's REP endpoints
    return HOST_RULES.get(name, "spec")


def dialect_of(path: str) -> Dialect | None:
    """The API dialect of a request path (query string ignored), or None if unknown."""
    bare = path.split("?", 1)[0].rstrip("/")
    if bare.endswith("/responses"):
        return "responses"
    if bare.endswith("/chat/completions"):
        return "chat"
    if bare.endswith("/messages"):
        return "messages"
    return None


def check(rules: str, path: str, body: dict[str, Any]) -> Rejection | None:
    """The rejection the upstream named by ``rules`` gives for ``body`` at ``path``, or None."""
    if rules not in RULE_SETS:
        raise ValueError(f"unknown rule set {rules!r}; expected one of {', '.join(RULE_SETS)}")
    if not isinstance(body, dict):
        return None
    if rules == "gemini":
        return _gemini(path, body)
    dialect = dialect_of(path)
    # an unknown host ("spec") is not held to a vendor's image limits: llmfix sends it the images the client sent,
    # until a rejection relayed from the vendor behind it teaches otherwise (profiles.py, the image_limits flags)
    images = rules != "spec"
    if dialect == "responses":
        if rules == "xai":
            return responses_rules.check_xai(body) or image_rules.check_xai(dialect, body)
        return responses_rules.check_openai(body) or (image_rules.check_openai_responses(body) if images else None)
    if dialect == "chat":
        if rules == "deepseek":
            return chat_rules.check_deepseek(body) or reasoning_rules.check_deepseek(body)
        if rules == "moonshot":
            return chat_rules.check_openai(body) or reasoning_rules.check_kimi(body)
        if rules == "xai":
            return chat_rules.check_xai(body) or image_rules.check_xai(dialect, body)
        return chat_rules.check_openai(body) or (image_rules.check_openai_chat(body) if images else None)
    if dialect == "messages":
        return compat_rules.check(rules, body) or (empty_rules.check(body) if rules == "anthropic" else None) or (
            messages_rules.check(body)) or (image_rules.check_anthropic(body) if rules == "anthropic" else None)
    return None


def _gemini(path: str, body: dict[str, Any]) -> Rejection | None:
    from tests.upstreams import gemini_door, gemini_mock, gemini_rules
    from tests.upstreams.gemini_errors import not_found
    from tests.upstreams.gemini_signatures import SignatureLedger

    door = gemini_mock.route(path)
    if door is None:
        found = not_found(path.partition("?")[0])
    elif door.backend == "door":
        ledger = SignatureLedger()
        ledger.check = lambda *a, **k: None  # type: ignore[method-assign]  # signatures need a mock's ledger
        found = gemini_door.check(body, ledger)
    else:
        inner, _, prefix = gemini_mock.unwrap(door, body)
        found = gemini_rules.check(inner, backend=door.backend, prefix=prefix, pairing=door.method != "countTokens")
    if found is None:
        return None
    return Rejection(status=found.status, body={"error": found.error(door.backend if door else "gemini")},
                     reason=found.reason)
