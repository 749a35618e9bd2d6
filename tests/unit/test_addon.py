"""The addon in mitmproxy's test harness: options, the request hook, annotations, fail-open."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest
from mitmproxy import contentviews, exceptions, http
from mitmproxy.test import taddons, tutils

from llmfix.proxy import LLMFix
from llmfix.report import views
from tests.conftest import fixture_bytes, make_flow

ROOT = Path(__file__).resolve().parents[2]
XAI = fixture_bytes("pi-ai/xai_responses.json")


@pytest.fixture
def addon():
    a = LLMFix()
    with taddons.context(a) as tctx:
        yield a, tctx


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"llmfix_mode": "fix"}, "llmfix_mode must be one of"),
        ({"llmfix_disable": ["hoist-tool-meda"]}, "unknown repair"),
        ({"llmfix_max_body": "lots"}, "llmfix_max_body"),
        ({"llmfix_max_body": "0"}, "positive size"),
        ({"llmfix_profiles": "/nonexistent/profiles.toml"}, "cannot read profiles file"),
    ],
)
def test_bad_option_values_stop_startup_with_the_reason(addon, opts, match) -> None:
    a, tctx = addon
    with pytest.raises(exceptions.OptionsError, match=match):
        tctx.configure(a, **opts)


def test_invalid_profiles_toml_is_rejected(addon, tmp_path) -> None:
    a, tctx = addon
    bad = tmp_path / "p.toml"
    bad.write_text("[hosts.\n")
    with pytest.raises(exceptions.OptionsError, match="not valid TOML"):
        tctx.configure(a, llmfix_profiles=str(bad))


def test_unwritable_log_path_is_rejected(addon, tmp_path) -> None:
    a, tctx = addon
    (tmp_path / "dir").mkdir()
    with pytest.raises(exceptions.OptionsError, match="llmfix_log"):
        tctx.configure(a, llmfix_log=str(tmp_path / "dir"))


async def test_repairs_the_body_marks_comments_and_logs(addon, tmp_path, caplog) -> None:
    a, tctx = addon
    log = tmp_path / "changes.jsonl"
    tctx.configure(a, llmfix_log=str(log))
    f = make_flow(XAI, headers={"authorization": "Bearer sk-live-abcdefghijklmnop"})
    with caplog.at_level(logging.INFO, logger="llmfix"):
        await a.request(f)
    body = json.loads(f.request.content)
    assert isinstance(body["input"][3]["output"], str)
    assert f.request.headers["content-length"] == str(len(f.request.raw_content))
    assert f.marked == ":wrench:"
    assert f.comment == "llmfix: hoist-tool-media (2 changes)"
    lines = [r.getMessage() for r in caplog.records if r.name == "llmfix"]
    assert len(lines) == 2 and all("hoist-tool-media" in x and "api.x.ai/v1/responses" in x for x in lines)
    records = [json.loads(x) for x in log.read_text().splitlines()]
    assert [r["location"] for r in records] == ["input[3].output", "input[3]+1"]
    assert records[0]["host"] == "api.x.ai" and records[0]["model"] == "grok-4.3" and records[0]["flow"] == f.id
    everything = log.read_text() + "\n".join(lines) + f.comment
    assert "sk-live" not in everything and "iVBOR" not in everything


async def test_a_gemini_repair_is_logged_with_the_model_its_path_names(addon, tmp_path) -> None:
    # the Gemini API names the model in the path, not the body: the record and the flow's note say which it was
    a, tctx = addon
    log = tmp_path / "changes.jsonl"
    tctx.configure(a, llmfix_log=str(log))
    call = {"functionCall": {"id": "c1", "name": "read_file", "args": {"file_path": "a.md"}},
            "thoughtSignature": "skip_thought_signature_validator"}
    answer = {"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "hi"}}}
    body = {"contents": [{"role": "user", "parts": [{"text": "Read a.md."}]}, {"role": "model", "parts": [call]},
                         {"role": "user", "parts": [answer, answer]}]}  # Gemini CLI resumed: the response twice
    f = make_flow(body, host="generativelanguage.googleapis.com",
                  path="/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse")
    await a.request(f)
    assert json.loads(f.request.content)["contents"][2]["parts"] == [answer]
    [record] = [json.loads(x) for x in log.read_text().splitlines()]
    assert record["repair"] == "drop-repeated-responses" and record["model"] == "gemini-3.1-pro-preview"
    assert f.metadata[views.META]["model"] == "gemini-3.1-pro-preview"


async def test_report_mode_leaves_the_body_byte_identical_but_logs_and_annotates(addon, tmp_path, caplog) -> None:
    a, tctx = addon
    log = tmp_path / "changes.jsonl"
    tctx.configure(a, llmfix_mode="report", llmfix_log=str(log))
    f = make_flow(XAI)
    with caplog.at_level(logging.INFO, logger="llmfix"):
        await a.request(f)
    assert f.request.raw_content == XAI
    assert f.marked == ":mag:" and f.comment.startswith("llmfix: would hoist-tool-media")
    assert all(json.loads(x)["mode"] == "report" for x in log.read_text().splitlines())
    assert any("(report)" in r.getMessage() for r in caplog.records)


async def test_disabled_repair_does_nothing(addon) -> None:
    a, tctx = addon
    tctx.configure(a, llmfix_disable=["hoist-tool-media"])
    f = make_flow(XAI)
    await a.request(f)
    assert f.request.raw_content == XAI and not f.marked


async def test_gzip_body_is_repaired_and_re_encoded(addon) -> None:
    a, _ = addon
    f = make_flow(gzip.compress(XAI), headers={"content-encoding": "gzip"})
    await a.request(f)
    assert f.request.headers["content-encoding"] == "gzip"
    assert isinstance(json.loads(gzip.decompress(f.request.raw_content))["input"][3]["output"], str)


async def test_large_body_is_repaired_off_the_event_loop(addon) -> None:
    a, _ = addon
    body = json.loads(XAI)
    body["instructions"] = "x" * 400_000
    f = make_flow(json.dumps(body).encode())
    await a.request(f)
    assert json.loads(f.request.content)["instructions"] == body["instructions"]
    assert f.marked == ":wrench:"


@pytest.mark.parametrize(
    ("raw", "headers", "reason"),
    [
        (b"{not json}", {}, "not valid JSON"),
        (b"\x00\x01binary", {}, "not a JSON object"),
        (b'{"input": [1, 2', {}, "not a JSON object"),
        (b'{"input": 5}', {}, "not an array"),
        (b'{"input": [{"type": "function_call_output", "call_id": "c", "output": 5}]}', {}, r"input\[0\].output"),
        (b"\x1f\x8b\x08\x00garbage", {"content-encoding": "gzip"}, "cannot decode Content-Encoding"),
        (b"{}", {"content-encoding": "gzip, br"}, "stacked Content-Encoding"),
        (b"{}", {"content-encoding": "snappy"}, "unknown Content-Encoding"),
        (b"", {}, "empty body"),
    ],
)
async def test_bad_input_passes_unchanged_with_one_warning(addon, caplog, raw, headers, reason) -> None:
    a, _ = addon
    f = make_flow(raw, headers=headers)
    with caplog.at_level(logging.WARNING):
        await a.request(f)
    assert f.request.raw_content == raw
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert f.id[:8] in warnings[0]
    import re
    assert re.search(reason, warnings[0])


@pytest.mark.parametrize("raw", [b"sk-proj-Zx81kQ0b7yTq", b'  {"api_key":"sk-proj-Zx81kQ0b7yTq", "x": 1',
                                 b"xai-Zx81kQ0b7yTqWp\n"])
async def test_a_bad_body_warning_carries_no_body_bytes(addon, caplog, raw) -> None:
    a, _ = addon
    f = make_flow(raw)
    with caplog.at_level(logging.WARNING):
        await a.request(f)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "not a JSON object" in warnings[0]
    assert "Zx81" not in warnings[0] and "proj" not in warnings[0]


async def test_oversized_body_passes_with_a_warning(addon, caplog) -> None:
    a, tctx = addon
    tctx.configure(a, llmfix_max_body="1k")
    f = make_flow(XAI)
    with caplog.at_level(logging.WARNING):
        await a.request(f)
    assert f.request.raw_content == XAI
    assert any("exceeds llmfix_max_body" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("method", "path", "host"),
    [("GET", "/v1/models", "api.x.ai"), ("POST", "/upload", "example.com"), ("POST", "/v1/embeddings", "api.x.ai")],
)
async def test_non_llm_traffic_is_untouched(addon, caplog, method, path, host) -> None:
    a, _ = addon
    f = make_flow(XAI, method=method, path=path, host=host)
    with caplog.at_level(logging.DEBUG):
        await a.request(f)
    assert f.request.raw_content == XAI and not f.marked and not f.comment
    assert not [r for r in caplog.records if r.name.startswith("llmfix")]


async def test_diff_view_shows_the_change_for_repaired_requests_only(addon) -> None:
    a, _ = addon
    f = make_flow(XAI)
    await a.request(f)
    result = contentviews.prettify_message(f.request, f)
    assert result.view_name == "llmfix diff"
    assert "repaired by: hoist-tool-media" in result.text
    assert "+[4] message user" in result.text
    assert "iVBOR" not in result.text
    plain = make_flow(XAI, host="api.openai.com")
    await a.request(plain)
    assert contentviews.prettify_message(plain.request, plain).view_name != "llmfix diff"


def test_entry_script_loads_the_addon() -> None:
    with taddons.context() as tctx:
        mod = tctx.script(str(ROOT / "addon" / "fix.py"))
        assert type(mod.addons[0]).__name__ == "LLMFix"


def test_the_launchers_script_runs_every_addon_of_the_entry_script() -> None:
    """``llmfix -- CLIENT`` loads its own script: it must run what ``mitmdump -s addon/fix.py`` runs (it once ran
    without repair-and-retry), plus the launcher's RunInfo."""
    def names(path: Path) -> list[str]:
        with taddons.context() as tctx:
            return [type(a).__name__ for a in tctx.script(str(path)).addons]

    plain = names(ROOT / "addon" / "fix.py")
    assert {"LLMFix", "Retry", "ResponsesWebSocket", "Capture"} <= set(plain)
    assert names(ROOT / "addon" / "llmfix" / "mitmdump_script" / "llmfix_launched.py") == [*plain, "RunInfo"]


def test_running_freezes_the_startup_heap_with_the_catalogue_read() -> None:
    """Full collections must not walk the startup heap on every cycle: once running, what is alive
    (the models.dev catalogue included, read first) is frozen out of the collector's reach."""
    import gc

    from llmfix import catalogue

    catalogue._catalogue.cache_clear()
    try:
        LLMFix().running()
        assert gc.get_freeze_count() > 0
        assert catalogue._catalogue.cache_info().currsize == 1  # read before the freeze
    finally:
        gc.unfreeze()


@pytest.mark.parametrize(("host", "path", "kind", "streams"), [
    ("example.com", "/events", "text/event-stream; charset=utf-8", True),  # routed or not: any SSE answer
    ("api.x.ai", "/v1/responses", "text/event-stream", True),
    ("localhost", "/api/chat", "application/x-ndjson", True),  # Ollama's stream
    ("example.com", "/page", "text/html", False),
    ("api.x.ai", "/v1/responses", "application/json", False),  # read whole: llmfix learns from it
])
async def test_every_streamed_answer_streams_routed_or_not(addon, host, path, kind, streams) -> None:
    a, _ = addon
    flow = make_flow(XAI if host == "api.x.ai" else b"{}", host=host, path=path)
    await a.request(flow)
    flow.response = tutils.tresp(headers=http.Headers(content_type=kind), content=None)
    a.responseheaders(flow)
    assert bool(flow.response.stream) is streams
