"""End to end: Claude Code's capture to Anthropic-compatible vendors through a real mitmdump.

The anthropic SDK sends Claude Code's turn (a ``role:"system"`` entry in ``messages[]``) the way Claude
Code does (``…/v1/messages?beta=true``, streamed). Without llmfix the strict DeepSeek / GLM / MiniMax
mocks answer their 400/422; with it 200, and the mock gets every system text once, in order, as
``<system-reminder>`` blocks, the tool_result still first, the image and ``cache_control`` kept. Forward
mode goes over TLS with mitmproxy's CA (what ``HTTPS_PROXY`` + ``NODE_EXTRA_CA_CERTS`` give Claude Code);
reverse mode puts llmfix in front of the vendor with ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT/anthropic``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import pytest

from tests.e2e.harness import FIX_SCRIPT, Mitmdump, MitmdumpError, loopback_proxy
from tests.upstreams.canned import MOCK_TEXT
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import ORIGINAL_HOST_HEADER, MockUpstream, RecordedRequest

pytestmark = pytest.mark.timeout(180)
CC = "claude-code/single_png__turn2.json"
SONNET = "claude-code/sonnet45__single_png__turn2.json"
KEY = "sk-test-not-a-real-key-12"
VENDORS = [  # host, base path Claude Code is given, status without llmfix, a piece of the rejection text
    ("api.deepseek.com", "/anthropic", 400,
     "messages[1].role: unknown variant `system`, expected `user` or `assistant`"),
    ("open.bigmodel.cn", "/api/anthropic", 422, "Input should be 'user' or 'assistant'"),
    ("api.z.ai", "/api/anthropic", 422, "Input should be 'user' or 'assistant'"),
    ("api.minimax.io", "/anthropic", 400, "chat content has invalid message role: system (2013)"),
]


def start(upstream: MockUpstream, confdir: Path, *, llmfix: bool = True, mode: str | None = None,
          **options: str) -> Mitmdump:
    return loopback_proxy(upstream, confdir, llmfix=llmfix, mode=mode, **options)


@pytest.fixture(scope="module")
def fixed(upstream: MockUpstream, confdir: Path, tmp_path_factory) -> Iterator[Mitmdump]:
    log = tmp_path_factory.mktemp("log") / "changes.jsonl"
    with start(upstream, confdir, llmfix_log=str(log)) as proxy:
        proxy.log_path = log  # type: ignore[attr-defined]
        yield proxy


@pytest.fixture(scope="module")
def bare(upstream: MockUpstream, confdir: Path) -> Iterator[Mitmdump]:
    with start(upstream, confdir, llmfix=False) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def reverse(upstream: MockUpstream, confdir: Path) -> Iterator[Mitmdump]:
    """llmfix in front of DeepSeek: ``--mode reverse:https://api.deepseek.com`` (the loopback script then
    sends the flow to the mock instead of the internet)."""
    with start(upstream, confdir, mode="reverse:https://api.deepseek.com") as proxy:
        yield proxy


def sdk_via_proxy(proxy: Mitmdump, base_url: str) -> anthropic.Anthropic:
    http = httpx2.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=30)
    return anthropic.Anthropic(api_key=KEY, base_url=base_url, http_client=http, max_retries=0)


def sdk_direct(base_url: str, **headers: str) -> anthropic.Anthropic:
    http = httpx2.Client(trust_env=False, timeout=30)
    return anthropic.Anthropic(api_key=KEY, base_url=base_url, http_client=http, max_retries=0,
                               default_headers=headers)


def send(client: anthropic.Anthropic, body: dict[str, Any]) -> str:
    """Claude Code's request through the SDK (``?beta=true``, streamed); the streamed answer's text."""
    known = {k: body[k] for k in ("model", "messages", "system", "tools", "max_tokens", "thinking",
                                  "context_management", "output_config", "metadata") if k in body}
    extra = {k: v for k, v in body.items() if k not in known and k != "stream"}
    with client.beta.messages.stream(**known, extra_body=extra, extra_query={"beta": "true"}) as stream:
        return "".join(stream.text_stream)


def received(upstream: MockUpstream, before: int) -> RecordedRequest:
    [seen] = upstream.requests[before:]
    return seen


def texts(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        for b in content:
            if b.get("type") == "text":
                out.append(b["text"])
            if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                out += [c["text"] for c in b["content"] if c.get("type") == "text"]
    return out


def system_texts(body: dict[str, Any]) -> list[str]:
    found = []
    for m in body["messages"]:
        if m["role"] == "system":
            found += [m["content"]] if isinstance(m["content"], str) else [b["text"] for b in m["content"]]
    return found


def blocks_of(body: dict[str, Any], kind: str) -> list[Any]:
    found = []
    for m in body["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("type") == kind:
                found.append(b)
            if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                found += [c for c in b["content"] if c.get("type") == kind]
    return found


def assert_folded(sent: dict[str, Any], got: dict[str, Any]) -> None:
    """What a user would check at the vendor: nothing lost, nothing doubled, order and placement right."""
    assert {m["role"] for m in got["messages"]} == {"user", "assistant"}
    joined = "\x00".join(texts(got))
    positions = []
    for t in system_texts(sent):
        assert joined.count(t) == 1, "a system text is missing or doubled"
        positions.append(joined.index(t))
    assert positions == sorted(positions)
    assert [t for t in texts(got) if "<system-reminder>\n# Environment" not in t] == texts(sent)[:2] + texts(sent)[3:]
    for m in got["messages"]:
        kinds = [b["type"] for b in m["content"]] if isinstance(m["content"], list) else []
        if "tool_result" in kinds:
            assert kinds[: kinds.count("tool_result")] == ["tool_result"] * kinds.count("tool_result")
    assert blocks_of(got, "image") == blocks_of(sent, "image")
    assert json.dumps(got).count('"cache_control"') == json.dumps(sent).count('"cache_control"') <= 4
    assert {k: v for k, v in got.items() if k != "messages"} == {k: v for k, v in sent.items() if k != "messages"}


# --------------------------------------------------------------------------- forward mode, TLS


@pytest.mark.parametrize(("host", "prefix", "status", "text"), VENDORS)
def test_without_llmfix_the_vendor_rejects_claude_codes_request(
        bare: Mitmdump, upstream: MockUpstream, host: str, prefix: str, status: int, text: str) -> None:
    with pytest.raises(anthropic.APIStatusError) as err:
        send(sdk_via_proxy(bare, f"https://{host}{prefix}"), capture_json(CC))
    assert err.value.status_code == status
    assert text in json.dumps(err.value.body)


@pytest.mark.parametrize(("host", "prefix", "status", "text"), VENDORS)
def test_with_llmfix_the_vendor_answers_200_and_gets_every_system_text_once_in_order(
        fixed: Mitmdump, upstream: MockUpstream, host: str, prefix: str, status: int, text: str) -> None:
    before = len(upstream.requests)
    answer = send(sdk_via_proxy(fixed, f"https://{host}{prefix}"), capture_json(CC))
    assert answer == MOCK_TEXT
    seen = received(upstream, before)
    assert (seen.status, seen.path) == (200, f"{prefix}/v1/messages?beta=true")
    assert seen.headers[ORIGINAL_HOST_HEADER] == host
    assert_folded(capture_json(CC), seen.json)


def test_anthropic_gets_the_sdks_bytes_unchanged(fixed: Mitmdump, bare: Mitmdump, upstream: MockUpstream) -> None:
    """api.anthropic.com takes mid-conversation system messages: the same request with and without llmfix."""
    bodies = []
    for proxy in (bare, fixed):
        before = len(upstream.requests)
        assert send(sdk_via_proxy(proxy, "https://api.anthropic.com"), capture_json(CC)) == MOCK_TEXT
        bodies.append(received(upstream, before).body)
    assert bodies[0] == bodies[1]
    assert b'"role":"system"' in bodies[1]


@pytest.mark.parametrize(("name", "url"), [
    (CC, "https://api.anthropic.com/v1/messages?beta=true"),
    *[(SONNET, f"https://{host}{prefix}/v1/messages?beta=true") for host, prefix, _, _ in VENDORS],
    (SONNET, "https://api.anthropic.com/v1/messages?beta=true"),
])
def test_valid_requests_leave_byte_identical(fixed: Mitmdump, upstream: MockUpstream, name: str, url: str) -> None:
    raw = capture_bytes(name)
    before = len(upstream.requests)
    with httpx.Client(proxy=fixed.url, verify=fixed.ssl_context(), trust_env=False, timeout=30) as c:
        response = c.post(url, content=raw, headers={"content-type": "application/json", "x-api-key": KEY})
    assert response.status_code == 200, response.text
    assert received(upstream, before).body == raw


def test_change_line_and_log_say_what_was_folded_and_hold_no_secrets(fixed: Mitmdump, upstream: MockUpstream) -> None:
    send(sdk_via_proxy(fixed, "https://api.deepseek.com/anthropic"), capture_json(CC))
    fixed.wait_for_output("fold-system-messages: messages[1]: system message (9198 chars)")
    log = fixed.log_path.read_text()  # type: ignore[attr-defined]
    records = [json.loads(line) for line in log.splitlines()]
    fold = [r for r in records if r["repair"] == "fold-system-messages"]
    assert fold and fold[-1]["profile"] == "deepseek-anthropic" and fold[-1]["host"] == "api.deepseek.com"
    assert "output_config dropped" in fold[-1]["summary"]
    assert fold[-1]["before"]["output_config"] == {"effort": "medium"}
    assert KEY not in fixed.output() + log and "iVBOR" not in fixed.output() + log


# --------------------------------------------------------------------------- reverse mode


def test_reverse_mode_in_front_of_deepseek_keeps_the_path_prefix(reverse: Mitmdump, upstream: MockUpstream) -> None:
    """ANTHROPIC_BASE_URL=http://127.0.0.1:PORT/anthropic: the prefix and ?beta=true reach the vendor as sent."""
    before = len(upstream.requests)
    assert send(sdk_direct(f"{reverse.url}/anthropic"), capture_json(CC)) == MOCK_TEXT
    seen = received(upstream, before)
    assert (seen.status, seen.path) == (200, "/anthropic/v1/messages?beta=true")
    assert seen.headers[ORIGINAL_HOST_HEADER] == "api.deepseek.com"
    assert_folded(capture_json(CC), seen.json)


def test_reverse_mode_to_a_loopback_gateway_with_a_profiles_file(confdir: Path, tmp_path: Path) -> None:
    """``--mode reverse:http://127.0.0.1:PORT``: the host is 127.0.0.1, so the profiles file says what it is."""
    with MockUpstream(rules="deepseek") as gateway:
        with pytest.raises(anthropic.BadRequestError) as err:  # without llmfix
            send(sdk_direct(f"{gateway.url}/anthropic"), capture_json(CC))
        assert "unknown variant `system`" in err.value.message
        profiles = tmp_path / "profiles.toml"
        profiles.write_text(f'[hosts."127.0.0.1:{gateway.port}"]\nbase = "deepseek"\n')
        with Mitmdump(scripts=[FIX_SCRIPT], confdir=confdir, mode=f"reverse:http://127.0.0.1:{gateway.port}",
                      options={"llmfix_memory": ":memory:", "llmfix_profiles": str(profiles)}) as proxy:
            assert send(sdk_direct(f"{proxy.url}/anthropic"), capture_json(CC)) == MOCK_TEXT
            proxy.wait_for_output("fold-system-messages: messages[1]")
        seen = gateway.requests[-1]
        assert (seen.status, seen.path) == (200, "/anthropic/v1/messages?beta=true")
        assert_folded(capture_json(CC), seen.json)


def test_reverse_mode_takes_no_path_in_its_target(confdir: Path) -> None:
    """mitmproxy refuses ``reverse:https://api.deepseek.com/anthropic``: the path goes in the client's base URL."""
    with pytest.raises(MitmdumpError, match="Invalid server specification"):
        Mitmdump(scripts=[FIX_SCRIPT], confdir=confdir, mode="reverse:https://api.deepseek.com/anthropic",
                 startup_timeout=20)
