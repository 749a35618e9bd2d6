"""The strict mock upstream, exercised directly over loopback with httpx and the vendor SDKs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import anthropic
import httpx
import httpx2
import openai
import pytest
from mitmproxy.net import encoding

from tests.upstreams.canned import MOCK_TEXT
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import ORIGINAL_HOST_HEADER, MockUpstream
from tests.upstreams.rules import check

pytestmark = pytest.mark.timeout(60)
API_KEY = "sk-test-not-a-real-key"


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=15) as c:
        yield c


def _data_lines(response: httpx.Response) -> list[str]:
    return [line for line in response.iter_lines() if line.startswith("data:")]


def test_valid_body_gets_200_and_is_recorded(client: httpx.Client) -> None:
    raw = capture_bytes("pi-ai/openai_responses.json")
    body = json.loads(raw)
    body["stream"] = False
    with MockUpstream(rules="openai") as up:
        response = client.post(f"{up.url}/v1/responses", json=body, headers={"x-test": "1"})
        assert response.status_code == 200
        assert response.json()["output"][0]["content"][0]["text"] == MOCK_TEXT
        [seen] = up.requests
    assert (seen.method, seen.path, seen.rules, seen.status, seen.reason) == (
        "POST", "/v1/responses", "openai", 200, None)
    assert seen.json == body
    assert seen.headers["x-test"] == "1"


@pytest.mark.parametrize(
    ("name", "rules", "path"),
    [
        ("pi-ai/xai_responses.json", "xai", "/v1/responses"),
        ("droid/0.225.2__two_images__turn2.json", "openai", "/v1/chat/completions"),
        ("droid/0.215.0__two_images__turn2.json", "deepseek", "/v1/chat/completions"),
    ],
)
def test_bad_body_gets_the_exact_rejection(client: httpx.Client, name: str, rules: str, path: str) -> None:
    raw = capture_bytes(name)
    expected = check(rules, path, json.loads(raw))
    assert expected is not None
    with MockUpstream(rules=rules) as up:
        response = client.post(up.url + path, content=raw, headers={"content-type": "application/json"})
        [seen] = up.requests
    assert response.status_code == expected.status
    assert response.json() == expected.body
    assert seen.body == raw
    assert (seen.status, seen.reason) == (expected.status, expected.reason)


@pytest.mark.parametrize(
    ("host", "status"),
    [("api.x.ai", 422), ("api.openai.com", 200), ("api.deepseek.com", 200), ("example.test", 200)],
)
def test_by_host_picks_rules_from_the_original_host(client: httpx.Client, host: str, status: int) -> None:
    raw = capture_bytes("pi-ai/xai_responses.json")
    with MockUpstream(rules="by-host") as up:
        response = client.post(f"{up.url}/v1/responses", content=raw,
                               headers={ORIGINAL_HOST_HEADER: host, "content-type": "application/json"})
        [seen] = up.requests
    assert response.status_code == status
    assert seen.headers[ORIGINAL_HOST_HEADER] == host


def test_by_host_falls_back_to_the_host_header(client: httpx.Client) -> None:
    raw = capture_bytes("pi-ai/xai_responses.json")
    with MockUpstream() as up:
        response = client.post(f"{up.url}/v1/responses", content=raw, headers={"host": "api.x.ai"})
        assert response.status_code == 422
        assert up.requests[0].rules == "xai"


@pytest.mark.parametrize("content_encoding", ["gzip", "br", "zstd", "deflate"])
def test_compressed_request_bodies_are_decoded(client: httpx.Client, content_encoding: str) -> None:
    raw = capture_bytes("pi-ai/xai_responses.json")
    wire = encoding.encode(raw, content_encoding)
    assert isinstance(wire, bytes) and wire != raw
    with MockUpstream(rules="xai") as up:
        response = client.post(f"{up.url}/v1/responses", content=wire,
                               headers={"content-encoding": content_encoding, "content-type": "application/json"})
        [seen] = up.requests
    assert response.status_code == 422
    assert seen.body == wire
    assert seen.json == json.loads(raw)


def test_chunked_request_body_is_read(client: httpx.Client) -> None:
    raw = capture_bytes("pi-ai/xai_responses.json")
    with MockUpstream(rules="xai") as up:
        response = client.post(f"{up.url}/v1/responses", content=iter([raw[:100], raw[100:]]))
        [seen] = up.requests
    assert seen.headers["transfer-encoding"] == "chunked"
    assert seen.body == raw
    assert response.status_code == 422


@pytest.mark.parametrize(
    ("content", "headers"),
    [(b"{not json", {}), (b"[1, 2]", {}), (b"\x00\x01garbage", {"content-encoding": "gzip"}),
     (b"{}", {"content-encoding": "snappy"})],
)
@pytest.mark.parametrize("rules", ["openai", "xai", "anthropic", "deepseek"])
def test_invalid_json_gets_400(client: httpx.Client, rules: str, content: bytes, headers: dict[str, str]) -> None:
    with MockUpstream(rules=rules) as up:
        response = client.post(f"{up.url}/v1/chat/completions", content=content, headers=headers)
        [seen] = up.requests
    assert response.status_code == 400
    assert seen.reason == "invalid-json"
    assert response.json()


def test_unknown_url_gets_404(client: httpx.Client) -> None:
    with MockUpstream(rules="openai") as up:
        assert client.get(f"{up.url}/v1/models").status_code == 404
        assert client.post(f"{up.url}/v1/embeddings", json={}).status_code == 404
        assert [r.status for r in up.requests] == [404, 404]


def test_keep_alive_serves_several_requests(client: httpx.Client) -> None:
    body = capture_json("pi-ai/chat_completions.json") | {"stream": False}
    with MockUpstream(rules="openai") as up:
        statuses = [client.post(f"{up.url}/v1/chat/completions", json=body).status_code for _ in range(3)]
        assert statuses == [200, 200, 200]
        assert len(up.requests) == 3


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_queued_sse_arrives_event_by_event(client: httpx.Client, framing: str) -> None:
    text = capture_bytes("codex/turn1_response.sse.txt").decode()
    expected_events = text.count("data:")
    body = capture_json("codex/turn1_request.json")
    with MockUpstream(rules="openai") as up:
        up.queue_sse(text, chunk_delay=0.01, framing=framing)  # type: ignore[arg-type]
        with client.stream("POST", f"{up.url}/v1/responses", json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert ("transfer-encoding" in response.headers) == (framing == "chunked")
            lines = _data_lines(response)
        # the queue is FIFO and used once: the next stream gets the default answer
        with client.stream("POST", f"{up.url}/v1/responses", json=body) as response:
            default_lines = _data_lines(response)
    assert len(lines) == expected_events == 7
    assert json.loads(lines[-1][len("data:"):])["type"] == "response.completed"
    assert json.loads(default_lines[-1][len("data:"):])["response"]["output"][0]["content"][0]["text"] == MOCK_TEXT


def test_queued_sse_is_byte_exact(client: httpx.Client) -> None:
    text = capture_bytes("claude-code/single_png__turn1_response.sse.txt").decode()
    with MockUpstream(rules="anthropic") as up:
        up.queue_sse(text)
        response = client.post(f"{up.url}/v1/messages", json=capture_json("claude-code/single_png__turn2.json"))
    assert response.text == text


def test_rejected_stream_does_not_consume_the_queue(client: httpx.Client) -> None:
    with MockUpstream(rules="xai") as up:
        up.queue_sse("data: first\n\n")
        bad = client.post(f"{up.url}/v1/responses", content=capture_bytes("pi-ai/xai_responses.json"))
        good = client.post(f"{up.url}/v1/responses", json={"input": "hi", "stream": True})
    assert bad.status_code == 422
    assert good.text == "data: first\n\n"


@pytest.mark.parametrize(
    ("path", "events"),
    [("/v1/chat/completions", 2), ("/v1/responses", 9), ("/v1/messages", 6)],
)
def test_default_streams(client: httpx.Client, path: str, events: int) -> None:
    with MockUpstream(rules="spec") as up, client.stream("POST", up.url + path,
                                                         json={"model": "m", "stream": True}) as response:
        assert len(_data_lines(response)) == events


def test_openai_sdk_parses_the_default_answers() -> None:
    with MockUpstream(rules="openai") as up, httpx.Client(trust_env=False) as http:
        sdk = openai.OpenAI(base_url=f"{up.url}/v1", api_key=API_KEY, http_client=http, max_retries=0)
        chat = sdk.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}])
        response = sdk.responses.create(model="gpt-4.1", input="hi")
        chunks = list(sdk.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}],
                                                  stream=True))
        with sdk.responses.stream(model="gpt-4.1", input="hi") as stream:
            final = stream.get_final_response()
    assert chat.choices[0].message.content == MOCK_TEXT
    assert response.output_text == MOCK_TEXT
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == MOCK_TEXT
    assert final.output_text == MOCK_TEXT


def test_anthropic_sdk_parses_the_default_answers() -> None:
    # anthropic >= 2 is built on httpx2 and refuses an httpx.Client
    with MockUpstream(rules="anthropic") as up, httpx2.Client(trust_env=False) as http:
        sdk = anthropic.Anthropic(base_url=up.url, api_key=API_KEY, http_client=http, max_retries=0)
        message = sdk.messages.create(model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        with sdk.messages.stream(model="claude-x", max_tokens=10,
                                 messages=[{"role": "user", "content": "hi"}]) as stream:
            final = stream.get_final_message()
    assert message.content[0].text == MOCK_TEXT  # type: ignore[union-attr]
    assert final.content[0].text == MOCK_TEXT  # type: ignore[union-attr]


def test_sdk_surfaces_the_rejection() -> None:
    body = capture_json("pi-ai/xai_responses.json")
    body.pop("stream")
    with MockUpstream(rules="xai") as up, httpx.Client(trust_env=False) as http:
        sdk = openai.OpenAI(base_url=f"{up.url}/v1", api_key=API_KEY, http_client=http, max_retries=0)
        with pytest.raises(openai.UnprocessableEntityError) as info:
            sdk.responses.create(**body)
    assert info.value.status_code == 422
    assert "untagged enum ModelInput" in info.value.response.json()["error"]


def test_stop_ends_a_slow_stream_and_refuses_new_connections() -> None:
    up = MockUpstream(rules="openai").start()
    url = up.url
    up.queue_sse("data: tick\n\n" * 100, chunk_delay=5.0)
    received: list[str] = []
    first_line = threading.Event()

    def consume() -> None:
        try:
            with httpx.Client(trust_env=False, timeout=30) as http, http.stream(
                "POST", f"{url}/v1/chat/completions", json={"messages": [], "stream": True}
            ) as response:
                for line in response.iter_lines():
                    received.append(line)
                    first_line.set()
        except httpx.HTTPError:
            pass
        finally:
            first_line.set()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    assert first_line.wait(15)
    up.stop()
    reader.join(15)
    assert not reader.is_alive()
    assert 1 <= received.count("data: tick") < 100
    with pytest.raises(httpx.ConnectError), httpx.Client(trust_env=False) as http:
        http.post(f"{url}/v1/chat/completions", json={})


def test_rejects_unknown_rule_set() -> None:
    with pytest.raises(ValueError, match="rules must be"):
        MockUpstream(rules="grok")


def test_queue_sse_bounds_the_delay() -> None:
    with pytest.raises(ValueError, match="chunk_delay"):
        MockUpstream(rules="openai").queue_sse("data: x\n\n", chunk_delay=60)


def test_json_too_deep_to_parse_is_answered_as_invalid_json_and_the_mock_keeps_serving() -> None:
    deep = b'{"messages":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with MockUpstream(rules="openai") as up:
        response = httpx.post(f"{up.url}/v1/chat/completions", content=deep, timeout=10)
        assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"
        ok = httpx.post(f"{up.url}/v1/chat/completions", json={"model": "m", "messages": [
            {"role": "user", "content": "hi"}]}, timeout=10)
        assert ok.status_code == 200
