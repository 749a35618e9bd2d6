"""Promise 3 end to end: ONE real mitmdump with llmfix takes the corpus's representative cases, big ones included.

After each bad request — which must reach the strict mock upstream byte-identical, with exactly one
``left unchanged`` warning on mitmdump's console and no traceback — a good request (pi-ai's xAI
capture to https://api.x.ai/v1/responses) is repaired and answered 200: the proxy stayed up and sane.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.badinput.corpus import CASES, Case
from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.upstreams.captures import capture_bytes
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(600)
FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
XAI = capture_bytes("pi-ai/xai_responses.json")
XAI_URL = "https://api.x.ai/v1/responses"
TROUBLE = re.compile(r"Traceback|Addon error|has crashed|internal error")


@pytest.fixture(scope="module")
def proxy(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    options = {"loopback_upstream": upstream.address, "llmfix_memory": ":memory:"}
    with Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options,
                  confdir=tmp_path_factory.mktemp("badinput-conf")) as p:
        yield p


def client(proxy: Mitmdump) -> httpx.Client:
    return httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=120)


def send(proxy: Mitmdump, url: str, raw: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    with client(proxy) as c:
        return c.post(url, content=raw, headers={"content-type": "application/json", **(headers or {})})


def warnings_for(output: str, host: str, path: str) -> list[str]:
    return re.findall(rf"llmfix: [0-9a-f]{{8}} POST {re.escape(host + path)} left unchanged: [^\n]*", output)


def good_request_is_repaired(proxy: Mitmdump, upstream: MockUpstream) -> None:
    before = len(upstream.requests)
    response = send(proxy, XAI_URL, XAI)
    assert response.status_code == 200, response.text
    # only this request's: a slow bad body sent meanwhile (another path) may reach the upstream in between
    [seen] = [r for r in upstream.requests[before:] if r.path == "/v1/responses"]
    assert isinstance(seen.json["input"][3]["output"], str)
    assert seen.json["input"][4]["content"][1]["type"] == "input_image"  # the hoisted image


def params() -> list:
    return [pytest.param(c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=c.known)] if c.known else [])
            for c in CASES if c.e2e]


@pytest.mark.parametrize("case", params())
def test_bad_request_then_good_request(proxy: Mitmdump, upstream: MockUpstream, case: Case) -> None:
    raw = case.body()
    url = f"https://{case.host}{case.path}"
    mark = len(proxy.output())
    before = len(upstream.requests)
    send(proxy, url, raw, case.headers)
    [seen] = upstream.requests[before:]
    assert seen.body == raw, "the body changed on its way upstream"
    del raw, seen

    good_request_is_repaired(proxy, upstream)
    proxy.wait_for_output("hoist-tool-media", timeout=10)
    deadline = time.monotonic() + 5
    while not warnings_for(proxy.output()[mark:], case.host, case.path) and time.monotonic() < deadline:
        time.sleep(0.05)
    new = proxy.output()[mark:]
    assert proxy.running
    assert not TROUBLE.search(new), new[-3000:]
    found = warnings_for(new, case.host, case.path)
    assert len(found) == 1, f"{len(found)} warnings: {found}"
    assert re.search(case.reason, found[0]), found[0]


def test_a_slow_bad_body_passes_unchanged_while_other_flows_go_on(proxy: Mitmdump, upstream: MockUpstream) -> None:
    """A million-element message array keeps llmfix busy for seconds (in a worker thread); meanwhile a good
    request is still repaired, and the bad one leaves unchanged with one warning. How long the good one
    waited is printed: the event loop stalls while pydantic-core holds the GIL (the deterministic check
    of that is tests/badinput/test_corpus.py::test_a_million_element_body_does_not_stall_the_event_loop)."""
    case = next(c for c in CASES if c.name == "million-numbers-in-a-tool-body")
    raw = case.body()
    mark = len(proxy.output())
    before = len(upstream.requests)
    done: dict[str, float] = {}

    def slow() -> None:
        started = time.monotonic()
        send(proxy, f"https://{case.host}{case.path}", raw)
        done["slow"] = time.monotonic() - started

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(1.0)  # the body is uploaded and being parsed
    started = time.monotonic()
    good_request_is_repaired(proxy, upstream)
    good = time.monotonic() - started
    thread.join(120)
    print(f"slow bad request: {done.get('slow', float('nan')):.1f} s; good request meanwhile: {good:.2f} s")
    assert "slow" in done
    assert [r.body for r in upstream.requests[before:] if r.path == case.path] == [raw]
    proxy.wait_for_output(re.compile(r"left unchanged: unexpected shape at messages\[0\]"), timeout=10)
    new = proxy.output()[mark:]
    assert not TROUBLE.search(new), new[-3000:]
    [warning] = warnings_for(new, case.host, case.path)
    assert re.search(case.reason, warning)
