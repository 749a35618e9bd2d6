"""mitmweb shows what llmfix did, proven in a real browser; the capture command works from mitmweb (issue 7).

A real ``mitmweb -s addon/fix.py`` on loopback, a strict mock upstream behind the loopback redirect, the
pi-ai xAI request sent through it with httpx, and Debian's Chromium driven by Playwright: the flow's
request tab shows the ``llmfix diff`` view (chosen automatically), the dropdown offers ``llmfix original``,
the streamed answer shows as ``llmfix conversation``. Screenshots go to ``artifacts/``. Then
``llmfix.capture`` is run through mitmweb's command API, as its command bar does, and the written file
replays offline with ``mitmdump -nr``.

Chromium is not optional here: if it is missing the test fails and says how to install it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.harness import LOOPBACK_SCRIPT, READY, REPO_ROOT, Mitmdump, MitmdumpError
from tests.upstreams.captures import capture_bytes
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(240)

FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
MITMWEB = Path(sys.executable).parent / "mitmweb"
ARTIFACTS = REPO_ROOT / "artifacts"
CHROMIUM = os.environ.get("LLMFIX_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PROXY_LISTENING = re.compile(r"proxy listening at 127\.0\.0\.1:(\d+)")
UI_TIMEOUT_MS = 30_000  # how long to wait for the UI to render something (a bound, not a timed assert)
API_KEY = "sk-test-not-a-real-key-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mitmweb(Mitmdump):
    """``mitmweb`` on 127.0.0.1: the proxy on a free port (``-p 0``), the web UI on ``web_port``.

    The same lifecycle as :class:`Mitmdump` (output collected, READY line, SIGINT then kill on stop).
    """

    def __init__(self, *, web_port: int, scripts: Sequence[Path], options: Mapping[str, str],
                 args: Sequence[str] = (), confdir: Path) -> None:
        self.web_port = web_port
        super().__init__(scripts=scripts, options=options, args=args, confdir=confdir)

    def _command(self, scripts: Sequence[Path], options: Mapping[str, str], args: Sequence[str],
                 mode: str | None) -> list[str]:
        command = super()._command(scripts, options, args, mode)
        return [str(MITMWEB), *command[1:], "--web-host", "127.0.0.1", "--web-port", str(self.web_port)]

    def _wait_for_port(self, timeout: float) -> int:
        try:
            match = self.wait_for_output(PROXY_LISTENING, timeout)
            self.wait_for_output(f"Web server listening at http://127.0.0.1:{self.web_port}/", timeout)
            self.wait_for_output(READY, timeout)
        except MitmdumpError as e:
            raise MitmdumpError(f"mitmweb did not start: {' '.join(self.command)}\n{e}") from None
        return int(match.group(1))

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"


def chromium_or_fail() -> str:
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        found = shutil.which("chromium")
        if not found:
            pytest.fail(f"Chromium is needed to check mitmweb's llmfix views in a browser, and {CHROMIUM} is "
                        "missing: install it (Debian: apt-get install -y chromium) or set LLMFIX_CHROMIUM.")
        return found
    return CHROMIUM


@pytest.fixture
def web(confdir: Path, tmp_path: Path) -> Iterator[tuple[Mitmweb, MockUpstream, str]]:
    password = secrets.token_hex(12)
    with MockUpstream(rules="by-host") as upstream:
        options = {"loopback_upstream": upstream.address, "llmfix_memory": ":memory:", "web_password": password,
                   "web_open_browser": "false", "store_streamed_bodies": "true"}
        columns = [a for c in ("icon", "path", "method", "status", "comment") for a in ("--set", f"web_columns={c}")]
        proxy: Mitmweb | None = None
        for _ in range(3):  # a free port can be taken between choosing it and mitmweb binding it
            try:
                proxy = Mitmweb(web_port=free_port(), scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options,
                                args=columns, confdir=confdir)
                break
            except MitmdumpError as e:
                if "failed to listen" not in str(e):
                    raise
        assert proxy is not None, "mitmweb could not bind a web port"
        with proxy:
            yield proxy, upstream, password


def send_xai_request(proxy: Mitmweb) -> httpx.Response:
    with httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), trust_env=False, timeout=30) as client:
        return client.post("https://api.x.ai/v1/responses", content=capture_bytes("pi-ai/xai_responses.json"),
                           headers={"content-type": "application/json", "authorization": f"Bearer {API_KEY}"})


def llm_flow(proxy: Mitmweb, password: str) -> dict[str, Any]:
    flows = httpx.get(f"{proxy.web_url}/flows", headers={"authorization": f"Bearer {password}"}, timeout=10).json()
    [flow] = [f for f in flows if f["request"]["path"] == "/v1/responses"]
    return flow


def test_mitmweb_shows_llmfix_views_in_a_browser_and_captures_the_flow(
        web: tuple[Mitmweb, MockUpstream, str], tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    chromium = chromium_or_fail()
    proxy, upstream, password = web
    response = send_xai_request(proxy)
    assert response.status_code == 200, response.text
    assert isinstance(upstream.requests[-1].json["input"][3]["output"], str)  # repaired on the way

    flow = llm_flow(proxy, password)
    assert flow["marked"] == "🔧"  # mitmweb sends the emoji for ":wrench:"
    assert flow["comment"] == "llmfix: hoist-tool-media (2 changes)"
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=chromium, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000})
        try:
            page = browser.new_page()
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(f"{proxy.web_url}/?token={password}#/flows/{flow['id']}/request")
            view = page.locator(".contentview")

            # the request tab: llmfix diff, chosen automatically
            expect(view).to_contain_text("# repaired by: hoist-tool-media")
            expect(view).to_contain_text("+[4] message user")
            expect(view).to_contain_text("input_image <image/png 82 B sha256:b76e3010>")
            expect(page.locator(".flow-table")).to_contain_text("llmfix: hoist-tool-media (2 changes)")
            page.screenshot(path=str(ARTIFACTS / "mitmweb-llmfix-diff.png"), full_page=True)

            # the dropdown offers the client's original request
            view.locator("button", has_text="View:").click()
            page.get_by_role("link", name="llmfix original", exact=True).click()
            expect(view).to_contain_text("# the request as the client sent it; llmfix changed it (hoist-tool-media)")
            expect(view).to_contain_text('"type": "function_call_output"')
            expect(view).to_contain_text('"image_url": "<image/png 82 B sha256:b76e3010>"')
            page.screenshot(path=str(ARTIFACTS / "mitmweb-llmfix-original.png"), full_page=True)

            # the streamed answer, reassembled (kept thanks to store_streamed_bodies)
            page.locator("nav.nav-tabs a", has_text="Response").click()
            expect(view).to_contain_text("streamed responses answer")
            expect(view).to_contain_text("output_text 'ok from mock'")
            page.screenshot(path=str(ARTIFACTS / "mitmweb-llmfix-conversation.png"), full_page=True)

            # llmfix.capture, the way mitmweb's command bar calls it (POST /commands/…, with its XSRF token)
            target = tmp_path / "captured"
            result = page.evaluate("""async ([target]) => {
                const xsrf = document.cookie.match(/\\b_mitmproxy_xsrf=([^;]*)\\b/)[1];
                const r = await fetch("./commands/llmfix.capture", {method: "POST", credentials: "same-origin",
                    headers: {"Content-Type": "application/json", "X-XSRFToken": xsrf},
                    body: JSON.stringify({arguments: ["~u /v1/responses", target]})});
                return await r.json();
            }""", [str(target)])
        finally:
            browser.close()

    assert "error" not in result, result
    [written] = target.glob("*.flow")
    assert str(written) in result["value"]
    assert API_KEY.encode() not in written.read_bytes()
    expected = json.loads(written.with_name(written.name.removesuffix(".flow") + ".expect.json").read_text())
    assert expected["flows"][0]["repairs"] == ["hoist-tool-media"]
    replayed = subprocess.run(
        [str(Path(sys.executable).parent / "mitmdump"), "-nr", str(written), "-s", str(FIX_SCRIPT),
         "--set", "llmfix_memory=:memory:", "--set", f"confdir={tmp_path / 'replay-confdir'}"],
        capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert "hoist-tool-media: input[3]+1: new user message with 1 image from call_mock_1" in replayed.stdout, (
        replayed.stdout + replayed.stderr)
