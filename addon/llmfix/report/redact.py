"""Make any value safe to log: media and base64 become short references, secrets are masked.

Invariant: the output of :func:`redact` contains no data-URL payload, no base64 run of 64 or more
characters, no value of a secret-named key, and no string shaped like an API key or bearer token.
"""

from __future__ import annotations

import re
from typing import Any

from llmfix.body.media import digest, human_size, ref_for_base64, ref_for_url

MAX_TEXT = 400

_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w=.+-]+)*;base64,[A-Za-z0-9+/=_-]*")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{64,}={0,2}")
SECRETS = re.compile(
    r"(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}"  # OpenAI / Anthropic (sk-ant-…) / generic
    r"|xai-[A-Za-z0-9_\-]{8,}"
    r"|gsk_[A-Za-z0-9]{8,}"
    r"|gh[pousr]_[A-Za-z0-9]{16,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_\-]{20,}"  # a Google API key (the Gemini API's, sent as x-goog-api-key or ?key=)
    r"|ya29\.[0-9A-Za-z_\-]{20,}"  # a Google OAuth access token (Gemini CLI's Code Assist bearer, gcloud's)
    r"|(?i:bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
)
SECRET_KEYS = re.compile(r"(?i)^(authorization|proxy-authorization|x-api-key|api[-_]?key|.*secret.*|.*token.*|"
                          r"password|cookie|set-cookie)$")
TOKEN_COUNT_KEYS = frozenset({"max_tokens", "max_output_tokens", "max_completion_tokens", "output_tokens",
                               "input_tokens", "total_tokens", "cached_tokens", "reasoning_tokens"})


_DATA_URL_HEAD = re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w=.+-]+)*;base64,")
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/=_.~-]*")  # what a data URL payload, base64 run or key may continue with
_LONG = 8192


def redact_text(text: str, limit: int = MAX_TEXT) -> str:
    """A log-safe form of ``text``: media and base64 summarised, secrets masked, length bounded.

    Long strings never go through the regexes whole (~50 ms per 10 MB, on every changed image): a string
    that is one data URL (no space or line break after its head) becomes its reference, and of any other
    long text only the head that survives the cut is redacted, extended to the end of a token that
    crosses the cut so that a data URL, base64 run or key is summarised or masked whole.
    """
    if len(text) > _LONG:
        if text.startswith("data:") and _DATA_URL_HEAD.match(text, 0, 512) and " " not in text and "\n" not in text:
            return _bounded(_redact(str(ref_for_url(text))), limit)  # its MIME text is the client's: redact it too
        if limit:
            cut = _TOKEN_RUN.match(text, limit + _LONG).end()
            return _bounded(_redact(text[:cut]), limit, len(text) - cut)
    return _bounded(_redact(text), limit)


def _bounded(text: str, limit: int, dropped: int = 0) -> str:
    """``text`` cut to ``limit`` characters, saying how many more there were (``dropped`` already gone)."""
    if limit and len(text) > limit:
        return f"{text[:limit]}…(+{len(text) - limit + dropped} chars)"
    return f"{text}…(+{dropped} chars)" if dropped else text


def _redact(text: str) -> str:
    if "data:" in text:
        text = _DATA_URL.sub(lambda m: str(ref_for_url(m.group(0))), text)
    text = SECRETS.sub(lambda m: f"<secret {len(m.group(0))} chars>", text)
    return _BASE64_RUN.sub(lambda m: f"<base64 {human_size(len(m.group(0)) * 3 // 4)} sha256:{digest(m.group(0))}>",
                           text)


def redact(value: Any, limit: int = MAX_TEXT) -> Any:
    """A log-safe copy of a JSON value."""
    if isinstance(value, str):
        return redact_text(value, limit)
    if isinstance(value, list):
        return [redact(v, limit) for v in value]
    if isinstance(value, dict):
        if value.get("type") == "base64" and isinstance(value.get("data"), str):
            ref = ref_for_base64(value["data"], value.get("media_type"))
            return {**{k: redact(v, limit) for k, v in value.items() if k != "data"}, "data": str(ref)}
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and k not in TOKEN_COUNT_KEYS and SECRET_KEYS.match(k) and v:
                out[k] = "<redacted>"
            else:
                out[k] = redact(v, limit)
        return out
    return value
