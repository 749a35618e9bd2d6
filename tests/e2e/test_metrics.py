"""End to end: a real mitmdump with llmfix and ``llmfix_metrics``, traffic through it, then a real scrape.

One strict mock upstream (HTTP by host, and the Responses WebSocket) answers everything the loopback redirect sends
it. The client sends, over HTTPS through mitmproxy's CA: two requests llmfix leaves untouched (OpenAI Chat), one it
repairs up front (pi-ai's xAI capture: hoist-tool-media), one it must retry (a DeepSeek-like gateway llmfix has no
profile for refuses Chat tool content as an array: learned, repaired, resent once), one with two images (Claude
Code's turn 2 to Anthropic: one too wide, fitted; one undecodable, a placeholder), and two Responses messages on a
WebSocket (one with an interrupted call, repaired). Then ``/metrics`` is scraped and parsed with prometheus_client's
parser, and every count is held to what the JSONL change log and the mock upstream saw.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.harness import LOOPBACK_SCRIPT, Mitmdump, loopback_proxy
from tests.e2e.scrape import Scrape, health, metrics_url, scrape
from tests.e2e.ws_client import ask, open_socket
from tests.images import b64, image_bytes
from tests.upstreams import codex_ws as cx
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import RecordedRequest
from tests.upstreams.ws_mock import ResponsesSocketMock

pytestmark = pytest.mark.timeout(180)
KEY = "sk-test-metrics-7c1d9e4b2a"
HEADERS = {"content-type": "application/json", "authorization": f"Bearer {KEY}"}
HELLO = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}).encode()
GATEWAY = "deepseek.gateway.test"  # no profile (spec), DeepSeek's rules behind it


def gateway_chat() -> bytes:
    """A Chat history whose tool message holds an array of text parts: DeepSeek refuses it, the spec allows it."""
    return json.dumps({"model": "deepseek-v4-flash", "thinking": {"type": "disabled"}, "messages": [
        {"role": "user", "content": "Read notes.txt"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_m_1", "type": "function", "function": {"name": "Read", "arguments": '{"path":"notes.txt"}'}}]},
        {"role": "tool", "tool_call_id": "call_m_1", "content": [{"type": "text", "text": "line one"},
                                                                 {"type": "text", "text": "line two"}]},
        {"role": "user", "content": "Summarise it"}]}).encode()


def claude_two_images() -> bytes:
    """Claude Code's turn 2, its tool_result holding an image too wide for Anthropic and one that cannot be decoded."""
    body = capture_json("claude-code/single_png__turn2.json")
    blocks = [image_bytes("png", 1, (8400, 60)), b"\x89PNG\r\n\x1a\n-truncated-"]
    body["messages"][3]["content"][0]["content"] = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(b)}} for b in blocks]
    return json.dumps(body).encode()


SENT = [  # (url, body): what the client sends over HTTPS, in this order
    ("https://api.openai.com/v1/chat/completions", HELLO),
    ("https://api.x.ai/v1/responses", capture_bytes("pi-ai/xai_responses.json")),
    (f"https://{GATEWAY}/v1/chat/completions", gateway_chat()),
    ("https://api.anthropic.com/v1/messages", claude_two_images()),
    ("https://api.openai.com/v1/chat/completions", HELLO),
]
WS_MESSAGES = [  # on one socket: a history with an interrupted call (pair-tool-calls), then one with none
    cx.create([cx.developer(), cx.prompt(), cx.call() | {"call_id": "call_ws_metrics"},
               {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]}]),
    cx.create([cx.developer(), cx.prompt()]),
]


@dataclass
class Run:
    proxy: Mitmdump
    upstream: ResponsesSocketMock
    url: str
    log: list[dict[str, Any]]
    seen: list[list[RecordedRequest]] = field(default_factory=list)  # what the mock got for each HTTP request
    ws_answers: list[list[dict[str, Any]]] = field(default_factory=list)
    metrics: Scrape | None = None

    @property
    def changes(self) -> list[dict[str, Any]]:
        return [r for r in self.log if "event" not in r]

    @property
    def retries(self) -> list[dict[str, Any]]:
        return [r for r in self.log if r.get("event") == "retry"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    conf = tmp_path_factory.mktemp("metrics-conf")
    log = conf / "changes.jsonl"
    with ResponsesSocketMock() as up, loopback_proxy(up, conf, llmfix_log=str(log),
                                                     llmfix_metrics="127.0.0.1:0") as proxy:
        r = Run(proxy, up, metrics_url(proxy), [])
        with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=60) as client:
            for url, body in SENT:
                before = len(up.requests)
                response = client.post(url, content=body, headers=HEADERS)
                assert response.status_code == 200, response.text
                r.seen.append(up.requests[before:])
        with open_socket(proxy, "api.openai.com") as ws:
            r.ws_answers = [ask(ws, cx.dumps(m)) for m in WS_MESSAGES]
        r.log = [json.loads(line) for line in Path(log).read_text().splitlines()]
        r.metrics = scrape(r.url)
        yield r


def test_the_traffic_went_as_designed(run: Run) -> None:
    """The premise of the counts below: what the mock answered to each request, and what llmfix logged."""
    assert [[s.status for s in seen] for seen in run.seen] == [[200], [200], [400, 200], [200], [200]]
    assert [a[-1]["type"] for a in run.ws_answers] == ["response.completed", "response.completed"]
    assert {r["repair"] for r in run.changes} == {"hoist-tool-media", "flatten-tool-text", "fit-images",
                                                  "pair-tool-calls"}
    assert [(r["rejection"], r["resent"], r["outcome"]) for r in run.retries] == [
        ("chat-tool-content-not-string", True, 200)]


def test_requests_are_counted_once_each_and_the_upstream_saw_them_and_the_resend(run: Run) -> None:
    m = run.metrics
    assert m is not None
    http = m.value("llmfix_requests_total", transport="http")
    resends = m.value("llmfix_retries_total", outcome="succeeded") + m.value("llmfix_retries_total",
                                                                              outcome="still_rejected")
    assert http == len(SENT)
    assert http + resends == sum(len(seen) for seen in run.seen)  # every request the mock got over HTTP
    assert m.value("llmfix_requests_total", transport="websocket") == len(run.upstream.received()) == 2
    # by upstream profile: the host's built-in profile; the gateway has none (spec)
    assert {p: m.value("llmfix_requests_total", profile=p) for p in ("openai", "xai", "spec", "anthropic")} == {
        "openai": 4, "xai": 1, "spec": 1, "anthropic": 1}
    # repaired up front (its own change records, no retry): xAI, Anthropic, the first WebSocket message
    retried_flows = {r["flow"] for r in run.retries}
    up_front = {(r["flow"], r.get("message")) for r in run.changes if r["flow"] not in retried_flows}
    assert m.value("llmfix_requests_total", outcome="repaired") == len(up_front) == 3
    assert m.value("llmfix_requests_total", outcome="untouched") == 7 - 3
    assert m.value("llmfix_requests_total", outcome="failed") == 0


def test_repairs_and_changes_equal_the_change_log(run: Run) -> None:
    m = run.metrics
    assert m is not None
    per_request = Counter(r["repair"] for r in {(c["flow"], c.get("message"), c["repair"]): c
                                                for c in run.changes}.values())
    per_change = Counter(r["repair"] for r in run.changes)
    for repair in per_change:
        assert m.value("llmfix_repairs_total", repair=repair) == per_request[repair], repair
        assert m.value("llmfix_changes_total", repair=repair) == per_change[repair], repair
    assert m.value("llmfix_repairs_total") == sum(per_request.values())
    assert m.value("llmfix_changes_total") == len(run.changes)
    by_profile = Counter(c["profile"].split("+")[0] for c in run.changes)  # spec+learned: the retry's profile
    for profile, n in by_profile.items():
        assert m.value("llmfix_changes_total", profile=profile) == n, profile
    assert m.value("llmfix_repairs_total", mode="report") == 0


def test_images_fitted_and_omitted_equal_the_change_log(run: Run) -> None:
    m = run.metrics
    assert m is not None
    fits = [c for c in run.changes if c["repair"] == "fit-images"]
    fitted = [c for c in fits if not c.get("dropped")]
    omitted = [d for c in run.changes for d in c.get("dropped", ()) if d.startswith("<image")]
    assert m.value("llmfix_images_total", outcome="fitted") == len(fitted) == 1
    assert m.value("llmfix_images_total", outcome="omitted") == len(omitted) == 1
    assert m.value("llmfix_images_total", profile="anthropic") == 2
    [anthropic] = run.seen[3]
    blocks = anthropic.json["messages"][3]["content"][0]["content"]
    assert [b["type"] for b in blocks] == ["image", "text"]  # what the upstream got: one fitted, one placeholder


def test_retries_and_learned_quirks_equal_the_change_log(run: Run) -> None:
    m = run.metrics
    assert m is not None
    [retry] = run.retries
    assert m.value("llmfix_retries_total") == 1
    assert m.value("llmfix_retries_total", outcome="succeeded", rejection=retry["rejection"], dialect="chat",
                   transport="http") == 1
    learned = [x for r in run.retries for x in r["learned"] if x.get("new")]
    assert [x["flag"] for x in learned] == ["chat_tool_text_array"]
    assert m.value("llmfix_quirks_learned_total") == len(learned)
    assert m.value("llmfix_quirks_learned_total", quirk="chat_tool_text_array", dialect="chat") == 1


def test_time_histogram_counts_every_request_and_bytes_add_up(run: Run) -> None:
    m = run.metrics
    assert m is not None
    assert m.types["llmfix_request_seconds"] == "histogram" and m.types["llmfix_requests"] == "counter"
    requests = m.value("llmfix_requests_total")
    assert m.value("llmfix_request_seconds_count") == requests == len(SENT) + len(WS_MESSAGES)
    assert m.value("llmfix_request_seconds_bucket", le="+Inf") == requests
    assert 0 < m.value("llmfix_request_seconds_sum") < 60
    # HTTP bytes: what the client sent; what the upstream got on each first attempt (the resend is not a request)
    assert m.value("llmfix_request_received_bytes_total", transport="http") == sum(len(b) for _, b in SENT)
    assert m.value("llmfix_request_sent_bytes_total", transport="http") == sum(len(s[0].body) for s in run.seen)
    ws = run.upstream.received()
    assert m.value("llmfix_request_received_bytes_total", transport="websocket") == sum(
        len(cx.dumps(msg)) for msg in WS_MESSAGES)
    assert m.value("llmfix_request_sent_bytes_total", transport="websocket") == sum(len(r.raw) for r in ws)


def test_memory_and_health_say_the_instance_works(run: Run) -> None:
    m = run.metrics
    assert m is not None
    assert m.value("llmfix_memory_up", backend="sqlite") == 1
    assert m.value("llmfix_memory_fail_open_total") == 0
    assert health(run.url) == (200, {"status": "ok", "memory": {"backend": "sqlite", "up": True}})
    assert m.value("process_resident_memory_bytes") > 0  # the process collector of the registry
    assert httpx.get(f"{run.url}/nothing-here", trust_env=False, timeout=10).status_code == 404


def test_nothing_listens_without_the_option(tmp_path: Path) -> None:
    with ResponsesSocketMock() as up, loopback_proxy(up, tmp_path / "conf") as proxy:
        assert "llmfix metrics" not in proxy.output()
        net = Path(f"/proc/{proxy.process.pid}/net")
        rows = [line.split() for t in ("tcp", "tcp6") for line in (net / t).read_text().splitlines()[1:]]
        inodes = {row[9] for row in rows if row[3] == "0A"}  # sockets in LISTEN
        fds = Path(f"/proc/{proxy.process.pid}/fd")
        owned = {p.readlink().name[8:-1] for p in fds.iterdir() if p.readlink().name.startswith("socket:[")}
        assert len(inodes & owned) == 1  # the proxy's own port, nothing else


ENTRY = '''"""Generated by tests/e2e/test_metrics.py: llmfix's addons, from a script the test can touch (a reload)."""
import sys

sys.path.insert(0, {addon!r})
from llmfix import addons as _llmfix  # noqa: E402

addons = _llmfix.default()
'''


def test_a_reload_stops_the_old_server_and_the_new_addon_serves_afresh(tmp_path: Path) -> None:
    script = tmp_path / "entry.py"
    script.write_text(ENTRY.format(addon=str(Path(__file__).resolve().parents[2] / "addon")))
    with ResponsesSocketMock() as up, Mitmdump(
            scripts=[script, LOOPBACK_SCRIPT], confdir=tmp_path / "conf",
            options={"loopback_upstream": up.address, "llmfix_memory": ":memory:",
                     "llmfix_metrics": "127.0.0.1:0"}) as proxy:
        old = metrics_url(proxy)
        with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=60) as client:
            assert client.post(SENT[0][0], content=HELLO, headers=HEADERS).status_code == 200
        assert scrape(old).value("llmfix_requests_total") == 1
        script.write_text(script.read_text() + "# touched: mitmproxy reloads the script\n")
        new = metrics_url(proxy, nth=2)  # announced by the new addon, after the old one's done
        assert proxy.output().count(f"llmfix metrics: stopped serving {old}") == 1
        if new != old:  # (the kernel may hand the freed port out again)
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"{old}/metrics", trust_env=False, timeout=10)  # the old server let its port go
        assert scrape(new).value("llmfix_requests_total") == 0  # a registry of its own
        assert health(new)[0] == 200
        assert "Traceback" not in proxy.output()
