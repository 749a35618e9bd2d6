"""The e2e harness itself: real mitmdump + loopback redirect + strict mock upstream, no llmfix."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import anthropic
import httpx
import httpx2
import openai
import pytest
from mitmproxy import connection
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

from tests.e2e.harness import LOOPBACK_SCRIPT, Mitmdump, MitmdumpError
from tests.e2e.loopback_upstream import LoopbackUpstream, parse_target
from tests.upstreams.canned import MOCK_TEXT
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import ORIGINAL_HOST_HEADER, MockUpstream
from tests.upstreams.rules import check

pytestmark = pytest.mark.timeout(120)
API_KEY = "sk-test-not-a-real-key"


@pytest.fixture(scope="module")
def proxy(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    confdir = tmp_path_factory.mktemp("harness-confdir")
    with Mitmdump(scripts=[LOOPBACK_SCRIPT], options={"loopback_upstream": upstream.address},
                  confdir=confdir) as running:
        yield running


@pytest.fixture
def client(proxy: Mitmdump) -> Iterator[httpx.Client]:
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=30) as c:
        yield c


def test_baseline_xai_rejects_array_tool_output(client: httpx.Client, upstream: MockUpstream) -> None:
    raw = capture_bytes("pi-ai/xai_responses.json")
    before = len(upstream.requests)
    response = client.post("https://api.x.ai/v1/responses", content=raw,
                           headers={"content-type": "application/json"})
    expected = check("xai", "/v1/responses", json.loads(raw))
    assert expected is not None
    assert response.status_code == 422
    assert response.json() == expected.body
    [seen] = upstream.requests[before:]
    assert seen.headers["host"] == "api.x.ai"
    assert seen.headers[ORIGINAL_HOST_HEADER] == "api.x.ai"
    assert (seen.path, seen.rules, seen.body) == ("/v1/responses", "xai", raw)


def test_openai_sdk_gets_200_through_the_proxy(proxy: Mitmdump, upstream: MockUpstream) -> None:
    body = capture_json("pi-ai/openai_responses.json")
    body.pop("stream")
    before = len(upstream.requests)
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False) as http:
        sdk = openai_client(http)
        response = sdk.responses.create(**body, stream=False)
    assert response.output_text == MOCK_TEXT
    [seen] = upstream.requests[before:]
    assert (seen.rules, seen.status, seen.json["input"]) == ("openai", 200, body["input"])


def test_sse_passes_through_the_proxy(client: httpx.Client, upstream: MockUpstream) -> None:
    text = capture_bytes("codex/turn1_response.sse.txt").decode()
    upstream.queue_sse(text, chunk_delay=0.01)
    with client.stream("POST", "https://api.openai.com/v1/responses",
                       json=capture_json("codex/turn1_request.json")) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data:")]
    assert len(lines) == text.count("data:") == 7
    assert [json.loads(line[5:])["type"] for line in lines][-1] == "response.completed"


def test_openai_sdk_stream_through_the_proxy(proxy: Mitmdump) -> None:
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False) as http:
        events = list(openai_client(http).responses.create(model="gpt-4.1", input="hi", stream=True))
    assert [e.type for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed",
    ]
    assert events[-1].response.output_text == MOCK_TEXT  # type: ignore[union-attr]


@pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
def test_anthropic_sdk_through_the_proxy(proxy: Mitmdump, upstream: MockUpstream) -> None:
    body = capture_json("pi-ai/anthropic_messages.json")
    body.pop("stream")
    with httpx2.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False) as http:
        sdk = anthropic.Anthropic(api_key=API_KEY, http_client=http, max_retries=0)
        message = sdk.messages.create(**body, timeout=30)
    assert message.content[0].text == MOCK_TEXT  # type: ignore[union-attr]
    seen = upstream.requests[-1]
    assert (seen.rules, seen.headers["host"]) == ("anthropic", "api.anthropic.com")


def test_wait_for_output_raises_with_the_output(proxy: Mitmdump) -> None:
    assert "listening at 127.0.0.1:" in proxy.output()
    with pytest.raises(MitmdumpError, match="listening at"):
        proxy.wait_for_output("this line is never printed", timeout=0.2)


def openai_client(http: httpx.Client) -> openai.OpenAI:
    return openai.OpenAI(base_url="https://api.openai.com/v1", api_key=API_KEY, http_client=http, max_retries=0)


# ---------------------------------------------------------------- one mitmdump each


def test_addon_loaded_first_sees_the_real_host(
    mitmdump: Callable[..., Mitmdump], mock_upstream: Callable[..., MockUpstream], tmp_path: Path
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import logging\n"
        "class Probe:\n"
        "    def request(self, flow):\n"
        "        logging.getLogger('probe').warning('probe saw %s%s', flow.request.pretty_host, flow.request.path)\n"
        "addons = [Probe()]\n"
    )
    up = mock_upstream("openai")
    proxy = mitmdump(scripts=[probe, LOOPBACK_SCRIPT], options={"loopback_upstream": up.address})
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False) as http:
        response = http.post("https://api.deepseek.com/v1/chat/completions",
                             content=capture_bytes("pi-ai/chat_completions.json"))
    assert response.status_code == 200
    proxy.wait_for_output("probe saw api.deepseek.com/v1/chat/completions")


def test_non_loopback_server_connections_are_refused(
    mitmdump: Callable[..., Mitmdump], mock_upstream: Callable[..., MockUpstream]
) -> None:
    # eager: mitmproxy connects at CONNECT time, before any request hook could redirect the flow.
    # 127.0.0.2 is refused by the hook yet still loopback, so even a broken hook stays on this machine.
    up = mock_upstream("openai")
    proxy = mitmdump(scripts=[LOOPBACK_SCRIPT],
                     options={"loopback_upstream": up.address, "connection_strategy": "eager"})
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False) as http, pytest.raises(
        httpx.ProxyError
    ):
        http.post(f"https://127.0.0.2:{up.port}/v1/chat/completions", json={})
    proxy.wait_for_output(f"refusing non-loopback server 127.0.0.2:{up.port}")
    assert up.requests == []


def test_unset_target_kills_the_flow(
    mitmdump: Callable[..., Mitmdump], mock_upstream: Callable[..., MockUpstream]
) -> None:
    up = mock_upstream("openai")
    proxy = mitmdump(scripts=[LOOPBACK_SCRIPT])
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False) as http, pytest.raises(
        httpx.TransportError
    ):
        http.post(f"http://127.0.0.1:{up.port}/v1/chat/completions", json={})
    proxy.wait_for_output("loopback_upstream is not set")
    assert up.requests == []


def test_startup_failure_raises_with_output(confdir: Path) -> None:
    with pytest.raises(MitmdumpError, match="Cannot parse loopback_upstream option"):
        Mitmdump(scripts=[LOOPBACK_SCRIPT], options={"loopback_upstream": "api.x.ai:443"}, confdir=confdir)


def test_reverse_mode(mitmdump: Callable[..., Mitmdump], mock_upstream: Callable[..., MockUpstream]) -> None:
    up = mock_upstream("openai")
    proxy = mitmdump(scripts=[], mode=f"reverse:{up.url}")
    raw = capture_bytes("droid/0.225.2__two_images__turn2.json")
    with httpx.Client(trust_env=False) as http:
        response = http.post(f"{proxy.url}/v1/chat/completions", content=raw)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("Invalid parameter: messages with role 'tool'")
    assert up.requests[0].body == raw
    proxy.stop()
    assert not proxy.running
    proxy.stop()  # idempotent


# ---------------------------------------------------------------- the script, unit level


@pytest.mark.parametrize("spec", ["127.0.0.1:0", "127.0.0.1:70000", "localhost:80", "10.0.0.1:80", "127.0.0.1"])
def test_parse_target_rejects(spec: str) -> None:
    with pytest.raises(ValueError, match=r"127\.0\.0\.1:PORT"):
        parse_target(spec)


def test_parse_target_accepts_loopback() -> None:
    assert parse_target("127.0.0.1:8080") == 8080


@pytest.mark.parametrize(
    ("address", "via", "refused"),
    [(("127.0.0.1", 9), None, False), (("api.x.ai", 443), None, True), (("127.0.0.2", 80), None, True),
     (("127.0.0.1", 9), ("http", ("proxy.example", 3128)), True), (None, None, True)],
)
def test_server_connect_guard(address: tuple[str, int] | None, via: object, refused: bool) -> None:
    server = connection.Server(address=address)
    server.via = via  # type: ignore[assignment]
    client = connection.Client(peername=("127.0.0.1", 5), sockname=("127.0.0.1", 6), timestamp_start=0)
    LoopbackUpstream().server_connect(ServerConnectionHookData(server=server, client=client))
    assert (server.error is not None) == refused
