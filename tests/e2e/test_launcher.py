"""The ``llmfix`` console script runs a client through llmfix, as a user would.

The real console script (``.venv/bin/llmfix``) is started as a subprocess, from a folder outside the
checkout; its CLIENT is a stdlib-only script (tests/e2e/launcher_client.py) that reports the variables it
got and POSTs pi-ai's xAI capture with urllib, going through the proxy and trusting the CA exactly as the
variables say. The loopback redirect (``-s tests/e2e/loopback_upstream.py``, passed through to mitmdump
before ``--``) sends it to the strict xAI mock, which answers 422 unless llmfix repaired the request.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.harness import LOOPBACK_SCRIPT
from tests.upstreams.captures import capture_path
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(180)

LLMFIX = Path(sys.executable).parent / "llmfix"
CLIENT = Path(__file__).resolve().with_name("launcher_client.py")
CAPTURE = "pi-ai/xai_responses.json"
URL = "https://api.x.ai/v1/responses"
DEADLINE_S = 60.0
CA_VARS = ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "CODEX_CA_CERTIFICATE", "REQUESTS_CA_BUNDLE")
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")


def redirect(upstream: MockUpstream) -> list[str]:
    """mitmdump options sending every request to the mock (lazy: no connection to the real host at CONNECT)."""
    return ["-s", str(LOOPBACK_SCRIPT), "--set", f"loopback_upstream={upstream.address}",
            "--set", "connection_strategy=lazy"]


def options(upstream: MockUpstream, confdir: Path, log: Path) -> list[str]:
    return ["--set", f"confdir={confdir}", "--set", "llmfix_memory=:memory:", "--set", f"llmfix_log={log}",
            *redirect(upstream)]


def client(report: Path, status: int = 0, *extra: str, url: str = URL) -> list[str]:
    return [sys.executable, str(CLIENT), str(report), str(capture_path(CAPTURE)), url, str(status), *extra]


def run_launcher(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LLMFIX), *args], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)


@contextlib.contextmanager
def launched(args: Sequence[str], cwd: Path, stdout: int = subprocess.DEVNULL,
             stderr: int = subprocess.PIPE) -> Iterator[subprocess.Popen[str]]:
    """The launcher running with ``args`` (its output as text), killed on the way out if it still runs."""
    proc = subprocess.Popen([str(LLMFIX), *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                            text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def processes_mentioning(marker: str) -> list[int]:
    """PIDs of live processes whose command line contains ``marker`` (a path unique to one test)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def port_of(proxy_url: str) -> int:
    match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)", proxy_url)
    assert match, proxy_url
    return int(match.group(1))


def is_open(port: int) -> bool:
    """Whether some socket listens on ``port`` (from the kernel's tables: a connect probe can self-connect
    when ``port`` is in the ephemeral range and nothing listens, and would then say yes)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    return True
    return False


@contextlib.contextmanager
def port_8080_taken() -> Iterator[None]:
    """Holds 127.0.0.1:8080 (mitmdump's default port) for the block, unless something else already does."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 8080))
        s.listen()
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
    try:
        assert is_open(8080)
        yield
    finally:
        s.close()


def wait_for(predicate: Any, what: str, proc: subprocess.Popen[str] | None = None) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {DEADLINE_S} s")


def read_report(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def post_capture(proxy: str, ca: str) -> httpx.Response:
    """pi-ai's xAI capture posted to xAI through the proxy at ``proxy``, trusting the CA certificate file ``ca``."""
    trust = ssl.create_default_context(cafile=ca)
    with httpx.Client(proxy=proxy, verify=trust, trust_env=False, timeout=30) as http:
        return http.post(URL, content=capture_path(CAPTURE).read_bytes(), headers={"content-type": "application/json"})


class Output:
    """Collects a process's stream on a daemon thread."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def join(self) -> str:
        self._thread.join(10)
        return self.text()


def test_client_gets_the_variables_and_its_request_is_repaired_and_its_status_comes_back(
        upstream: MockUpstream, confdir: Path, tmp_path: Path) -> None:
    report, log = tmp_path / "report.json", tmp_path / "changes.jsonl"
    before = len(upstream.requests)
    with port_8080_taken():
        done = run_launcher([*options(upstream, confdir, log), "--", *client(report, 7)], cwd=tmp_path)
    seen = read_report(report)
    assert seen is not None, done.stderr
    assert done.returncode == 7, done.stderr  # the client's exit status, passed through

    env = seen["env"]
    proxy = env["HTTPS_PROXY"]
    assert port_of(proxy) != 8080
    assert {env[k] for k in PROXY_VARS} == {proxy}
    assert {env[k] for k in CA_VARS} == {str(confdir / "mitmproxy-ca-cert.pem")}
    assert seen["ca_is_pem"] and env["NODE_USE_ENV_PROXY"] == "1"

    assert seen["status"] == 200, seen["answer"]  # the strict xAI mock took the repaired request
    [got] = upstream.requests[before:]
    outputs = [item for item in got.json["input"] if item.get("type") == "function_call_output"]
    assert outputs and all(isinstance(item["output"], str) for item in outputs)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert {r["repair"] for r in records} == {"hoist-tool-media"}

    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("llmfix: 1 request (1 to LLM APIs), 1 repaired (hoist-tool-media ×1); "
                           f"change log: {log}; llmfix output: "), done.stderr
    assert "sk-test" not in done.stderr
    assert not is_open(port_of(proxy))  # llmfix is gone: its port is closed ...
    assert processes_mentioning(str(log)) == []  # ... and no process of it is left


def test_without_llmfix_the_same_client_gets_xais_422(upstream: MockUpstream, tmp_path: Path) -> None:
    """The control: the mock rejects the capture as xAI does when nothing repairs it."""
    body = capture_path(CAPTURE).read_bytes()
    answer = httpx.post(f"{upstream.url}/v1/responses", content=body,
                        headers={"content-type": "application/json", "host": "api.x.ai"}, timeout=30)
    assert answer.status_code == 422
    assert "did not match any variant of untagged enum ModelInput" in answer.text


def test_changes_go_to_the_confdirs_log_by_default(upstream: MockUpstream, tmp_path: Path) -> None:
    confdir, report = tmp_path / "fresh-confdir", tmp_path / "report.json"  # a first run: no CA yet
    args = ["--set", f"confdir={confdir}", "--set", "llmfix_memory=:memory:", *redirect(upstream),
            "--", *client(report)]
    done = run_launcher(args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = read_report(report)
    assert seen is not None and seen["status"] == 200 and seen["ca_is_pem"], done.stderr
    assert seen["env"]["SSL_CERT_FILE"] == str(confdir / "mitmproxy-ca-cert.pem")
    log = confdir / "llmfix-changes.jsonl"
    assert {json.loads(line)["repair"] for line in log.read_text().splitlines()} == {"hoist-tool-media"}
    assert f"change log: {log}" in done.stderr


def test_reverse_mode_serves_a_client_that_ignores_proxy_variables(
        upstream: MockUpstream, confdir: Path, tmp_path: Path) -> None:
    report, log = tmp_path / "report.json", tmp_path / "changes.jsonl"
    with socket.socket() as s:  # a free port for the reverse mode (the forward proxy still gets port 0)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    done = run_launcher(["--mode", f"reverse:https://api.x.ai@127.0.0.1:{port}", *options(upstream, confdir, log),
                         "--", *client(report, 0, "--no-proxy", url=f"{base}/v1/responses")], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = read_report(report)
    assert seen is not None and seen["status"] == 200, done.stderr
    assert seen["env"]["HTTPS_PROXY"] not in (None, base)  # a forward proxy too, for everything else
    assert "1 repaired (hoist-tool-media ×1)" in done.stderr
    assert not is_open(port)


def test_sigint_to_the_launcher_stops_the_client_and_llmfix(
        upstream: MockUpstream, confdir: Path, tmp_path: Path) -> None:
    report, log = tmp_path / "report.json", tmp_path / "changes.jsonl"
    with launched([*options(upstream, confdir, log), "--", *client(report, 0, "--wait")], tmp_path) as proc:
        err = Output(proc.stderr)
        seen = wait_for(lambda: read_report(report), "the client's report", proc)
        assert seen["status"] == 200 and seen["waiting"]
        assert processes_mentioning(str(log)), "llmfix should be running while the client waits"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 128 + signal.SIGINT, err.join()  # the client died of the SIGINT passed on
    with pytest.raises(ProcessLookupError):
        os.kill(seen["pid"], 0)
    assert not is_open(port_of(seen["env"]["HTTPS_PROXY"]))
    assert processes_mentioning(str(log)) == []
    assert "1 repaired (hoist-tool-media ×1)" in err.join()


def test_llmfix_goes_away_even_if_the_launcher_is_killed(
        upstream: MockUpstream, confdir: Path, tmp_path: Path) -> None:
    """SIGKILL leaves the launcher no chance to stop llmfix: the kernel tells llmfix instead (Linux)."""
    report, log = tmp_path / "report.json", tmp_path / "changes.jsonl"
    seen: dict[str, Any] | None = None
    try:
        with launched([*options(upstream, confdir, log), "--", *client(report, 0, "--wait")], tmp_path,
                      stderr=subprocess.DEVNULL) as proc:
            seen = wait_for(lambda: read_report(report), "the client's report", proc)
            assert processes_mentioning(str(log))
            proc.kill()
            proc.wait(10)
            wait_for(lambda: not processes_mentioning(str(log)), "llmfix's exit after the launcher was killed")
            # an exiting process leaves /proc's cmdline (its memory is released) a moment before its sockets close
            port = port_of(seen["env"]["HTTPS_PROXY"])
            wait_for(lambda: not is_open(port), "llmfix's port closing after the launcher was killed")
    finally:
        if seen is not None:  # the client, left behind by the SIGKILL as any child would be
            with contextlib.suppress(ProcessLookupError):
                os.kill(seen["pid"], signal.SIGKILL)


def test_a_bad_option_stops_before_the_client_runs(confdir: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = run_launcher(["--set", f"confdir={confdir}", "--set", "llmfix_mode=bogus", "--set",
                         f"llmfix_log={tmp_path / 'c.jsonl'}", "--", *client(report)], cwd=tmp_path)
    assert done.returncode == 1
    assert "exited with status 1 during startup" in done.stderr
    assert "llmfix_mode must be one of repair, report, off, not 'bogus'" in done.stderr
    assert not report.exists()
    assert processes_mentioning(str(tmp_path / "c.jsonl")) == []


def test_a_missing_client_is_reported_like_a_shell_does(tmp_path: Path) -> None:
    done = run_launcher(["--", "no-such-llm-client-xyz"], cwd=tmp_path)
    assert done.returncode == 127
    assert "no-such-llm-client-xyz: command not found" in done.stderr


def test_without_a_client_it_serves_and_prints_the_lines_to_paste(
        upstream: MockUpstream, confdir: Path, tmp_path: Path) -> None:
    log = tmp_path / "changes.jsonl"
    with launched(["--listen-host", "127.0.0.1", "-p", "0", *options(upstream, confdir, log)], tmp_path,
                  stdout=subprocess.PIPE) as proc:
        out, err = Output(proc.stdout), Output(proc.stderr)
        wait_for(lambda: "llmfix: ready" in err.text() and "export SSL_CERT_FILE" in err.text(), "ready", proc)
        text = err.text()
        proxy = re.search(r"export HTTPS_PROXY=(\S+)", text).group(1)  # type: ignore[union-attr]
        ca = re.search(r"SSL_CERT_FILE=(\S+)", text).group(1)  # type: ignore[union-attr]
        assert ca == str(confdir / "mitmproxy-ca-cert.pem")
        assert f"HTTP_PROXY={proxy}" in text and "NODE_USE_ENV_PROXY=1" in text
        answer = post_capture(proxy, ca)
        assert answer.status_code == 200, answer.text
        wait_for(lambda: "hoist-tool-media" in out.text(), "mitmdump's change line on the terminal", proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, err.join()
    assert "1 repaired (hoist-tool-media ×1)" in err.join()
    assert not is_open(port_of(proxy))
