"""The launcher's ``--metrics HOST:PORT``: llmfix serves its metrics while it runs, and the launcher says where.

The real console script, as in tests/e2e/test_launcher.py: once in the foreground (no client), scraped while it
runs; once with a client (its stdlib-only script, which posts pi-ai's xAI capture through llmfix).
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from tests.e2e.scrape import health, scrape
from tests.e2e.test_launcher import (
    Output,
    client,
    is_open,
    launched,
    options,
    post_capture,
    read_report,
    run_launcher,
    wait_for,
)
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(180)
SAID = re.compile(r"llmfix: metrics on (http://127\.0\.0\.1:(\d+))/metrics, health check on \1/healthz")


def test_served_in_the_foreground_scraped_while_it_runs_and_gone_after(
        upstream: MockUpstream, confdir: Path, tmp_path: Path) -> None:
    with launched(["--metrics", "127.0.0.1:0", "--listen-host", "127.0.0.1", "-p", "0",
                   *options(upstream, confdir, tmp_path / "changes.jsonl")], tmp_path) as proc:
        err = Output(proc.stderr)
        said = wait_for(lambda: SAID.search(err.text()), "the metrics line", proc)
        url, port = said.group(1), int(said.group(2))
        proxy = re.search(r"export HTTPS_PROXY=(\S+)", err.text()).group(1)  # type: ignore[union-attr]
        answer = post_capture(proxy, str(confdir / "mitmproxy-ca-cert.pem"))
        assert answer.status_code == 200, answer.text
        m = scrape(url)
        assert m.value("llmfix_requests_total", profile="xai", outcome="repaired") == 1
        assert m.value("llmfix_repairs_total", repair="hoist-tool-media") == 1
        assert health(url)[0] == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, err.join()
    assert not is_open(port)


def test_with_a_client_it_says_where_before_the_client_runs(
        upstream: MockUpstream, confdir: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = run_launcher(["--metrics=127.0.0.1:0", *options(upstream, confdir, tmp_path / "c.jsonl"), "--",
                         *client(report)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = read_report(report)
    assert seen is not None and seen["status"] == 200
    said = SAID.search(done.stderr)
    assert said, done.stderr
    assert done.stderr.index(said.group(0)) < done.stderr.index("llmfix: 1 request")
    assert not is_open(int(said.group(2)))  # stopped with llmfix


def test_a_bad_address_or_none_stops_before_the_client_runs(confdir: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    bad = run_launcher(["--metrics", "127.0.0.1:99999", "--set", f"confdir={confdir}", "--", *client(report)],
                       cwd=tmp_path)
    assert bad.returncode == 1 and "llmfix_metrics: the port must be a number from 0 to 65535" in bad.stderr
    missing = run_launcher(["--metrics"], cwd=tmp_path)
    assert missing.returncode == 2 and "--metrics needs HOST:PORT" in missing.stderr
    assert not report.exists()
