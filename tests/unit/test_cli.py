"""The launcher's pure parts (llmfix/cli.py) and the run-info addon it reads (llmfix/runinfo.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mitmproxy.test import taddons

from llmfix import cli
from llmfix.proxy import LLMFix
from llmfix.runinfo import RunInfo
from tests.conftest import fixture_bytes, make_flow

RUN = Path("/run-dir")


@pytest.mark.parametrize(
    ("argv", "options", "client"),
    [
        ([], [], None),
        (["-p", "9000"], ["-p", "9000"], None),
        (["--", "codex"], [], ["codex"]),
        (["--set", "a=b", "--", "codex", "--", "x"], ["--set", "a=b"], ["codex", "--", "x"]),
        (["--"], [], []),
    ],
)
def test_split_argv_at_the_first_double_dash(argv, options, client) -> None:
    assert cli.split_argv(argv) == (options, client)


def test_client_options_add_a_free_loopback_port_and_a_log_in_the_confdir() -> None:
    args = cli.client_options(["--set", "confdir=/c", "-s", "x.py"], RUN)
    assert args[:2] == ["-s", str(cli.SCRIPT)]
    assert args[args.index("--mode") + 1] == "regular@127.0.0.1:0"
    assert "llmfix_log=/c/llmfix-changes.jsonl" in args
    assert f"llmfix_ready_file={RUN / 'ready.json'}" in args
    assert args[-4:] == ["--set", "confdir=/c", "-s", "x.py"]  # the user's own options, last, as given


@pytest.mark.parametrize(
    "user",
    [["-p", "9000"], ["--listen-port=9000"], ["--set", "listen_port=9000"], ["--mode", "regular@9000"],
     ["--mode=regular"]],
)
def test_client_options_keep_a_port_or_regular_mode_the_user_chose(user) -> None:
    assert "regular@127.0.0.1:0" not in cli.client_options(user, RUN)


def test_client_options_add_a_regular_mode_next_to_a_reverse_one_and_keep_the_users_log() -> None:
    args = cli.client_options(["--mode", "reverse:https://api.x.ai@8081", "--set", "llmfix_log=/l.jsonl"], RUN)
    assert "regular@127.0.0.1:0" in args
    assert [a for a in args if a.startswith("llmfix_log=")] == ["llmfix_log=/l.jsonl"]


def test_the_default_log_is_in_the_default_confdir(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert f"llmfix_log={tmp_path}/.mitmproxy/llmfix-changes.jsonl" in cli.client_options([], RUN)


@pytest.mark.parametrize(
    ("servers", "url"),
    [
        ([{"type": "regular", "addrs": [["127.0.0.1", 4321]]}], "http://127.0.0.1:4321"),
        ([{"type": "regular", "addrs": [["", 8080]]}], "http://127.0.0.1:8080"),
        ([{"type": "regular", "addrs": [["0.0.0.0", 8080], ["::", 8080]]}], "http://127.0.0.1:8080"),
        ([{"type": "regular", "addrs": [["::1", 8080]]}], "http://[::1]:8080"),
        ([{"type": "reverse", "addrs": [["", 8081]]}, {"type": "regular", "addrs": [["127.0.0.1", 9]]}],
         "http://127.0.0.1:9"),
        ([{"type": "reverse", "addrs": [["", 8081]]}], None),
    ],
)
def test_proxy_url_is_the_regular_modes_loopback_address(servers, url) -> None:
    assert cli.proxy_url({"servers": servers}) == url


def test_client_env_sets_proxy_and_ca_variables_and_keeps_the_rest() -> None:
    env = cli.client_env({"PATH": "/bin", "HTTPS_PROXY": "old"}, "http://127.0.0.1:5", Path("/c/ca.pem"))
    assert env["PATH"] == "/bin"
    assert all(env[k] == "http://127.0.0.1:5" for k in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"))
    assert all(env[k] == "/c/ca.pem" for k in cli.CA_VARS)
    assert env["NODE_USE_ENV_PROXY"] == "1"
    assert "HTTPS_PROXY" not in cli.client_env({}, None, Path("/c/ca.pem"))


def test_paste_lines_are_shell_exports() -> None:
    lines = cli.paste_lines("http://127.0.0.1:8080", Path("/home/a b/ca.pem"))
    assert lines[0].startswith("export HTTPS_PROXY=http://127.0.0.1:8080 HTTP_PROXY=http://127.0.0.1:8080 ")
    assert "SSL_CERT_FILE='/home/a b/ca.pem'" in lines[1]


@pytest.mark.parametrize(
    ("summary", "line"),
    [
        ({"http_requests": 3, "llm_requests": 2, "repaired": 1, "mode": "repair",
          "by_repair": {"hoist-tool-media": 1, "untangle-tool-run": 1}, "log": "/c/l.jsonl"},
         "llmfix: 3 requests (2 to LLM APIs), 1 repaired (hoist-tool-media ×1, untangle-tool-run ×1); "
         "change log: /c/l.jsonl; llmfix output: /o.log"),
        ({"http_requests": 1, "llm_requests": 1, "repaired": 1, "mode": "report",
          "by_repair": {"hoist-tool-media": 1}, "log": None},
         "llmfix: 1 request (1 to LLM APIs), 1 would be repaired (hoist-tool-media ×1); "
         "no change log (llmfix_log unset); llmfix output: /o.log"),
        (None, "llmfix: no summary (llmfix did not stop cleanly); llmfix output: /o.log"),
    ],
)
def test_summary_line(summary, line) -> None:
    assert cli.summary_line(summary, Path("/o.log")) == line


@pytest.mark.parametrize(("returncode", "status"), [(0, 0), (7, 7), (-2, 130), (-15, 143)])
def test_exit_status_like_a_shell(returncode, status) -> None:
    assert cli.exit_status(returncode) == status


async def test_run_info_counts_llm_requests_and_repairs_and_writes_the_summary(tmp_path) -> None:
    fix, info = LLMFix(), RunInfo()
    summary = tmp_path / "summary.json"
    with taddons.context(fix, info) as tctx:
        tctx.configure(fix, llmfix_memory=":memory:")
        tctx.configure(info, llmfix_summary_file=str(summary))
        for flow in (make_flow(fixture_bytes("pi-ai/xai_responses.json"), host="api.x.ai", path="/v1/responses"),
                     make_flow(fixture_bytes("pi-ai/openai_responses.json"), host="api.openai.com",
                               path="/v1/responses"),
                     make_flow(b"{}", path="/not-an-llm-api")):
            await fix.request(flow)
            info.request(flow)
        info.done()
    assert json.loads(summary.read_text()) == {"http_requests": 3, "llm_requests": 2, "repaired": 1,
                                               "mode": "repair", "by_repair": {"hoist-tool-media": 1},
                                               "log": None}

