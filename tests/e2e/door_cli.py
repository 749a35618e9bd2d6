"""Clients of Gemini's OpenAI-compatible door (``/v1beta/openai/chat/completions``) through a real mitmdump.

- The ``openai`` SDK at ``https://generativelanguage.googleapis.com/v1beta/openai/`` through the proxy: `openai_client`,
  `stream_calls` (turn 1 streamed, the tool calls assembled as a careful client does: a call per id, the signature
  of a trailing index-less delta kept on the call before it), `without_extra_content`.
- Qwen Code (``@qwen-code/qwen-code`` 0.24.4, ``.ci/install-qwen-code``; skipped without it, failed under CI with
  ``LLMFIX_REQUIRE_QWEN_CODE=1``) run headless as a user would with an OpenAI-compatible provider at Gemini's base
  URL: a throw-away ``HOME`` with settings (no telemetry, no update check), a fake key, ``--auth-type openai
  --openai-base-url … -m MODEL --approval-mode yolo -o json PROMPT``, ``HTTPS_PROXY`` + ``NODE_EXTRA_CA_CERTS``.
  `QwenSession.run` is bounded and kills its process group on overrun (tests/e2e/gemini_cli.py's runner).

To record the Qwen Code fixture again (paths rewritten, no key: the key travels in a header, not in bodies):

    .ci/install-qwen-code && uv run python -m tests.e2e.door_cli --save tests/fixtures/qwen-code
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import httpx
import openai

from tests.e2e.clients import installed
from tests.e2e.gemini_cli import Run, run_bounded, start_proxy
from tests.e2e.harness import Mitmdump

VERSION = "0.24.4"
REQUIRE = "LLMFIX_REQUIRE_QWEN_CODE"
BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"
MODEL = "gemini-3-flash-preview"
KEY = "door-test-fake-key-0123456789"
PROMPT = "Read a.md and b.md (both at once) and tell me what they say."
SETTINGS = {"general": {"enableAutoUpdate": False, "disableAutoUpdate": True, "disableUpdateNag": True},
            "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}, "ide": {"enabled": False}}
DROPPED = ("OPENAI", "QWEN", "DASHSCOPE", "GEMINI", "GOOGLE", "HTTP", "ALL_PROXY", "NO_PROXY", "NODE_EXTRA_CA",
           "SSL_CERT")


# ------------------------------------------------------------------------------------------------ the openai SDK
def openai_client(proxy: Mitmdump) -> openai.OpenAI:
    """The ``openai`` SDK at Gemini's door, through ``proxy`` (trusting only its CA), no retries."""
    http = httpx.Client(proxy=proxy.url, verify=proxy.ssl_context(), timeout=60)
    return openai.OpenAI(base_url=BASE_URL, api_key=KEY, http_client=http, max_retries=0)


def stream_calls(client: openai.OpenAI, **request: Any) -> list[dict[str, Any]]:
    """Stream one request; the assistant's tool calls as a client that keeps ``extra_content`` assembles them."""
    calls: list[dict[str, Any]] = []
    for chunk in client.chat.completions.create(stream=True, **request):
        for choice in chunk.choices:
            for delta in (choice.delta.model_dump(exclude_none=True).get("tool_calls") or []):
                if delta.get("id"):
                    calls.append({"id": delta["id"], "type": "function", "function": delta["function"]})
                if delta.get("extra_content") and calls:
                    calls[-1]["extra_content"] = delta["extra_content"]
    return calls


def without_extra_content(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls as a client that keeps only OpenAI's standard fields replays them."""
    return [{k: v for k, v in call.items() if k != "extra_content"} for call in calls]


# --------------------------------------------------------------------------------------------------- Qwen Code
def binary() -> Path:
    """The installed ``qwen``; skips (fails under CI) when it is not there."""
    return installed(f"qwen-code-{VERSION}", "qwen", f"Qwen Code {VERSION}", ".ci/install-qwen-code", REQUIRE)


class QwenSession:
    """A throw-away home for Qwen Code with a project folder holding a.md ("alpha") and b.md ("beta")."""

    def __init__(self, home: Path, *, model: str = MODEL) -> None:
        self.home, self.project, self.model = home, home / "project", model
        (home / ".qwen").mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)
        (home / ".qwen" / "settings.json").write_text(json.dumps(SETTINGS))
        (self.project / "a.md").write_text("alpha\n")
        (self.project / "b.md").write_text("beta\n")

    def read_both(self) -> tuple[tuple[str, dict[str, str]], ...]:
        """The two parallel ``read_file`` calls of `PROMPT` (Qwen Code wants absolute paths)."""
        return tuple(("read_file", {"file_path": str(self.project / n)}) for n in ("a.md", "b.md"))

    def run(self, proxy: Mitmdump, prompt: str = PROMPT, *, timeout: float = 120.0) -> Run:
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith(DROPPED)}
        env.update(HOME=str(self.home), HTTPS_PROXY=proxy.url, NO_PROXY="127.0.0.1,localhost",
                   NODE_EXTRA_CA_CERTS=str(proxy.ca_path), OPENAI_API_KEY=KEY, NO_COLOR="1",
                   QWEN_CODE_SUPPRESS_YOLO_WARNING="1", TMPDIR=str(self.home / "tmp"))
        (self.home / "tmp").mkdir(exist_ok=True)
        command = [str(binary()), "--auth-type", "openai", "--openai-base-url", BASE_URL, "-m", self.model,
                   "--approval-mode", "yolo", "-o", "json", prompt]
        return run_bounded(command, self.project, env, timeout)


def result_of(run: Run) -> dict[str, Any]:
    """The ``result`` message of ``-o json`` (a JSON array of messages on stdout), {} when absent."""
    try:
        messages = json.loads(run.stdout[run.stdout.find("["):])
    except ValueError:
        return {}
    return next((m for m in messages if isinstance(m, dict) and m.get("type") == "result"), {})


def main() -> None:
    from tests.upstreams.gemini_canned import function_calls, text_answer
    from tests.upstreams.mock import MockUpstream

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--save", type=Path, required=True, help="fixture folder to write")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmfix-qwen-") as tmp, MockUpstream("by-host") as up:
        session = QwenSession(Path(tmp) / "home")
        up.gemini.door_schemas = False  # its built-in tools are refused otherwise: record the tool turn too
        up.gemini.queue(function_calls(*session.read_both()), text_answer("a.md says alpha, b.md says beta"))
        with start_proxy(up, Path(tmp) / "conf") as proxy:
            run = session.run(proxy)
        print(f"qwen exit {run.returncode}; requests {[(r.status, r.reason) for r in up.requests]}")
        args.save.mkdir(parents=True, exist_ok=True)
        for n, request in enumerate(up.requests, 1):
            text = request.body.decode().replace(str(session.project), "/home/dev/project").replace(
                str(session.project).replace("/", "-"), "-home-dev-project").replace(tmp, "/tmp/qwen")
            (args.save / f"turn{n}_request.json").write_text(json.dumps(json.loads(text), indent=1) + "\n")
        issued = up.gemini.sent[0].issued
        (args.save / "turn1_answer_calls.json").write_text(json.dumps(json.loads(json.dumps(issued).replace(
            str(session.project), "/home/dev/project")), indent=1) + "\n")


if __name__ == "__main__":
    main()
