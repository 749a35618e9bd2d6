"""The clients of the reasoning end-to-end tests: the real ``openai`` and ``anthropic`` SDKs streaming turn 1
through a running llmfix, and the client's next request sent as it stores it (its bytes), with or without llmfix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai

from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.upstreams.mock import ORIGINAL_HOST_HEADER, MockUpstream, RecordedRequest

FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
KEY = "sk-test-reasoning-7c3e9a1f42d8"
HEADERS = {"content-type": "application/json", "authorization": f"Bearer {KEY}", "x-api-key": KEY,
           "anthropic-version": "2023-06-01"}


def start(upstream: MockUpstream, confdir: Path) -> Mitmdump:
    """llmfix in a real mitmdump, every flow sent to ``upstream``; its memory a file in ``confdir``."""
    return Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options={"loopback_upstream": upstream.address},
                    confdir=confdir)


def stream_chat(p: Mitmdump, host: str, body: dict[str, Any]) -> tuple[str, list[str]]:
    """Turn 1 through llmfix with the openai SDK, streamed: the reasoning and the call ids the client received."""
    with httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=60) as http:
        sdk = openai.OpenAI(base_url=f"https://{host}/v1", api_key=KEY, http_client=http, max_retries=0)
        chunks = list(sdk.chat.completions.create(**body))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    return reasoning, [tc.id for d in deltas for tc in d.tool_calls or [] if tc.id]


def stream_messages(p: Mitmdump, base_url: str, body: dict[str, Any]) -> list[Any]:
    """Turn 1 through llmfix with the anthropic SDK, streamed as Claude Code streams (``?beta=true``): the blocks
    the client assembled."""
    known = {k: body[k] for k in ("model", "messages", "system", "tools", "max_tokens", "thinking",
                                  "context_management", "output_config", "metadata") if k in body}
    extra = {k: v for k, v in body.items() if k not in known and k != "stream"}
    http = httpx2.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=60)
    client = anthropic.Anthropic(api_key=KEY, base_url=base_url, http_client=http, max_retries=0)
    with client.beta.messages.stream(**known, extra_body=extra, extra_query={"beta": "true"}) as stream:
        message = stream.get_final_message()
    http.close()
    return list(message.content)


def post(p: Mitmdump, url: str, body: dict[str, Any] | bytes) -> httpx.Response:
    """The client's next request, as it stores it, through llmfix."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=60) as c:
        return c.post(url, content=raw, headers=HEADERS)


def without_llmfix(up: MockUpstream, host: str, path: str, body: dict[str, Any]) -> httpx.Response:
    """The same request straight to the strict upstream."""
    with httpx.Client(trust_env=False, timeout=30) as c:
        return c.post(f"{up.url}{path}", content=json.dumps(body).encode(),
                      headers={**HEADERS, ORIGINAL_HOST_HEADER: host})


def since(up: MockUpstream, before: int) -> list[RecordedRequest]:
    return up.requests[before:]
