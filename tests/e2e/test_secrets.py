"""Promise 6 end to end: no API key and no base64 payload in anything llmfix writes or shows.

A real mitmdump with llmfix runs at ``termlog_verbosity=debug`` with a JSONL change log and every flow
saved (``save_stream_file``, streamed bodies stored). Requests carry keys in ``Authorization``,
``x-api-key`` and ``api-key`` headers and ``sk-…``/``xai-…`` keys inside bodies — a tool output
printing ``OPENAI_API_KEY=sk-proj-…``, a tool call's arguments, a user message — next to base64
images; they are repaired (hoist-tool-media, untangle-tool-run, a dropped image), passed untouched,
streamed back with a key in the answer, or rejected as bad input.

Then every console line, every JSONL record, every saved flow's comment and llmfix's change lines and
records in its metadata, and every content view of every saved request and response (auto, ``llmfix
diff``, ``llmfix original``, ``llmfix conversation``) are scanned: no key (nor any 12-character piece
of one), no 16-character piece of any image's base64.

A second run does the same for Gemini's keys (``x-goog-api-key``, the ``?key=`` query parameter, Code Assist's
OAuth bearer), adding the retry's and the in-stream rejection's lines and records, the metrics and a capture.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mitmproxy import contentviews, http, io
from mitmproxy.test import taddons

from llmfix.report import views
from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.images import b64, noise_png
from tests.upstreams.captures import capture_json
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(180)
FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
RNG = random.Random(66)
ALNUM = string.ascii_letters + string.digits


def key(prefix: str, n: int = 48) -> str:
    return prefix + "".join(RNG.choice(ALNUM) for _ in range(n))


BEARER = key("sk-proj-")
ANTHROPIC_KEY = key("sk-ant-api03-")
AZURE_KEY = "".join(RNG.choice("0123456789abcdef") for _ in range(32))  # Azure keys have no prefix: header only
TOOL_KEY = key("sk-proj-")
ARGS_KEY = key("xai-")
USER_KEY = key("sk-")
STREAM_KEY = key("sk-proj-")
HEADER_KEYS = [BEARER, ANTHROPIC_KEY, AZURE_KEY]
BODY_KEYS = [TOOL_KEY, ARGS_KEY, USER_KEY, STREAM_KEY]
HEADERS = {"authorization": f"Bearer {BEARER}", "x-api-key": ANTHROPIC_KEY, "api-key": AZURE_KEY,
           "content-type": "application/json"}
IMAGES = [b64(noise_png(side, side, seed)) for seed, side in enumerate((32, 27, 22, 17))]  # real: decoded upstream
LEAK = f"here is the env:\nOPENAI_API_KEY={TOOL_KEY}\nHOME=/home/dev\n"


def png(i: int) -> str:
    return f"data:image/png;base64,{IMAGES[i]}"


def xai_request() -> dict[str, Any]:
    body = capture_json("pi-ai/xai_responses.json")
    body["input"][1]["content"][0]["text"] += f" My key is {USER_KEY}."
    body["input"][2]["arguments"] = json.dumps({"command": f"export XAI_API_KEY={ARGS_KEY}; cat .env"})
    body["input"][3]["output"] = [{"type": "input_text", "text": LEAK},
                                  {"type": "input_image", "image_url": png(0), "detail": "auto"}]
    return body


def droid_request() -> dict[str, Any]:
    body = capture_json("droid/0.225.2__two_images__turn2.json")
    n = len(body["messages"])
    body["messages"][n - 4]["content"] = LEAK  # tool a's text
    body["messages"][n - 3]["content"][1]["image_url"]["url"] = png(1)
    body["messages"][n - 1]["content"][1]["image_url"]["url"] = png(2)
    body["stream"] = False
    return body


def deepseek_request() -> dict[str, Any]:
    return {"model": "deepseek-chat", "messages": [
        {"role": "user", "content": f"use {USER_KEY}"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_s", "type": "function",
             "function": {"name": "shot", "arguments": json.dumps({"k": ARGS_KEY})}}]},
        {"role": "tool", "tool_call_id": "call_s",
         "content": [{"type": "text", "text": LEAK}, {"type": "image_url", "image_url": {"url": png(3)}}]},
    ]}


def anthropic_request() -> dict[str, Any]:
    body = capture_json("pi-ai/anthropic_messages.json")
    body["messages"].append({"role": "user", "content": [{"type": "text", "text": LEAK},
                                                         {"type": "image", "source": {
                                                             "type": "base64", "media_type": "image/png",
                                                             "data": IMAGES[0]}}]})
    return body


STREAMED_ANSWER = (
    'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant",'
    f'"content":"your key {STREAM_KEY} is exposed"}},"finish_reason":null}}]}}\n\n'
    'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
    '"id":"call_z","type":"function","function":{"name":"Bash","arguments":'
    + json.dumps(json.dumps({"cmd": f"echo {STREAM_KEY}"}))
    + '}}]},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("secrets")
    log, flows = tmp / "changes.jsonl", tmp / "flows.mitm"
    with MockUpstream(rules="by-host") as upstream:
        options = {"loopback_upstream": upstream.address, "llmfix_memory": ":memory:", "llmfix_log": str(log),
                   "termlog_verbosity": "debug", "save_stream_file": str(flows), "store_streamed_bodies": "true"}
        with Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options, confdir=tmp / "conf") as proxy:
            with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=30) as c:
                statuses = [
                    c.post("https://api.x.ai/v1/responses", json=xai_request(), headers=HEADERS).status_code,
                    c.post("https://api.openai.com/v1/chat/completions", json=droid_request(),
                           headers=HEADERS).status_code,
                    c.post("https://api.deepseek.com/v1/chat/completions", json=deepseek_request(),
                           headers=HEADERS).status_code,
                    c.post("https://api.anthropic.com/v1/messages", json=anthropic_request(),
                           headers=HEADERS).status_code,
                    c.post("https://api.openai.com/v1/chat/completions", content=b"{" + LEAK.encode() + b"}",
                           headers=HEADERS).status_code,
                ]
                upstream.queue_sse(STREAMED_ANSWER)
                with c.stream("POST", "https://api.openai.com/v1/chat/completions", headers=HEADERS,
                              json={"model": "gpt-4.1", "stream": True,
                                    "messages": [{"role": "user", "content": "hi"}]}) as r:
                    statuses.append(r.status_code)
                    streamed = r.read()
            proxy.wait_for_output("llmfix: ", timeout=10)
        yield {"console": proxy.output(), "log": log, "flows": flows, "statuses": statuses, "streamed": streamed,
               "upstream": upstream}


def leaks(text: str) -> list[str]:
    """Every key (or 12-character piece of one) and every 16-character piece of an image found in ``text``."""
    found = []
    for secret in HEADER_KEYS + BODY_KEYS:
        body = secret.split("-")[-1]
        if any(body[i:i + 12] in text for i in range(len(body) - 11)):
            found.append(f"key {secret[:10]}…")
    for i, image in enumerate(IMAGES):
        if any(image[j:j + 16] in text for j in range(64, len(image) - 40, 4)):  # PNGs all start and end alike
            found.append(f"image {i}")
    return found


def load_flows(path: Path) -> list[http.HTTPFlow]:
    with path.open("rb") as f:
        return [flow for flow in io.FlowReader(f).stream() if isinstance(flow, http.HTTPFlow)]


def test_the_scenario_ran_as_intended(run: dict[str, Any]) -> None:
    assert run["statuses"] == [200, 200, 200, 200, 400, 200]
    assert STREAM_KEY.encode() in run["streamed"]  # the key did reach the client: only logs must not show it
    console = run["console"]
    for repair in ("hoist-tool-media", "untangle-tool-run"):
        assert repair in console
    assert "does not take image input" in console
    assert "left unchanged: body is not valid JSON" in console
    assert "DEBUG" in console or "client connect" in console  # debug verbosity is on
    records = [json.loads(line) for line in run["log"].read_text().splitlines()]
    assert len(records) >= 5 and any(r.get("dropped") for r in records)
    # the keys were really in what llmfix handled (else the scan below proves nothing)
    sent = [r.body for r in run["upstream"].requests]
    assert all(any(k.encode() in b for b in sent) for k in BODY_KEYS[:3])
    assert all(any(k in r.headers.values() or f"Bearer {k}" in r.headers.values() for r in run["upstream"].requests)
               for k in HEADER_KEYS)
    # and the scanner finds them where they are: in the raw saved flows
    raw = "\n".join(f.request.get_text(strict=False) or "" for f in load_flows(run["flows"]))
    raw += "\n".join(str(f.request.headers) for f in load_flows(run["flows"]))
    found = leaks(raw)  # STREAM_KEY is in a response; image 3 was dropped (deepseek-chat takes no images)
    assert len(found) == len(HEADER_KEYS) + len(BODY_KEYS) - 1 + len(IMAGES) - 1 and "image 3" not in found


def test_console_has_no_keys_and_no_base64(run: dict[str, Any]) -> None:
    assert leaks(run["console"]) == []


def test_jsonl_log_has_no_keys_and_no_base64(run: dict[str, Any]) -> None:
    text = run["log"].read_text()
    assert "<secret" in text and "sha256:" in text  # redacted, not dropped
    assert leaks(text) == []


def test_saved_flows_comments_and_change_records_have_no_keys(run: dict[str, Any]) -> None:
    flows = load_flows(run["flows"])
    assert len(flows) == 6
    for flow in flows:
        info = flow.metadata.get("llmfix") or {}
        shown = [flow.comment, json.dumps(info.get("lines", [])), json.dumps(info.get("changes", [])),
                 json.dumps(info.get("before", [])), json.dumps(info.get("after", []))]
        assert leaks("\n".join(shown)) == [], flow.request.pretty_url


@pytest.mark.parametrize("view", ["auto", "llmfix diff", "llmfix original", "llmfix conversation"])
def test_content_views_have_no_keys_and_no_base64(run: dict[str, Any], view: str) -> None:
    views.register()
    rendered = masked = 0
    with taddons.context():  # content views read mitmproxy's options
        for flow in load_flows(run["flows"]):
            for message in (flow.request, flow.response):
                if message is None or not message.raw_content:
                    continue
                result = contentviews.prettify_message(message, flow, view_name=view)
                if view == "auto" and not result.view_name.startswith("llmfix"):
                    continue  # mitmproxy's own views show the body as it is: not llmfix's to redact
                assert leaks(result.text) == [], (view, result.view_name, flow.request.pretty_url)
                rendered += 1
                masked += result.text.count("<secret")
    assert rendered >= 3
    if view in ("llmfix original", "llmfix conversation"):
        assert masked, "no key was even shown masked: the scan saw nothing"


# -- Gemini: the key in x-goog-api-key, in the ?key= query parameter, and Code Assist's OAuth bearer -----------------
#
# Gemini's clients send the API key in ``x-goog-api-key`` (Gemini CLI, google-genai, the AI SDK) or, as some proxies
# and docs do, in the URL's ``?key=`` query parameter; Gemini CLI logged in with Google sends Code Assist an OAuth
# ``Authorization: Bearer ya29.…``. A second mitmdump runs each through llmfix's paths: repaired up front, streamed,
# rejected and resent (a refused signature: repair-and-retry), rejected inside a 200 stream (learned from), bad input
# (a warning), with metrics served. Its terminal is made wide (``COLUMNS``) so that mitmproxy's own flow line shows
# each URL whole: that line is mitmproxy's, printing the URL as the client sent it (``?key=`` included); llmfix's lines,
# records, comments, views, metrics and captures must hold none of the keys.

GOOGLE_KEY = "AIza" + "".join(RNG.choice(ALNUM) for _ in range(35))  # the Gemini API's key shape
QUERY_KEY = "AIza" + "".join(RNG.choice(ALNUM) for _ in range(35))
PLAIN_QUERY_KEY = "".join(RNG.choice(ALNUM) for _ in range(40))  # no known shape: only its name says it is a key
OAUTH = "ya29." + "".join(RNG.choice(ALNUM) for _ in range(120))  # a Google OAuth access token's shape
GEMINI_KEYS = [GOOGLE_KEY, QUERY_KEY, PLAIN_QUERY_KEY, OAUTH]
GEMINI = "https://generativelanguage.googleapis.com/v1beta/models"
PRO, ALIAS = "gemini-3.1-pro-preview", "gemini-flash-latest"
READ_A, READ_B = {"file_path": "a.md"}, {"file_path": "b.md"}
FLOW_LINE = re.compile(r"^(?:\S+:\d+|\[replay\]): (?:GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH|CONNECT) |^\s*<< ")
"""mitmproxy's own flow lines (its dumper addon): the request line (a client's address, or ``[replay]`` for llmfix's
resend, a copy of the client's request) and the answer line under it."""


def gemini_leaks(text: str) -> list[str]:
    """Every Gemini key or token (or 12-character piece of one) found in ``text``."""
    return [f"key {k[:6]}…" for k in GEMINI_KEYS if any(k[i:i + 12] in text for i in range(len(k) - 11))]


def gemini_history(ledger: Any, *, signer: str | None = "gemini", twice: bool = False) -> dict[str, Any]:
    """A turn that called ``read_file`` twice at once; its first call signed by ``signer`` (None: unsigned, a lost
    signature); ``twice``: every response sent twice (a resumed Gemini CLI session)."""
    first: dict[str, Any] = {"functionCall": {"name": "read_file", "args": READ_A}}
    if signer is not None:
        first["thoughtSignature"] = ledger.sign_call("read_file", READ_A, signer=signer)
    responses = [{"functionResponse": {"name": "read_file", "response": {"output": f"contents of {n}"}}}
                 for n in ("a.md", "b.md")]
    return {"contents": [
        {"role": "user", "parts": [{"text": "Read a.md and b.md at once."}]},
        {"role": "model", "parts": [first, {"functionCall": {"name": "read_file", "args": READ_B}}]},
        {"role": "user", "parts": responses * (2 if twice else 1)},
    ]}


@pytest.fixture(scope="module")
def gemini_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from tests.e2e.scrape import metrics_url, scrape
    from tests.upstreams.gemini_canned import text_answer
    from tests.upstreams.gemini_errors import GeminiError, missing_signature

    tmp = tmp_path_factory.mktemp("gemini-secrets")
    log, flows = tmp / "changes.jsonl", tmp / "flows.mitm"
    with MockUpstream(rules="by-host") as upstream, pytest.MonkeyPatch.context() as env:
        env.setenv("COLUMNS", "1000")  # mitmproxy's flow line shows whole URLs (no terminal: it reads COLUMNS)
        ledger = upstream.gemini.ledger
        in_stream = GeminiError(missing_signature("gemini", "read_file", 2), "signature-missing")
        upstream.gemini.queue(text_answer("one"), text_answer("two", chunks=2),
                              text_answer("never finished", chunks=2).with_error(in_stream, after=1),
                              text_answer("four"), text_answer("five", chunks=2))
        options = {"loopback_upstream": upstream.address, "llmfix_memory": ":memory:", "llmfix_log": str(log),
                   "termlog_verbosity": "debug", "save_stream_file": str(flows), "store_streamed_bodies": "true",
                   "llmfix_metrics": "127.0.0.1:0"}
        with Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options, confdir=tmp / "conf") as proxy:
            header = {"x-goog-api-key": GOOGLE_KEY}
            with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=30) as c:
                def stream(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> int:
                    with c.stream("POST", url, json=body, headers=headers) as r:
                        r.read()
                        return r.status_code

                statuses = [
                    # repaired up front (drop-repeated-responses), the key in the header
                    c.post(f"{GEMINI}/{PRO}:generateContent", json=gemini_history(ledger, twice=True),
                           headers=header).status_code,
                    # repaired up front (restore-thought-signatures), streamed, the key in the query
                    stream(f"{GEMINI}/{PRO}:streamGenerateContent?alt=sse&key={QUERY_KEY}",
                           gemini_history(ledger, signer=None)),
                    # a rejection inside the 200 stream (an alias model: nothing repaired up front), learned from
                    stream(f"{GEMINI}/{ALIAS}:streamGenerateContent?alt=sse&key={QUERY_KEY}",
                           gemini_history(ledger, signer=None), header),
                    # another account's signature: 400, learned, resent once (repair-and-retry), the key in the query
                    c.post(f"{GEMINI}/{PRO}:generateContent?key={PLAIN_QUERY_KEY}",
                           json=gemini_history(ledger, signer="another-account")).status_code,
                    # Code Assist (Gemini CLI logged in with Google): the OAuth bearer, the envelope, repaired
                    stream("https://cloudcode-pa.googleapis.com/v1internal:streamGenerateContent?alt=sse",
                           {"model": PRO, "project": "proj-test", "user_prompt_id": "p1",
                            "request": gemini_history(ledger, signer="code-assist", twice=True)},
                           {"authorization": f"Bearer {OAUTH}"}),
                    # bad input: not JSON (a warning), the key in the query
                    c.post(f"{GEMINI}/{PRO}:generateContent?key={QUERY_KEY}", content=b"{not json",
                           headers={"content-type": "application/json"}).status_code,
                ]
            proxy.wait_for_output("inside its 200 stream", timeout=10)
            proxy.wait_for_output("left unchanged: body is not a JSON object", timeout=10)
            metrics = scrape(metrics_url(proxy)).text
        yield {"console": proxy.output(), "log": log, "flows": flows, "statuses": statuses, "metrics": metrics,
               "upstream": upstream, "tmp": tmp}


def llmfix_lines(console: str) -> str:
    """The console without mitmproxy's own flow lines."""
    return "\n".join(line for line in console.splitlines() if not FLOW_LINE.match(line))


def test_the_gemini_scenario_ran_as_intended(gemini_run: dict[str, Any]) -> None:
    assert gemini_run["statuses"] == [200, 200, 200, 200, 200, 400]
    console = gemini_run["console"]
    for shown in ("drop-repeated-responses", "restore-thought-signatures", "retry: 400 gemini-signature-refused",
                  "rejected inside its 200 stream: 400 gemini-signature-missing",
                  "left unchanged: body is not a JSON object"):
        assert shown in console, shown
    # the keys really went through llmfix to the upstream (else the scans below prove nothing) ...
    seen = gemini_run["upstream"].requests
    assert any(r.headers.get("x-goog-api-key") == GOOGLE_KEY for r in seen)
    assert any(f"key={QUERY_KEY}" in r.path for r in seen) and any(f"key={PLAIN_QUERY_KEY}" in r.path for r in seen)
    assert any(r.headers.get("authorization") == f"Bearer {OAUTH}" for r in seen)
    # ... and the scan finds a query key where mitmproxy itself prints it: its own flow line, the URL as it came
    flow_lines = "\n".join(line for line in console.splitlines() if FLOW_LINE.match(line))
    assert QUERY_KEY in flow_lines


def test_gemini_keys_are_in_no_llmfix_console_line(gemini_run: dict[str, Any]) -> None:
    text = llmfix_lines(gemini_run["console"])
    assert "llmfix: " in text
    assert [line for line in text.splitlines() if gemini_leaks(line)] == []


def test_gemini_keys_are_in_no_jsonl_record(gemini_run: dict[str, Any]) -> None:
    text = gemini_run["log"].read_text()
    records = [json.loads(line) for line in text.splitlines()]
    assert {r.get("event") for r in records} >= {"retry", "stream-rejection"}
    [learned] = [r["learned"] for r in records if r.get("event") == "stream-rejection"]
    assert learned == [{"flag": "gemini_thought_signatures", "value": True, "new": True}]
    assert gemini_leaks(text) == []


def test_gemini_keys_are_in_no_comment_and_no_llmfix_metadata(gemini_run: dict[str, Any]) -> None:
    flows = load_flows(gemini_run["flows"])
    assert len(flows) == 7  # six requests and llmfix's resend
    for flow in flows:
        kept = {k: v for k, v in flow.metadata.items() if k.startswith("llmfix")}
        shown = [flow.comment, json.dumps(kept, default=str)]
        assert gemini_leaks("\n".join(shown)) == [], flow.request.path.split("?")[0]
    assert any("rejected inside its 200 stream" in f.comment for f in flows)


@pytest.mark.parametrize("view", ["llmfix diff", "llmfix original", "llmfix conversation"])
def test_gemini_keys_are_in_no_content_view(gemini_run: dict[str, Any], view: str) -> None:
    views.register()
    rendered = 0
    with taddons.context():
        for flow in load_flows(gemini_run["flows"]):
            for message in (flow.request, flow.response):
                if message is None or not message.raw_content:
                    continue
                result = contentviews.prettify_message(message, flow, view_name=view)
                assert gemini_leaks(result.text) == [], (view, flow.request.path.split("?")[0])
                rendered += 1
    assert rendered >= 6


def test_gemini_keys_are_in_no_metric(gemini_run: dict[str, Any]) -> None:
    text = gemini_run["metrics"]
    assert 'rejection="gemini-signature-missing"' in text  # the in-stream rejection was counted
    assert gemini_leaks(text) == [] and "googleapis" not in text


def test_gemini_keys_are_in_no_capture(gemini_run: dict[str, Any]) -> None:
    from llmfix.report.capture import write_fixture

    flows = load_flows(gemini_run["flows"])
    flow_path, sidecar, _ = write_fixture(flows, gemini_run["tmp"] / "captured")
    assert gemini_leaks(flow_path.read_bytes().decode("utf-8", "replace")) == []
    assert gemini_leaks(sidecar.read_text()) == []
    captured = load_flows(flow_path)
    assert any("key=%3Credacted%3E" in f.request.path or "key=<redacted>" in f.request.path for f in captured)
    assert any(f.request.headers.get("x-goog-api-key") == "<redacted>" for f in captured)
    assert any(f.request.headers.get("authorization") == "<redacted>" for f in captured)
