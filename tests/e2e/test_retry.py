"""Issue 14 end to end: repair-and-retry with learned quirks, through a real mitmdump with llmfix.

Strict mocks play upstreams llmfix has no profile for (so it starts from the public spec): an xAI-like
Responses gateway (xAI's 422 for array tool outputs), a DeepSeek-like Chat gateway (DeepSeek's 400 for
text-part arrays in tool messages), a DeepSeek-Anthropic-like endpoint. The clients are the real
``openai`` and ``anthropic`` SDKs (and httpx), over HTTPS through mitmproxy's CA.

Each test counts what the mock received: the first request to a quirky host costs two upstream
requests (the rejection, then the repaired resend) and the client sees only the 200; after that, and
after a restart with the same confdir, one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from llmfix.profiles import FLAGS
from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.e2e.quirky_upstream import QuirkyUpstream, deepseek_anthropic_system
from tests.upstreams.captures import capture_json
from tests.upstreams.errors import XAI_DESERIALIZE, openai_error, xai_error
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(180)
FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
KEY = "sk-test-not-a-real-key-4242"


def start(upstream: MockUpstream, confdir: Path, **options: str) -> Mitmdump:
    opts = {"loopback_upstream": upstream.address, **options}
    return Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=opts, confdir=confdir)


def http_client(proxy: Mitmdump) -> httpx.Client:
    return httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=60)


def openai_sdk(proxy: Mitmdump, http: httpx.Client, host: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"https://{host}/v1", api_key=KEY, http_client=http, max_retries=0)


def xai_body(question: str = "What colours do you see in it?", *, stream: bool = False) -> dict[str, Any]:
    """pi-ai's real xAI capture: a ``function_call_output`` whose output is ``[input_text, input_image]``."""
    body = capture_json("pi-ai/xai_responses.json")
    body["input"][-1]["content"][0]["text"] = question
    body["stream"] = stream
    return body


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# -- an xAI-like Responses gateway ---------------------------------------------------------------------------

XAI_LIKE = "grok.gateway.test"


@pytest.fixture(scope="module")
def xai_like() -> Iterator[MockUpstream]:
    with MockUpstream(rules="xai") as up:
        yield up


@pytest.fixture(scope="module")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("retry-confdir")


@pytest.fixture(scope="module")
def proxy(xai_like: MockUpstream, confdir: Path) -> Iterator[Mitmdump]:
    with start(xai_like, confdir, llmfix_log=str(confdir / "changes.jsonl")) as p:  # memory in confdir
        yield p


def test_first_request_is_rejected_learned_repaired_and_resent_once(proxy: Mitmdump, xai_like: MockUpstream,
                                                                    confdir: Path) -> None:
    before = len(xai_like.requests)
    with http_client(proxy) as http:
        response = openai_sdk(proxy, http, XAI_LIKE).responses.create(**xai_body())
    assert response.status == "completed"
    first, second = xai_like.requests[before:]
    assert (first.status, first.reason) == (422, "tool-output-not-string")
    assert second.status == 200
    assert isinstance(second.json["input"][3]["output"], str)  # hoisted: the image follows in a user message
    assert second.json["input"][4]["content"][1]["type"] == "input_image"
    assert second.headers["authorization"] == f"Bearer {KEY}"  # the client's own headers
    assert second.headers["host"] == XAI_LIKE
    line = proxy.wait_for_output("retry: 422 xai-model-input")
    assert "learned responses_tool_output_array=false" in proxy.output()[line.start():].splitlines()[0]
    [event] = [r for r in records(confdir / "changes.jsonl") if r.get("event") == "retry"]
    assert event["learned"] == [{"flag": "responses_tool_output_array", "value": False, "new": True}]
    assert event["outcome"] == 200 and event["host"] == XAI_LIKE
    text = proxy.output() + (confdir / "changes.jsonl").read_text()
    assert KEY not in text and "iVBOR" not in text


def test_next_request_is_repaired_up_front(proxy: Mitmdump, xai_like: MockUpstream) -> None:
    before = len(xai_like.requests)
    with http_client(proxy) as http:
        response = openai_sdk(proxy, http, XAI_LIKE).responses.create(**xai_body("And now?"))
    assert response.status == "completed"
    [seen] = xai_like.requests[before:]
    assert seen.status == 200 and isinstance(seen.json["input"][3]["output"], str)


def test_streamed_retried_answer_is_parsed_by_the_sdk(xai_like: MockUpstream, tmp_path: Path) -> None:
    with start(xai_like, tmp_path / "conf") as fresh:  # a new memory: this host is unknown again
        before = len(xai_like.requests)
        with http_client(fresh) as http:
            events = list(openai_sdk(fresh, http, XAI_LIKE).responses.create(**xai_body(stream=True)))
    assert [r.status for r in xai_like.requests[before:]] == [422, 200]
    assert events[-1].type == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta")


def test_after_a_restart_with_the_same_confdir_one_request(proxy: Mitmdump, xai_like: MockUpstream,
                                                           confdir: Path) -> None:
    proxy.wait_for_output("retry: 422")  # learned by the first test (module order)
    proxy.stop()
    with start(xai_like, confdir) as again:
        before = len(xai_like.requests)
        with http_client(again) as http:
            response = openai_sdk(again, http, XAI_LIKE).responses.create(**xai_body("After a restart?"))
    assert response.status == "completed"
    assert [r.status for r in xai_like.requests[before:]] == [200]


# -- what must go through with one request ----------------------------------------------------------------


def test_retry_off_and_report_mode_send_once(xai_like: MockUpstream, tmp_path: Path) -> None:
    for name, options in (("off", {"llmfix_retry": "false"}), ("report", {"llmfix_mode": "report"})):
        with start(xai_like, tmp_path / name, **options) as p:
            before = len(xai_like.requests)
            with http_client(p) as http, pytest.raises(openai.UnprocessableEntityError) as rejected:
                openai_sdk(p, http, XAI_LIKE).responses.create(**xai_body())
            assert "untagged enum ModelInput" in rejected.value.response.text
            assert [r.status for r in xai_like.requests[before:]] == [422], name
            if name == "report":
                p.wait_for_output("report mode: would learn and resend once")
            else:
                assert "retry:" not in p.output()


def test_unrecognised_400_passes_through_with_one_request(tmp_path: Path) -> None:
    odd = QuirkyUpstream("xai", lambda path, body: openai_error("Model grok-9 does not exist", reason="odd"))
    with odd, start(odd, tmp_path / "conf") as p:
        with http_client(p) as http, pytest.raises(openai.BadRequestError, match="does not exist"):
            openai_sdk(p, http, XAI_LIKE).responses.create(**xai_body())
        assert len(odd.requests) == 1
        assert "retry:" not in p.output()


def test_a_rejected_resend_reaches_the_client_and_is_not_resent_again(tmp_path: Path) -> None:
    def always(path: str, body: dict[str, Any]) -> Any:
        return xai_error(f"{XAI_DESERIALIZE} at line 1 column 7", reason="always")

    stubborn = QuirkyUpstream("xai", always)
    with stubborn, start(stubborn, tmp_path / "conf") as p:
        with http_client(p) as http:
            with pytest.raises(openai.UnprocessableEntityError) as rejected:
                openai_sdk(p, http, XAI_LIKE).responses.create(**xai_body())
            assert "ModelInput at line 1 column 7" in rejected.value.response.text
            assert len(stubborn.requests) == 2
            p.wait_for_output("xai-model-input again: the client gets it")
            # the flag did not help, so it is not kept: the next request is sent as the client wrote it
            with pytest.raises(openai.UnprocessableEntityError):
                openai_sdk(p, http, XAI_LIKE).responses.create(**xai_body())
        assert len(stubborn.requests) == 4
        assert isinstance(stubborn.requests[2].json["input"][3]["output"], list)


# -- a DeepSeek-like Chat gateway ----------------------------------------------------------------------------

DEEPSEEK_LIKE = "llm.deepseek-like.test"


def chat_body(question: str) -> dict[str, Any]:
    return {"model": "deepseek-v4-flash", "messages": [
        {"role": "user", "content": "Read notes.txt"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_ds_1", "type": "function",
             "function": {"name": "Read", "arguments": '{"path":"notes.txt"}'}}]},
        {"role": "tool", "tool_call_id": "call_ds_1", "content": [{"type": "text", "text": "line one"},
                                                                  {"type": "text", "text": "line two"}]},
        {"role": "user", "content": question},
    ]}


def test_deepseek_like_chat_learns_string_tool_content(tmp_path: Path) -> None:
    with MockUpstream(rules="deepseek") as up, start(up, tmp_path / "conf") as p, http_client(p) as http:
        sdk = openai_sdk(p, http, DEEPSEEK_LIKE)
        answer = sdk.chat.completions.create(**chat_body("Summarise it"))
        assert answer.choices[0].message.role == "assistant"
        first, second = up.requests
        assert (first.status, first.reason) == (400, "tool-content-not-string")
        assert second.status == 200 and second.json["messages"][2]["content"] == "line one\nline two"
        p.wait_for_output("learned chat_tool_text_array=false")
        stream = sdk.chat.completions.create(**chat_body("Again, streamed"), stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert [r.status for r in up.requests[2:]] == [200]


# -- a DeepSeek-Anthropic-like endpoint -------------------------------------------------------------------

DEEPSEEK_ANTHROPIC_LIKE = "anthropic.deepseek-like.test"


def anthropic_sdk(proxy: Mitmdump, http: httpx2.Client) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=f"https://{DEEPSEEK_ANTHROPIC_LIKE}", api_key=KEY, http_client=http,
                               max_retries=0)


def httpx2_client(proxy: Mitmdump) -> httpx2.Client:
    """anthropic >= 2 is built on httpx2 and refuses an httpx.Client."""
    return httpx2.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=60)


def test_anthropic_like_pairing_rejection_teaches_nothing_and_is_not_resent(tmp_path: Path) -> None:
    """A pairing text is recognised, but its repair is always on: no flag to learn, one request."""
    messages = [
        {"role": "user", "content": "List the files"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}]},
        {"role": "user", "content": "never mind, say hi"},
    ]
    with MockUpstream(rules="anthropic") as up, start(up, tmp_path / "conf") as p, httpx2_client(p) as http:
        try:
            anthropic_sdk(p, http).messages.create(model="deepseek-v4-flash", max_tokens=64, messages=messages)
        except anthropic.BadRequestError as e:  # without a pairing repair in this build: the rejection, once
            assert "tool_use` ids were found without `tool_result`" in str(e)
            p.wait_for_output("not resent: its repair is always on")
        assert len(up.requests) == 1


@pytest.mark.skipif("anthropic_system_messages" not in FLAGS, reason="the system-fold flag comes with issue 12")
def test_anthropic_like_learns_to_fold_system_messages(tmp_path: Path) -> None:
    body = capture_json("claude-code/single_png__turn2.json")  # Claude Code ≥ 2.1.154: a system message in messages[]
    body.pop("stream", None)
    up = QuirkyUpstream("anthropic", deepseek_anthropic_system)
    with up, start(up, tmp_path / "conf") as p, httpx2_client(p) as http:
        anthropic_sdk(p, http).messages.create(**body)
        assert [r.status for r in up.requests] == [400, 200]
        anthropic_sdk(p, http).messages.create(**body)
        assert [r.status for r in up.requests] == [400, 200, 200]
