"""The Anthropic-compatible mocks (DeepSeek, GLM, MiniMax): their exact rejections, and Anthropic SSE on success."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import pytest

from tests.upstreams.canned import MOCK_TEXT
from tests.upstreams.captures import capture_json
from tests.upstreams.compat_rules import MINIMAX_REQUEST_ID
from tests.upstreams.mock import ORIGINAL_HOST_HEADER, MockUpstream
from tests.upstreams.rules import check, rules_for_host

pytestmark = pytest.mark.timeout(60)
CC = "claude-code/single_png__turn2.json"
SONNET = "claude-code/sonnet45__single_png__turn2.json"
DEEPSEEK_TEXT = ("Failed to deserialize the JSON body into the target type: messages[1].role: unknown variant "
                 "`system`, expected `user` or `assistant` at line 1 column ")


def test_hosts_pick_the_vendor_rules() -> None:
    assert rules_for_host("api.deepseek.com") == "deepseek"
    assert rules_for_host("open.bigmodel.cn:443") == "glm"
    assert rules_for_host("api.z.ai") == "glm"
    assert rules_for_host("api.minimax.io") == "minimax"


def test_deepseek_rejects_the_claude_code_capture_with_its_400() -> None:
    body = capture_json(CC)
    rejection = check("deepseek", "/anthropic/v1/messages", body)
    assert rejection is not None and rejection.status == 400
    assert rejection.body["error"]["type"] == "invalid_request_error"
    assert rejection.body["error"]["param"] is None and rejection.body["error"]["code"] == "invalid_request_error"
    message = rejection.body["error"]["message"]
    assert message.startswith(DEEPSEEK_TEXT)
    column = int(message.rsplit(" ", 1)[1])
    compact = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    assert compact[:column].endswith(b'{"role":"system"')  # serde stops right after the bad value


def test_glm_rejects_with_fastapis_422() -> None:
    rejection = check("glm", "/api/anthropic/v1/messages", capture_json(CC))
    assert rejection is not None and rejection.status == 422
    assert rejection.body == {"detail": [{
        "type": "literal_error", "loc": ["body", "messages", 1, "role"], "msg": "Input should be 'user' or 'assistant'",
        "input": "system", "ctx": {"expected": "'user' or 'assistant'"}}]}


def test_minimax_rejects_with_2013() -> None:
    rejection = check("minimax", "/anthropic/v1/messages", capture_json(CC))
    assert rejection is not None and rejection.status == 400
    assert rejection.body == {"type": "error", "request_id": MINIMAX_REQUEST_ID, "error": {
        "type": "bad_request_error", "message": "invalid params, chat content has invalid message role: system (2013)",
        "http_code": "400"}}


@pytest.mark.parametrize("rules", ["deepseek", "glm", "minimax", "anthropic"])
def test_the_shape_without_system_messages_is_accepted(rules: str) -> None:
    assert check(rules, "/v1/messages", capture_json(SONNET)) is None


def test_anthropic_takes_mid_conversation_system_messages() -> None:
    assert check("anthropic", "/v1/messages", capture_json(CC)) is None


def test_anthropic_pairing_rules_still_apply_to_the_vendors() -> None:
    body = capture_json(SONNET)
    body["messages"] = body["messages"][:2]  # a tool_use without its tool_result
    for rules in ("deepseek", "glm", "minimax"):
        rejection = check(rules, "/v1/messages", body)
        assert rejection is not None and rejection.reason == "tool-result-missing"


def _sdk(up: MockUpstream, host: str, prefix: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="sk-test-not-a-real-key", base_url=f"{up.url}{prefix}", max_retries=0,
        http_client=httpx2.Client(trust_env=False, timeout=15), default_headers={ORIGINAL_HOST_HEADER: host})


def _create(client: anthropic.Anthropic, body: dict[str, Any]) -> Any:
    known = {k: body[k] for k in ("model", "messages", "system", "tools", "max_tokens", "thinking",
                                  "context_management", "output_config", "metadata") if k in body}
    extra = {k: v for k, v in body.items() if k not in known and k != "stream"}
    # Claude Code asks for ?beta=true itself; the SDK no longer adds it
    return client.beta.messages.create(**known, extra_body=extra, extra_query={"beta": "true"}, stream=True)


@pytest.mark.parametrize(("host", "prefix", "status"), [
    ("api.deepseek.com", "/anthropic", 400), ("open.bigmodel.cn", "/api/anthropic", 422),
    ("api.minimax.io", "/anthropic", 400)])
def test_over_http_with_the_anthropic_sdk(host: str, prefix: str, status: int) -> None:
    with MockUpstream() as up:
        client = _sdk(up, host, prefix)
        with pytest.raises(anthropic.APIStatusError) as err:
            _create(client, capture_json(CC))
        assert err.value.status_code == status
        stream = _create(client, capture_json(SONNET))
        text = "".join(e.delta.text for e in stream if e.type == "content_block_delta")
        assert text == MOCK_TEXT
        first, second = up.requests
        assert first.path == second.path == f"{prefix}/v1/messages?beta=true"
        assert (first.status, second.status) == (status, 200)
        assert first.rules == rules_for_host(host)
