"""The Retry addon in mitmproxy's test harness: option, commands, report mode, the llmfix view.

The resend itself needs a live proxy and upstream: tests/e2e/test_retry.py.
"""

from __future__ import annotations

import json
import logging

import pytest
from mitmproxy import contentviews
from mitmproxy.test import tutils

from llmfix.memory.store import Quirk
from llmfix.proxy import LLMFix
from llmfix.retry.addon import Retry
from tests.conftest import fixture_bytes, llmfix_with, make_flow
from tests.upstreams.errors import XAI_DESERIALIZE, XAI_INVALID_ARGUMENT

XAI = fixture_bytes("pi-ai/xai_responses.json")
REJECTION = json.dumps({"code": XAI_INVALID_ARGUMENT, "error": f"{XAI_DESERIALIZE} at line 1 column 99"}).encode()


@pytest.fixture
def addons():
    with llmfix_with(Retry) as got:
        yield got


async def rejected_flow(fix: LLMFix, host: str = "gw.test", status: int = 422, body: bytes = REJECTION):
    f = make_flow(XAI, host=host)
    await fix.request(f)
    f.response = tutils.tresp(status_code=status, content=body, headers=((b"content-type", b"application/json"),))
    return f


def test_commands_list_and_forget_learned_quirks(addons) -> None:
    fix, retry, tctx = addons
    assert tctx.command(retry.list_quirks) == "no learned quirks"
    fix.quirks.learn(Quirk("gw.test", 443, "responses", "responses_tool_output_array", False, "422 xai-model-input",
                           2e9))
    fix.quirks.learn(Quirk("b.test", 8443, "chat", "chat_tool_text_array", False, "400 chat-tool-content", 2e9 + 1))
    listing = tctx.command(retry.list_quirks)
    assert listing.splitlines()[0].startswith("gw.test:443 responses responses_tool_output_array=false (learned ")
    assert "b.test:8443 chat chat_tool_text_array=false" in listing
    assert tctx.command(retry.forget, "gw.test") == "llmfix: forgot 1 learned quirk(s) of gw.test"
    assert "gw.test" not in tctx.command(retry.list_quirks)
    assert tctx.command(retry.forget) == "llmfix: forgot 1 learned quirk(s)"


async def test_report_mode_logs_what_it_would_learn_and_sends_nothing(addons, caplog) -> None:
    fix, retry, tctx = addons
    tctx.configure(fix, llmfix_mode="report")
    f = await rejected_flow(fix)
    with caplog.at_level(logging.INFO, logger="llmfix"):
        await retry.response(f)
    assert "retry: 422 xai-model-input" in caplog.text
    assert "learned responses_tool_output_array=false for gw.test:443 (responses); report mode" in caplog.text
    assert f.response.content == REJECTION and fix.quirks.quirks() == []


@pytest.mark.parametrize(("status", "body"), [
    (400, json.dumps({"error": {"message": "Model grok-9 does not exist"}}).encode()),  # unknown text
    (500, REJECTION),  # known text, not a 400/422
])
async def test_unrecognised_rejections_are_left_alone(addons, caplog, status, body) -> None:
    fix, retry, _ = addons
    f = await rejected_flow(fix, status=status, body=body)
    with caplog.at_level(logging.INFO, logger="llmfix"):
        await retry.response(f)
    assert "retry" not in caplog.text and f.response.content == body


async def test_retry_false_leaves_the_rejection_alone(addons, caplog) -> None:
    fix, retry, tctx = addons
    tctx.configure(retry, llmfix_retry=False)
    tctx.configure(fix, llmfix_mode="report")
    f = await rejected_flow(fix)
    with caplog.at_level(logging.INFO, logger="llmfix"):
        await retry.response(f)
    assert "retry" not in caplog.text


async def test_a_flag_already_in_effect_is_not_resent(addons, caplog) -> None:
    """api.x.ai's profile already hoists: the same rejection again would not change the body."""
    fix, retry, _ = addons
    f = await rejected_flow(fix, host="api.x.ai")
    assert f.metadata["llmfix"]["repairs"] == ["hoist-tool-media"]
    with caplog.at_level(logging.INFO, logger="llmfix"):
        await retry.response(f)
    assert "learned nothing" in caplog.text and "not resent: no flag llmfix could learn" in caplog.text
    assert f.response.content == REJECTION


def test_the_diff_view_shows_the_first_rejection() -> None:
    f = make_flow(XAI, host="gw.test")
    f.metadata["llmfix"] = {"mode": "repair", "repairs": ["hoist-tool-media"], "changes": [{"x": 1}],
                            "lines": ["hoist-tool-media: input[3].output: …"], "before": ["a"], "after": ["b"],
                            "retry": {"status": 422, "rule": "xai-model-input", "error": "…ModelInput",
                                      "learned": [{"flag": "responses_tool_output_array", "value": False}],
                                      "resend_flow": "1234567890", "outcome": 200,
                                      "first_response": '{\n  "error": "…ModelInput"\n}'}}
    text = contentviews.prettify_message(f.request, f, "llmfix diff").text
    assert "# first attempt answered 422 (xai-model-input): …ModelInput" in text
    assert "# learned responses_tool_output_array=false; resent once (flow 12345678) → 200" in text
    assert '#     "error": "…ModelInput"' in text


async def test_a_recorded_flow_read_offline_is_never_resent(addons, caplog) -> None:
    fix, retry, _ = addons
    f = await rejected_flow(fix)
    f.live = False  # as mitmdump -nr loads it
    with caplog.at_level(logging.INFO, logger="llmfix"):
        await retry.response(f)
    assert "retry" not in caplog.text and f.response.content == REJECTION and fix.quirks.quirks() == []


async def test_the_decision_runs_the_engine_as_the_request_did_so_an_image_to_convert_never_blocks_it(addons) -> None:
    """On the event loop, a body holding an image the engine must convert is deferred to a worker thread
    (LLMFix.run); the retry's decision runs its trial repairs the same way, so a flag still proves useful."""
    from llmfix import engine
    from llmfix.dialects.registry import RESPONSES
    from llmfix.retry import decide, rejections
    from tests.images import data_url

    fix, _retry, _ = addons
    body = json.loads(XAI)
    svg = data_url(b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 20"><rect width="9" height="9"/></svg>',
                   "image/svg+xml")  # converted for every upstream: no upstream takes an SVG
    body["input"].append({"type": "message", "role": "user",
                          "content": [{"type": "input_image", "image_url": svg, "detail": "auto"}]})
    raw = json.dumps(body).encode()
    found = rejections.match("responses", 422, REJECTION)
    assert found is not None
    d = await decide.decide(found, 422, engine.Request(RESPONSES, "gw.test", 443, raw), raw, fix.settings,
                            fix.run)
    assert d.outcome is not None, d.why
    assert ("responses_tool_output_array", False) in d.useful
