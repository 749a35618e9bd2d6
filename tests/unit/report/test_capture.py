"""``llmfix.capture``: redaction, the client's original request, the expectation, the command."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest
from mitmproxy import exceptions, http, io
from mitmproxy.test import taddons, tflow, tutils

from llmfix.proxy import LLMFix
from llmfix.report.capture import (
    REDACTED,
    Capture,
    expect_path,
    expectations,
    fixture_of,
    redact_headers,
    scrub_body,
    secret_name,
    write_fixture,
)
from tests.conftest import fixture_bytes, make_flow
from tests.test_flows import read_flows, replay

XAI = fixture_bytes("pi-ai/xai_responses.json")
DROID_T2 = fixture_bytes("droid/0.225.2__two_images__turn2.json")
KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"


@pytest.fixture
def fix():
    a, c = LLMFix(), Capture()
    with taddons.context(a, c) as tctx:
        tctx.configure(a, llmfix_memory=":memory:")
        yield a, c, tctx


async def repaired_xai(fix, **headers: str) -> http.HTTPFlow:
    a, _, _ = fix
    f = make_flow(XAI, headers={"authorization": f"Bearer {KEY}", **headers})
    await a.request(f)
    assert f.metadata["llmfix"]["repairs"] == ["hoist-tool-media"]
    return f


# -- redaction ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "secret"), [
    ("Authorization", True), ("proxy-authorization", True), ("x-api-key", True), ("api-key", True),
    ("Cookie", True), ("set-cookie", True), ("x-goog-api-key", True), ("x-auth-token", True),
    ("openai-organization", True), ("openai-project", True), ("chatgpt-account-id", True),
    ("x-client-secret", True), ("content-type", False), ("user-agent", False), ("x-request-id", False),
    ("x-ratelimit-remaining-tokens", False), ("anthropic-version", False),
])
def test_secret_header_names(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


def test_headers_lose_every_secret_value_and_key_shaped_strings() -> None:
    h = http.Headers(authorization=f"Bearer {KEY}", x_api_key="plain-value", cookie="a=1",
                     x_custom=f"key {KEY} here", user_agent="pi-ai/0.73")
    h.add("cookie", "b=2")
    redact_headers(h)
    assert h.get_all("authorization") == [REDACTED] and h["x-api-key"] == REDACTED
    assert h.get_all("cookie") == [REDACTED, REDACTED]
    assert h["x-custom"] == f"key {REDACTED} here" and h["user-agent"] == "pi-ai/0.73"


def test_a_body_without_secrets_comes_back_identical() -> None:
    assert scrub_body(XAI) == (XAI, 0)
    text = b'{"text":"a task-notification and risk-assessment-details"}'
    assert scrub_body(text) == (text, 0)


def test_keys_in_bodies_are_replaced_in_place_but_base64_media_is_not_touched() -> None:
    image = base64.b64encode(b"\x00" * 30 + b"\x20\x88\xb3" + b"\x01" * 30).decode()  # holds 'AIiz'-like runs
    fake_google = "AIza" + "B" * 35
    body = json.dumps({"input": [
        {"type": "input_text", "text": f"my key is {KEY} and {fake_google}"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{image}{fake_google}{image}"},
    ]}).encode()
    out, n = scrub_body(body)
    assert n == 2 and KEY.encode() not in out
    value = json.loads(out)
    assert value["input"][0]["text"] == f"my key is {REDACTED} and {REDACTED}"
    assert value["input"][1] == json.loads(body)["input"][1]  # inside base64: never a key


def test_secret_named_json_keys_are_blanked() -> None:
    out, n = scrub_body(b'{"model":"m","api_key":"abc","max_tokens":5,"nested":{"client_secret":"x"}}')
    assert n == 2
    assert json.loads(out) == {"model": "m", "api_key": REDACTED, "max_tokens": 5,
                               "nested": {"client_secret": REDACTED}}


async def test_fixture_is_the_clients_original_request_redacted(fix) -> None:
    f = await repaired_xai(fix, x_api_key=KEY, cookie="session=s3cr3t")
    f.request.url = f.request.url + "?key=AIzaSyA0123456789abcdefghijklmnop&beta=true"
    f.response = tutils.tresp(headers=http.Headers(set_cookie="sid=1", content_type="application/json"),
                              content=json.dumps({"echo": KEY}).encode())
    f.comment = f"{f.comment}\nmy note about {KEY}"
    fx = fixture_of(f)
    assert fx.request.raw_content == XAI  # not the repaired body
    assert fx.request.headers["content-length"] == str(len(XAI))
    assert fx.request.headers["authorization"] == fx.request.headers["x-api-key"] == REDACTED
    assert fx.request.query["key"] == REDACTED and fx.request.query["beta"] == "true"
    assert fx.response is not None and fx.response.headers["set-cookie"] == REDACTED
    assert json.loads(fx.response.content or b"") == {"echo": REDACTED}
    assert fx.metadata == {} and fx.marked == "" and fx.comment == f"my note about {REDACTED}"
    assert not fx.live and fx.id != f.id and fixture_of(f).id == fx.id
    # the live flow itself is untouched
    assert f.metadata["llmfix"]["original"] == XAI and f.request.headers["authorization"].endswith(KEY)


async def test_fixture_keeps_the_host_llmfix_routed_with_when_a_later_addon_re_points_it(fix) -> None:
    f = await repaired_xai(fix)
    f.request.scheme, f.request.host, f.request.port = "http", "127.0.0.1", 9  # e.g. map_remote, after llmfix
    fx = fixture_of(f)
    assert (fx.request.scheme, fx.request.host, fx.request.port) == ("https", "api.x.ai", 443)
    assert expectations([fx])[0]["repairs"] == ["hoist-tool-media"]


async def test_an_edited_flows_backup_is_not_written(fix) -> None:
    f = await repaired_xai(fix)
    f.backup()
    f.request.headers["authorization"] = "changed by hand"
    fx = fixture_of(f)
    assert b"sk-proj" not in json.dumps(fx.get_state(), default=repr).encode()
    assert fx.get_state()["backup"] is None


async def test_a_gzip_request_keeps_its_original_encoding(fix) -> None:
    a, _, _ = fix
    wire = gzip.compress(XAI, mtime=0)
    f = make_flow(b"", headers={"content-encoding": "gzip"})
    f.request.raw_content = wire
    await a.request(f)
    assert f.metadata["llmfix"]["original"] == wire
    fx = fixture_of(f)
    assert fx.request.raw_content == wire and fx.request.get_content() == XAI


# -- expectation --------------------------------------------------------------------------------------------


async def test_expectations_cover_every_status_and_agree_with_the_addon(caplog) -> None:
    flows = [
        make_flow(XAI),
        make_flow(fixture_bytes("pi-ai/openai_responses.json"), host="api.openai.com"),
        make_flow(b'{"model": "m", "input": [', host="api.openai.com"),
        make_flow(b"", host="api.openai.com"),
        make_flow(b"{}", path="/v1/models"),
    ]
    got = expectations(flows)
    assert [e["status"] for e in got] == ["repaired", "untouched", "failed", "failed", "ignored"]
    assert got[0]["repairs"] == ["hoist-tool-media"] and "+1: new user message" in got[0]["changes"][1]
    assert "[4] message user" in got[0]["conversation"]
    assert "not a JSON object" in got[2]["reason"] and got[3]["reason"] == "empty body"
    # the real addon, through all of mitmproxy's hooks, does exactly what was predicted
    assert await replay(flows, {"llmfix_memory": ":memory:"}, caplog) == got


async def test_a_conversation_captured_in_one_file_replays_in_order(tmp_path: Path, caplog) -> None:
    """Turn 1's JSON answer declares call_mock_b; replayed in order, turn 2's orphan gets its declaration back."""
    turn1 = make_flow({"model": "mock-model", "messages": [{"role": "user", "content": "read a and b"}]},
                      host="api.deepseek.com", path="/v1/chat/completions")
    calls = [{"id": f"call_mock_{x}", "type": "function",
              "function": {"name": "Read", "arguments": json.dumps({"file_path": f"/home/dev/project/{x}.png"})}}
             for x in "ab"]
    turn1.response = tutils.tresp(headers=http.Headers(content_type="application/json"), content=json.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": calls},
                      "finish_reason": "tool_calls"}]}).encode())
    turn2 = make_flow(DROID_T2, host="api.deepseek.com", path="/v1/chat/completions")
    turn2.request.timestamp_start = turn1.request.timestamp_start + 5
    flow_path, sidecar, expected = write_fixture([turn2, turn1], tmp_path / "droid-two-turns.flow")
    assert [e["status"] for e in expected] == ["untouched", "repaired"]
    assert any("declaration" in line and "memory" in line for line in expected[1]["changes"]), expected[1]
    assert not any("orphan" in line for line in expected[1]["changes"])
    doc = json.loads(sidecar.read_text())
    assert doc["flows"] == expected and doc["options"] == {"llmfix_memory": ":memory:"}
    # the real addon, through mitmproxy's hooks, agrees with the expectation written
    assert await replay(read_flows(flow_path), doc["options"], caplog) == expected


# -- the command --------------------------------------------------------------------------------------------


async def test_the_command_writes_a_flow_file_and_its_expectation(fix, tmp_path: Path) -> None:
    _, _, tctx = fix
    f = await repaired_xai(fix)
    message = tctx.master.commands.call("llmfix.capture", [f], str(tmp_path / "out"))
    [flow_file] = (tmp_path / "out").glob("*.flow")
    assert flow_file.name.startswith("api.x.ai-responses-hoist-tool-media-") and str(flow_file) in message
    with flow_file.open("rb") as fo:
        [loaded] = list(io.FlowReader(fo).stream())
    assert isinstance(loaded, http.HTTPFlow) and loaded.request.raw_content == XAI
    assert KEY.encode() not in flow_file.read_bytes()
    doc = json.loads(expect_path(flow_file).read_text())
    assert doc["flows"][0]["repairs"] == ["hoist-tool-media"]
    assert doc["flows"][0]["live"]["repairs"] == ["hoist-tool-media"]


def test_the_command_signature(fix) -> None:
    _, _, tctx = fix
    assert tctx.master.commands.commands["llmfix.capture"].signature_help() == "llmfix.capture flows path -> str"


def test_the_command_refuses_a_selection_without_http_flows(fix, tmp_path: Path) -> None:
    _, c, _ = fix
    with pytest.raises(exceptions.CommandError, match="no HTTP flow"):
        c.capture([tflow.ttcpflow()], str(tmp_path))
    message = c.capture([tflow.ttcpflow(), make_flow(XAI)], str(tmp_path))
    assert message.endswith("(offline replay: hoist-tool-media); skipped 1 flow without an HTTP request body")


def test_the_command_reports_an_unwritable_target(fix, tmp_path: Path) -> None:
    _, c, _ = fix
    (tmp_path / "file").write_text("")
    with pytest.raises(exceptions.CommandError, match="cannot write"):
        c.capture([make_flow(XAI)], str(tmp_path / "file" / "sub"))
