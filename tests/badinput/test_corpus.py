"""Promise 3 (fail open) on the bad-input corpus, in process: the addon's request hook under mitmproxy's test harness.

For every case: the body leaves byte-identical, exactly one warning names the flow (``flow.id[:8]``) and
the reason, nothing raises, and the next request — pi-ai's xAI capture — is repaired normally.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

import pytest
from mitmproxy.test import taddons

from llmfix.body import conversation
from llmfix.dialects.registry import CHAT
from llmfix.proxy import LLMFix
from tests.badinput.corpus import CASES, Case
from tests.conftest import make_flow
from tests.upstreams.captures import capture_bytes

pytestmark = pytest.mark.timeout(300)
XAI = capture_bytes("pi-ai/xai_responses.json")


def params() -> list:
    return [pytest.param(c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=c.known)] if c.known else [])
            for c in CASES]


def test_the_corpus_is_big_enough() -> None:
    assert len(CASES) >= 30
    assert {"application/json"} == {c.content_type for c in CASES}


@pytest.mark.parametrize("case", params())
async def test_bad_body_passes_unchanged_with_exactly_one_warning(case: Case, caplog: pytest.LogCaptureFixture) -> None:
    addon = LLMFix()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, llmfix_memory=":memory:")
        raw = case.body()
        flow = make_flow(raw, host=case.host, path=case.path, headers=case.headers)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            started = time.perf_counter()
            await addon.request(flow)
            took = time.perf_counter() - started
        assert flow.request.raw_content == raw, "the body changed"
        assert not flow.marked and not flow.comment
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, f"{len(warnings)} warnings: {[r.getMessage()[:200] for r in warnings]}"
        message = warnings[0].getMessage()
        assert flow.id[:8] in message and f"{case.path}" in message, message
        assert re.search(case.reason, message), f"reason {case.reason!r} not in {message!r}"
        assert warnings[0].exc_info is None, "an internal error, not a bad-input warning"
        assert len(message) < 600, "the warning carries body data"
        print(f"{case.name}: {len(raw)} bytes, {took:.2f} s: {message[:160]}")

        good = make_flow(XAI)
        await addon.request(good)
        repaired = json.loads(good.request.content)
        assert good.marked == ":wrench:" and isinstance(repaired["input"][3]["output"], str)


class _CountingAdapter:
    """Wraps a TypeAdapter and records how many items each call into pydantic-core validated."""

    def __init__(self, real: Any) -> None:
        self.real, self.calls = real, []

    def validate_python(self, raw: list[Any]) -> Any:
        self.calls.append(len(raw))
        return self.real.validate_python(raw)


@pytest.mark.parametrize("body", ["million-numbers-in-a-tool-body", "million-valid-messages"])
async def test_a_million_element_array_is_validated_a_slice_at_a_time(body: str, monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """One pydantic-core call holds the GIL throughout: a million-item array validated in one call froze the
    event loop, and every other flow, for ~2 s although llmfix runs big bodies in a worker thread. Between
    slices the event loop gets the GIL back. (The longest stall is measured, not asserted:
    ``uv run python bench/run.py --only stall``; what remains is the JSON parse, one call.)"""
    from tests.badinput.corpus import _million

    raw = next((c.body() for c in CASES if c.name == body), None) or _million(
        b'{"role":"user","content":"hi"}', b'"tool_choice":"tool",')
    spy = _CountingAdapter(CHAT.shape.items)
    monkeypatch.setattr(CHAT.shape, "items", spy)
    addon = LLMFix()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, llmfix_memory=":memory:")
        flow = make_flow(raw, path="/v1/chat/completions", host="api.openai.com")
        with caplog.at_level(logging.WARNING):
            await addon.request(flow)
    assert flow.request.raw_content == raw
    assert spy.calls and max(spy.calls) <= conversation.SLICE
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    if body == "million-valid-messages":
        assert sum(spy.calls) == 1_000_000 and not warnings  # every item validated, nothing to say
    else:
        assert len(spy.calls) == 1 and len(warnings) == 1 and "messages[0]" in warnings[0]  # stops at the first


@pytest.mark.parametrize("at", [0, 1, conversation.SLICE - 1, conversation.SLICE, 5 * conversation.SLICE + 3])
def test_a_bad_item_is_reported_at_its_own_index_whatever_its_slice(at: int) -> None:
    items: list[Any] = [{"role": "user", "content": "hi"}] * (6 * conversation.SLICE)
    items[at] = {"role": "tool", "tool_call_id": "c", "content": 5}
    with pytest.raises(conversation.BadBody, match=rf"unexpected shape at messages\[{at}\]\.content"):
        conversation.parse(CHAT, {"messages": items})


async def test_a_streamed_request_body_is_left_alone_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    addon = LLMFix()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, llmfix_memory=":memory:")
        flow = make_flow(XAI)
        flow.request.stream = True
        flow.request.data.content = None  # what mitmproxy leaves when the body was streamed upstream
        with caplog.at_level(logging.WARNING):
            await addon.request(flow)
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and flow.id[:8] in warnings[0] and "streamed" in warnings[0]
        assert flow.request.raw_content is None


async def test_a_zstd_frame_without_content_size_is_not_bad_input() -> None:
    """Streaming zstd compressors (no content size in the frame header) are valid: such a body is repaired."""
    from tests.badinput.corpus import _zstd_streamed, zstd

    addon = LLMFix()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, llmfix_memory=":memory:")
        raw = _zstd_streamed(XAI)
        assert zstd.get_frame_info(raw).decompressed_size is None
        flow = make_flow(raw, headers={"content-encoding": "zstd"})
        await addon.request(flow)
        assert flow.marked == ":wrench:" and flow.request.headers["content-encoding"] == "zstd"
        assert isinstance(json.loads(zstd.decompress(flow.request.raw_content))["input"][3]["output"], str)
