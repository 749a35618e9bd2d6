"""End to end: pi-ai's xAI captures through a real mitmdump with llmfix to a strict xAI mock.

Without llmfix the mock answers 422 with xAI's text; with it 200, and the mock receives every image
exactly once, after the run of tool outputs, in call order. Valid captures leave byte-identical.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.harness import Mitmdump, loopback_proxy
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(180)
XAI = ["pi-ai/xai_responses.json", "pi-ai/xai_responses_image_only.json", "pi-ai/xai_responses_parallel_tools.json"]
JSON = {"content-type": "application/json"}


def start(upstream: MockUpstream, confdir: Path, *, llmfix: bool = True, **options: str) -> Mitmdump:
    return loopback_proxy(upstream, confdir, llmfix=llmfix, connection_strategy="lazy", **options)


@pytest.fixture(scope="module")
def fixed(upstream: MockUpstream, tmp_path_factory) -> Iterator[Mitmdump]:
    log = tmp_path_factory.mktemp("log") / "changes.jsonl"
    with start(upstream, tmp_path_factory.mktemp("confdir"), llmfix_log=str(log)) as proxy:
        proxy.log_path = log  # type: ignore[attr-defined]
        yield proxy


@pytest.fixture(scope="module")
def bare(upstream: MockUpstream, tmp_path_factory) -> Iterator[Mitmdump]:
    with start(upstream, tmp_path_factory.mktemp("confdir"), llmfix=False) as proxy:
        yield proxy


def post(proxy: Mitmdump, url: str, raw: bytes) -> httpx.Response:
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=30) as c:
        return c.post(url, content=raw, headers={**JSON, "authorization": "Bearer sk-test-not-a-real-key-123"})


def last_received(upstream: MockUpstream, before: int) -> Any:
    [seen] = upstream.requests[before:]
    return seen


def images(body: dict[str, Any]) -> list[tuple[int, str]]:
    """(index in input, image_url) of every input_image anywhere in the request, in order."""
    found = []
    for i, item in enumerate(body["input"]):
        parts = item.get("content") if "role" in item else item.get("output")
        for p in parts if isinstance(parts, list) else []:
            if p.get("type") == "input_image":
                found.append((i, p["image_url"]))
    return found


@pytest.mark.parametrize("name", XAI)
def test_without_llmfix_xai_answers_422(bare: Mitmdump, upstream: MockUpstream, name: str) -> None:
    response = post(bare, "https://api.x.ai/v1/responses", capture_bytes(name))
    assert response.status_code == 422
    assert "did not match any variant of untagged enum ModelInput" in response.json()["error"]


@pytest.mark.parametrize("name", XAI)
def test_with_llmfix_xai_answers_200_and_gets_every_image_once_after_the_run(
    fixed: Mitmdump, upstream: MockUpstream, name: str
) -> None:
    sent = capture_json(name)
    before = len(upstream.requests)
    response = post(fixed, "https://api.x.ai/v1/responses", capture_bytes(name))
    assert response.status_code == 200, response.text
    got = last_received(upstream, before).json
    outputs = [i for i, item in enumerate(got["input"]) if item.get("type") == "function_call_output"]
    assert all(isinstance(got["input"][i]["output"], str) for i in outputs)
    sent_images = [url for _, url in images(sent)]
    got_images = images(got)
    assert [url for _, url in got_images] == sent_images  # each exactly once, in call order
    assert {i for i, _ in got_images} == {outputs[-1] + 1}  # all in the one message right after the run
    assert got["input"][outputs[-1] + 1]["role"] == "user"
    assert got["input"][-1] == sent["input"][-1]  # the user's question still comes last


def test_openai_sdk_over_https_through_llmfix(fixed: Mitmdump, upstream: MockUpstream) -> None:
    body = capture_json("pi-ai/xai_responses_parallel_tools.json")
    body.pop("stream")
    before = len(upstream.requests)
    with httpx.Client(proxy=fixed.url, verify=fixed.ssl_context(), trust_env=False, timeout=30) as http:
        sdk = openai.OpenAI(base_url="https://api.x.ai/v1", api_key="sk-test-not-a-real-key", http_client=http,
                            max_retries=0)
        response = sdk.responses.create(**body)
    assert response.status == "completed"
    got = last_received(upstream, before)
    assert got.status == 200 and got.headers["host"] == "api.x.ai"
    assert [url for _, url in images(got.json)] == [url for _, url in images(body)]


def test_change_lines_and_log_name_the_repair_and_hold_no_secrets(fixed: Mitmdump) -> None:
    post(fixed, "https://api.x.ai/v1/responses", capture_bytes("pi-ai/xai_responses.json"))
    fixed.wait_for_output("hoist-tool-media: input[3].output")
    records = [json.loads(line) for line in fixed.log_path.read_text().splitlines()]  # type: ignore[attr-defined]
    assert records and {r["repair"] for r in records} == {"hoist-tool-media"}
    text = fixed.output() + fixed.log_path.read_text()  # type: ignore[attr-defined]
    assert "sk-test" not in text and "iVBOR" not in text


@pytest.mark.parametrize(
    ("name", "url"),
    [
        *[(n, "https://api.openai.com/v1/responses") for n in [*XAI, "pi-ai/openai_responses.json"]],
        ("codex/turn1_request.json", "https://api.openai.com/v1/responses"),
        ("codex/turn2_request.json", "https://api.openai.com/v1/responses"),
        ("pi-ai/chat_completions.json", "https://api.openai.com/v1/chat/completions"),
        ("pi-ai/anthropic_messages.json", "https://api.anthropic.com/v1/messages"),
        ("claude-code/single_png__turn2.json", "https://api.anthropic.com/v1/messages"),
        *[(f"droid/{v}__{s}__turn{t}.json", "https://api.openai.com/v1/chat/completions")
          for v in ("0.215.0", "0.225.2") for s in ("single_image", "text_then_image", "two_images_noimg")
          for t in (1, 2)],
    ],
)
def test_valid_requests_leave_byte_identical(fixed: Mitmdump, upstream: MockUpstream, name: str, url: str) -> None:
    raw = capture_bytes(name)
    before = len(upstream.requests)
    response = post(fixed, url, raw)
    seen = last_received(upstream, before)
    assert seen.body == raw
    assert response.status_code == 200, response.text


def test_report_mode_sends_the_body_unchanged_but_logs_it(upstream: MockUpstream, tmp_path) -> None:
    raw = capture_bytes("pi-ai/xai_responses.json")
    with start(upstream, tmp_path / "confdir", llmfix_mode="report") as proxy:
        before = len(upstream.requests)
        response = post(proxy, "https://api.x.ai/v1/responses", raw)
        proxy.wait_for_output("llmfix (report):")
    assert last_received(upstream, before).body == raw
    assert response.status_code == 422
    assert "hoist-tool-media" in proxy.output()
