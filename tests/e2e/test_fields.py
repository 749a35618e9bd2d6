"""End to end: request fields an upstream refuses, and blank text, through a real mitmdump with llmfix.

The clients are the real ``anthropic`` and ``openai`` SDKs sending the captures of Claude Code (its
``context_management`` and ``output_config``), Codex (its ``prompt_cache_key``) and opencode (a Chat request with the
``prompt_cache_key`` opencode adds for OpenAI-compatible providers with ``setCacheKey``, anomalyco/opencode #22569; the
capture was made without it), over HTTPS through mitmproxy's CA, to strict mocks that refuse the field as each vendor
does: a relay with Anthropic's 400, GitHub Copilot's envelope, a FastAPI gateway's 422, Azure's
``unrecognized_request_argument``, vLLM's list in an OpenAI-shaped 400 (tests/upstreams/field_rules.py).

What a user would check: without llmfix every request is refused; with it the client gets 200. The first request to
such an upstream costs two upstream requests (the refusal, then the resend without the field), every later one one,
also after an llmfix restart and on a second instance sharing a real redis-server. Only the refused field goes:
the upstream gets the client's body without it, and a host that never refused it (Anthropic's own API among them)
gets it byte for byte. A refusal naming the conversation's content reaches the client unchanged, once.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from llmfix.memory.redis_store import QUIRKS
from llmfix.retry.learned import SYNC_S
from tests.e2e.harness import Mitmdump, loopback_proxy, sdk_kwargs
from tests.e2e.refusing_upstream import RefusingUpstream, refusing
from tests.redis_server import RedisServer, needs_redis, until
from tests.upstreams import field_rules
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.errors import anthropic_error

pytestmark = pytest.mark.timeout(240)
KEY = "sk-test-not-a-real-key-fields-7d1c"
CC = "claude-code/single_png__turn2.json"
CONTENT = "content.relay.test"
CONTENT_TEXT = "messages.1.content.0.text: Extra inputs are not permitted"


def claude_code() -> dict[str, Any]:
    return capture_json(CC)


def codex() -> dict[str, Any]:
    return capture_json("codex/turn2_request.json")


def opencode() -> dict[str, Any]:
    return {**capture_json("opencode/chat__mock-vision__two_png__turn2.json"), "prompt_cache_key": "ses_4f2a9c1e"}


@dataclass(frozen=True)
class Case:
    id: str
    host: str
    vendor: str
    field: str
    client: str  # "claude-code" (anthropic SDK), "codex" (openai SDK, Responses), "opencode" (openai SDK, Chat)
    body: Callable[[], dict[str, Any]]

    @property
    def status(self) -> int:
        return field_rules.rejection(self.vendor, [self.field], None).status


CASES = [
    Case("claude-code-relay", "relay.claude-like.test", "anthropic", "context_management", "claude-code", claude_code),
    Case("claude-code-copilot", "copilot-like.test", "copilot", "output_config", "claude-code", claude_code),
    Case("claude-code-fastapi", "fastapi.gateway.test", "fastapi", "context_management", "claude-code", claude_code),
    Case("codex-azure", "llmfix-test.openai.azure.com", "azure", "prompt_cache_key", "codex", codex),
    Case("opencode-vllm", "vllm.local.test", "vllm", "prompt_cache_key", "opencode", opencode),
]
IDS = [c.id for c in CASES]


def upstream_for_fields() -> RefusingUpstream:
    hosts = {c.host: refusing(c.vendor, c.field) for c in CASES}
    hosts[CONTENT] = lambda body: anthropic_error(CONTENT_TEXT, reason="content")
    return RefusingUpstream(hosts)


def send(proxy: Mitmdump, case: Case, body: dict[str, Any] | None = None, *, stream: bool = False) -> str:
    """The case's request as its client sends it; the answer's text."""
    body = case.body() if body is None else body
    if case.client == "claude-code":
        known = {k: body[k] for k in ("model", "messages", "system", "tools", "max_tokens", "thinking",
                                      "context_management", "output_config", "metadata") if k in body}
        extra = {k: v for k, v in body.items() if k not in known and k != "stream"}
        with httpx2.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=60) as http:
            sdk = anthropic.Anthropic(base_url=f"https://{case.host}", api_key=KEY, http_client=http, max_retries=0)
            if stream:
                with sdk.beta.messages.stream(**known, extra_body=extra, extra_query={"beta": "true"}) as events:
                    return "".join(events.text_stream)
            answer = sdk.beta.messages.create(**known, extra_body=extra, extra_query={"beta": "true"})
            return "".join(b.text for b in answer.content if b.type == "text")
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=60) as http:
        sdk = openai.OpenAI(base_url=f"https://{case.host}/openai/v1", api_key=KEY, http_client=http, max_retries=0)
        if case.client == "codex":
            return sdk.responses.create(**sdk_kwargs(sdk.responses.create, body)).output_text
        chat = sdk.chat.completions.create(**sdk_kwargs(sdk.chat.completions.create, body))
        return chat.choices[0].message.content or ""


def refused(proxy: Mitmdump, case: Case, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    """The case's request, which must be refused: the status and the exact body the client got."""
    with pytest.raises((anthropic.APIStatusError, openai.APIStatusError)) as error:
        send(proxy, case, body)
    return error.value.status_code, error.value.response.content


def statuses(upstream: RefusingUpstream, before: int) -> list[int]:
    return [r.status for r in upstream.requests[before:]]


@pytest.fixture(scope="module")
def upstream() -> Iterator[RefusingUpstream]:
    with upstream_for_fields() as up:
        yield up


@pytest.fixture(scope="module")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fields-confdir")


@pytest.fixture(scope="module")
def proxy(upstream: RefusingUpstream, confdir: Path) -> Iterator[Mitmdump]:
    with loopback_proxy(upstream, confdir, llmfix_memory=str(confdir / "memory.sqlite3"),
                        llmfix_log=str(confdir / "changes.jsonl")) as p:
        yield p


def test_without_llmfix_every_capture_is_refused(upstream: RefusingUpstream, tmp_path: Path) -> None:
    with loopback_proxy(upstream, tmp_path / "bare", llmfix=False) as bare:
        for case in CASES:
            before = len(upstream.requests)
            status, _ = refused(bare, case)
            assert status == case.status
            [seen] = upstream.requests[before:]
            assert case.field in seen.json and seen.reason == f"refused:{case.field}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_first_request_is_refused_then_resent_once_without_the_field(
        proxy: Mitmdump, upstream: RefusingUpstream, confdir: Path, case: Case) -> None:
    before = len(upstream.requests)
    assert send(proxy, case)
    first, second = upstream.requests[before:]
    assert (first.status, second.status) == (case.status, 200)
    assert case.field in first.json and case.field not in second.json
    assert second.json == {k: v for k, v in first.json.items() if k != case.field}  # only the refused field went
    assert any(KEY in value for value in second.headers.values())  # the client's own credentials
    # the console line is printed before the client gets its answer, but read from mitmdump's pipe a moment later:
    # waited for as this case's own line (an earlier case's retry line is there already)
    line = proxy.wait_for_output(f"learned strip:{case.field}=true for {case.host}:443")
    assert f"retry: {case.status} refused-field" in proxy.output()[: line.end()].splitlines()[-1]
    events = [json.loads(x) for x in (confdir / "changes.jsonl").read_text().splitlines()]
    assert any(e.get("event") == "retry" and e["host"] == case.host and e["learned"] == [
        {"flag": f"strip:{case.field}", "value": True, "new": True}] for e in events)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_later_request_goes_once_without_it(proxy: Mitmdump, upstream: RefusingUpstream, confdir: Path,
                                                  case: Case) -> None:
    before = len(upstream.requests)
    assert send(proxy, case, stream=case.client == "claude-code")  # Claude Code streams: up front, it streams
    [seen] = upstream.requests[before:]
    assert seen.status == 200 and case.field not in seen.json
    changes = [json.loads(x) for x in (confdir / "changes.jsonl").read_text().splitlines()]
    assert any(c.get("repair") == "strip-refused-fields" and c["host"] == case.host and
               "learned from" in c["summary"] and "refused-field" in c["summary"] for c in changes)


def test_hosts_that_take_the_fields_keep_them_byte_for_byte(proxy: Mitmdump, upstream: RefusingUpstream) -> None:
    for url, raw in (("https://api.anthropic.com/v1/messages?beta=true", capture_bytes(CC)),
                     ("https://other.gateway.test/v1/messages", capture_bytes(CC)),
                     ("https://api.openai.com/v1/responses", capture_bytes("codex/turn2_request.json"))):
        before = len(upstream.requests)
        with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=60) as http:
            answer = http.post(url, content=raw, headers={"content-type": "application/json", "x-api-key": KEY,
                                                          "authorization": f"Bearer {KEY}"})
        assert answer.status_code == 200, answer.text
        [seen] = upstream.requests[before:]
        assert seen.body == raw, url


def test_a_refusal_naming_the_conversation_reaches_the_client_unchanged(proxy: Mitmdump,
                                                                        upstream: RefusingUpstream) -> None:
    case = Case("content", CONTENT, "anthropic", "", "claude-code", claude_code)
    before = len(upstream.requests)
    status, body = refused(proxy, case)
    assert statuses(upstream, before) == [400]
    assert status == 400 and json.loads(body) == anthropic_error(CONTENT_TEXT, reason="").body


def test_after_a_restart_with_the_same_memory_one_request(proxy: Mitmdump, upstream: RefusingUpstream,
                                                          confdir: Path) -> None:
    proxy.wait_for_output("learned strip:prompt_cache_key")  # taught by the tests above (module order)
    proxy.stop()
    with loopback_proxy(upstream, confdir, llmfix_memory=str(confdir / "memory.sqlite3")) as again:
        for case in CASES:
            before = len(upstream.requests)
            assert send(again, case)
            assert statuses(upstream, before) == [200], case.id


def test_anthropics_own_api_learns_nothing(tmp_path: Path) -> None:
    """A refusal by Anthropic's own API depends on the model and the client's beta header: passed on, never learned."""
    with RefusingUpstream({"api.anthropic.com": refusing("anthropic", "context_management")}) as up, \
            loopback_proxy(up, tmp_path / "conf") as p:
        case = Case("anthropic", "api.anthropic.com", "anthropic", "context_management", "claude-code", claude_code)
        for _ in range(2):
            status, body = refused(p, case)
            assert status == 400 and b"context_management: Extra inputs are not permitted" in body
        assert [r.status for r in up.requests] == [400, 400]
        assert all("context_management" in r.json for r in up.requests)
        p.wait_for_output("not resent: no flag llmfix could learn would change the body")


def test_claude_code_resumed_with_an_empty_text_block(tmp_path: Path) -> None:
    """Anthropic's 400 for a blank text block, without llmfix; with it the block is dropped and one request is 200."""
    body = claude_code()
    body["messages"][2]["content"].insert(0, {"type": "text", "text": ""})  # what an interrupted stream leaves
    case = Case("resumed", "api.anthropic.com", "anthropic", "", "claude-code", lambda: copy.deepcopy(body))
    with RefusingUpstream({}) as up:
        with loopback_proxy(up, tmp_path / "bare", llmfix=False) as bare:
            status, text = refused(bare, case)
            assert status == 400 and b"text content blocks must be non-empty" in text
        with loopback_proxy(up, tmp_path / "conf") as p:
            before = len(up.requests)
            assert send(p, case)
            [seen] = up.requests[before:]
            assert seen.status == 200 and seen.json["messages"][2]["content"] == claude_code()["messages"][2]["content"]
            p.wait_for_output("drop-empty-text: messages[2].content[0]: empty text block dropped")


def shared(redis: RedisServer) -> Callable[[], bool]:
    """Whether every case's field is learned in Redis."""
    def check() -> bool:
        with redis.client() as c:
            fields = {f.decode().rsplit("|", 1)[-1] for f in c.hkeys(QUIRKS)}
        return {f"strip:{case.field}" for case in CASES} <= fields
    return check


@needs_redis
def test_a_second_instance_sharing_redis_sends_once(tmp_path: Path) -> None:
    with RedisServer() as redis, upstream_for_fields() as up:
        options = {"llmfix_memory": redis.url, "llmfix_memory_timeout": "5s"}
        with loopback_proxy(up, tmp_path / "a", **options) as a:
            a.wait_for_output("memory: shared through")
            for case in CASES:
                before = len(up.requests)
                assert send(a, case)
                assert statuses(up, before) == [case.status, 200], case.id
            assert until(shared(redis), 10.0)
            with loopback_proxy(up, tmp_path / "b", **options) as b:
                b.wait_for_output("learned quirk(s) read from")  # its copy of the fleet's quirks, first read
                time.sleep(SYNC_S)  # ordering: the view takes that copy on the first request SYNC_S after its start
                for case in CASES:
                    before = len(up.requests)
                    assert send(b, case)
                    assert statuses(up, before) == [200], case.id
        for key, value in redis.dump().items():
            assert KEY.encode() not in key + value
