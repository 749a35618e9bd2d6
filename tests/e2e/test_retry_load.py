"""Repair-and-retry under load: 200 concurrent first requests to a new quirky host through ONE llmfix (real mitmdump).

The host (an xAI-like Responses gateway llmfix has no profile for) rejects pi-ai's array tool output
with xAI's 422 until llmfix learns ``responses_tool_output_array=false``. All 200 arrive before, during
and after the first rejection teaches it: every client gets its 200, no request reaches the upstream
more than twice (the rejection and one resend, or just the repaired one), and the flag is learned once.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.upstreams.captures import capture_json
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(240)
FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
REQUESTS = 200
HOST = "grok-load.gateway.test"
TROUBLE = re.compile(r"Traceback|Addon error|has crashed|left unchanged|internal error|retry failed")


def body(k: int) -> dict[str, Any]:
    b = capture_json("pi-ai/xai_responses.json")  # "stream": true
    b["input"][-1]["content"][0]["text"] = f"What colours do you see in it? (request {k})"
    return b


def number(seen: Any) -> int:
    return int(seen.json["input"][-1]["content"][0]["text"].rsplit(" ", 1)[1].rstrip(")"))


async def one(client: httpx.AsyncClient, k: int) -> None:
    response = await client.post(f"https://{HOST}/v1/responses", json=body(k))
    assert response.status_code == 200, response.text
    assert "event: response.completed" in response.text


async def storm(proxy: Mitmdump) -> list[Any]:
    limits = httpx.Limits(max_connections=REQUESTS + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False,
                                 timeout=httpx.Timeout(90.0), limits=limits) as client:
        return await asyncio.gather(*(one(client, k) for k in range(REQUESTS)), return_exceptions=True)


def test_200_concurrent_first_requests_to_a_new_quirky_host(tmp_path: Path) -> None:
    log = tmp_path / "changes.jsonl"
    with MockUpstream(rules="xai") as up, Mitmdump(
        scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], confdir=tmp_path / "conf",
        options={"loopback_upstream": up.address, "llmfix_log": str(log)},
    ) as proxy:
        results = asyncio.run(storm(proxy))
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, f"{len(errors)} of {len(results)} failed; first: {errors[0]!r}"
        seen = up.requests
        output = proxy.output()
        assert proxy.running
    sent = Counter(number(r) for r in seen)
    assert sorted(sent) == list(range(REQUESTS))
    assert max(sent.values()) <= 2
    for k in range(REQUESTS):
        statuses = [r.status for r in seen if number(r) == k]
        assert statuses in ([200], [422, 200]), (k, statuses)
    retries = [r for r in map(json.loads, log.read_text().splitlines()) if r.get("event") == "retry"]
    assert len(retries) == sum(1 for n in sent.values() if n == 2)
    assert all(r["outcome"] == 200 for r in retries)
    learned_new = [x for r in retries for x in r["learned"] if x["new"]]
    assert learned_new == [{"flag": "responses_tool_output_array", "value": False, "new": True}]
    assert not TROUBLE.search(output), TROUBLE.search(output)
    print(f"{REQUESTS} first requests: {len(retries)} resent once, {REQUESTS - len(retries)} repaired up front")
