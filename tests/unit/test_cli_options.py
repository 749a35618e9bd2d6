"""The launcher's own option (llmfix/cli_options.py) and what the run-info addon tells it of the metrics."""

from __future__ import annotations

import pytest
from mitmproxy.test import taddons

from llmfix.cli_options import LaunchError, launcher_options, metrics_line
from llmfix.metrics.addon import Metrics
from llmfix.proxy import LLMFix
from llmfix.runinfo import RunInfo


@pytest.mark.parametrize(
    ("argv", "options"),
    [(["--metrics", "127.0.0.1:9464", "-p", "9000"], ["--set", "llmfix_metrics=127.0.0.1:9464", "-p", "9000"]),
     (["--metrics=[::1]:0"], ["--set", "llmfix_metrics=[::1]:0"]),
     (["--set", "llmfix_metrics=127.0.0.1:1"], ["--set", "llmfix_metrics=127.0.0.1:1"]),
     (["-s", "x.py"], ["-s", "x.py"])],
)
def test_metrics_becomes_the_llmfix_option(argv, options) -> None:
    assert launcher_options(argv) == options


@pytest.mark.parametrize("argv", [["--metrics"], ["--metrics", "--set", "a=b"]])
def test_metrics_without_a_value_is_refused(argv) -> None:
    with pytest.raises(LaunchError, match="--metrics needs HOST:PORT"):
        launcher_options(argv)


def test_the_metrics_line() -> None:
    assert metrics_line({"metrics": None}) is None and metrics_line({}) is None
    assert metrics_line({"metrics": "http://127.0.0.1:5"}) == (
        "llmfix: metrics on http://127.0.0.1:5/metrics, health check on http://127.0.0.1:5/healthz")


def test_the_ready_file_says_where_metrics_are_served() -> None:
    fix, metrics, info = LLMFix(), Metrics(), RunInfo()
    with taddons.context(fix, metrics, info) as tctx:
        assert info.ready_info()["metrics"] is None
        tctx.configure(metrics, llmfix_metrics="127.0.0.1:0")
        try:
            assert info.ready_info()["metrics"] == metrics.url and str(metrics.url).startswith("http://127.0.0.1:")
        finally:
            metrics.done()
