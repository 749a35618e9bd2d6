"""By hand, not in CI: the real Claude Code against strict DeepSeek / GLM mocks on loopback, without and with llmfix.

    mkdir -p /tmp/cc && npm install --prefix /tmp/cc @anthropic-ai/claude-code
    uv run python -m tests.e2e.live_claude_code --claude /tmp/cc/node_modules/.bin/claude

Claude Code gets a fake key, a throw-away HOME and a project holding a.png; the mock's first answer is a
``Read`` tool_use on it (the captured turn-1 stream), its second the default text. Two set-ups, as in the
README: forward mode (``HTTPS_PROXY`` + ``NODE_EXTRA_CA_CERTS``, base URL ``https://api.deepseek.com/anthropic``
or ``https://open.bigmodel.cn/api/anthropic``; the loopback script sends the flow to the by-host mock), and
reverse mode (``--mode reverse:http://127.0.0.1:PORT`` in front of a DeepSeek-rules mock named by a profiles
file, ``ANTHROPIC_BASE_URL=http://127.0.0.1:PROXY/anthropic``). Prints Claude Code's result and every request
the mock received: status, path, roles, block types. Every process is bounded by a timeout.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.upstreams.captures import capture_path
from tests.upstreams.mock import ORIGINAL_HOST_HEADER, MockUpstream, RecordedRequest

FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAGUlEQVR42mP4z8AARwz/cSAKJZB5yICKEgBkCl"
                       "+hRHxicwAAAABJRU5ErkJggg==")
PROMPT = "Look at a.png with the Read tool and tell me what you see."
TIMEOUT = 150


def claude(binary: str, home: Path, base_url: str, proxy: Mitmdump | None) -> subprocess.CompletedProcess[str]:
    dropped = ("ANTHROPIC", "HTTP", "ALL_PROXY", "NO_PROXY")  # the user's own key, base URL and proxies
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(dropped)}
    env.update(HOME=str(home), ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="sk-fake-not-a-key",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1")
    if proxy is not None:
        env.update(HTTPS_PROXY=proxy.url, NODE_EXTRA_CA_CERTS=str(proxy.ca_path))
    project = home / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "a.png").write_bytes(PNG)
    return subprocess.run([binary, "-p", PROMPT, "--output-format", "json", "--allowedTools", "Read"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL, check=False)


def _block(b: dict[str, Any]) -> str:
    kind = str(b.get("type"))
    if kind == "text" and str(b.get("text", "")).startswith("<system-reminder>"):
        return "text:<system-reminder>"
    if kind == "tool_result" and isinstance(b.get("content"), list):
        return f"tool_result[{','.join(str(c.get('type')) for c in b['content'])}]"
    return kind


def show(label: str, result: subprocess.CompletedProcess[str], requests: list[RecordedRequest]) -> None:
    print(f"== {label}: claude exit {result.returncode}")
    try:
        out = json.loads(result.stdout)
        print(f"   result: is_error={out.get('is_error')} num_turns={out.get('num_turns')} {out.get('result')!r}")
    except ValueError:
        print(f"   stdout: {result.stdout[-400:]!r}\n   stderr: {result.stderr[-400:]!r}")
    for r in requests:
        body = r.json if isinstance(r.json, dict) else {}
        messages = body.get("messages", [])
        print(f"   {r.method} {r.headers.get(ORIGINAL_HOST_HEADER, r.headers.get('host'))}{r.path} -> {r.status}"
              f" {r.reason or ''} roles={[m.get('role') for m in messages]}")
        for i, m in enumerate(messages):
            if r.status == 200 and isinstance(m.get("content"), list):
                print(f"      [{i}] {m['role']}: {', '.join(_block(b) for b in m['content'])}")


def forward(binary: str, tmp: Path, host: str, prefix: str, llmfix: bool) -> None:
    home = tmp / f"forward-{host}-{llmfix}"
    turn1 = capture_path("claude-code/single_png__turn1_response.sse.txt").read_text()
    with MockUpstream() as up:
        up.queue_sse(turn1.replace("/home/dev/project", str(home / "project")))
        scripts = [FIX_SCRIPT, LOOPBACK_SCRIPT] if llmfix else [LOOPBACK_SCRIPT]
        options = {"loopback_upstream": up.address, **({"llmfix_memory": ":memory:"} if llmfix else {})}
        with Mitmdump(scripts=scripts, options=options, confdir=tmp / "confdir") as proxy:
            result = claude(binary, home, f"https://{host}{prefix}", proxy)
            show(f"forward, {host}{prefix}, {'with' if llmfix else 'without'} llmfix", result, up.requests)
            print("\n".join("   " + line[line.find("llmfix:"):][:240] for line in proxy.output().splitlines()
                            if "llmfix:" in line))


def reverse(binary: str, tmp: Path) -> None:
    home = tmp / "reverse"
    turn1 = capture_path("claude-code/single_png__turn1_response.sse.txt").read_text()
    with MockUpstream(rules="deepseek") as up:
        up.queue_sse(turn1.replace("/home/dev/project", str(home / "project")))
        profiles = tmp / "profiles.toml"
        profiles.write_text(f'[hosts."127.0.0.1:{up.port}"]\nbase = "deepseek"\n')
        with Mitmdump(scripts=[FIX_SCRIPT], confdir=tmp / "confdir", mode=f"reverse:http://127.0.0.1:{up.port}",
                      options={"llmfix_memory": ":memory:", "llmfix_profiles": str(profiles)}) as proxy:
            result = claude(binary, home, f"{proxy.url}/anthropic", None)
            show("reverse, DeepSeek-rules mock named by a profiles file, with llmfix", result, up.requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claude", required=True, help="path to the claude binary (npm @anthropic-ai/claude-code)")
    args = parser.parse_args()
    print(subprocess.run([args.claude, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout)
    with tempfile.TemporaryDirectory() as tmp:
        for host, prefix in (("api.deepseek.com", "/anthropic"), ("open.bigmodel.cn", "/api/anthropic")):
            for llmfix in (False, True):
                forward(args.claude, Path(tmp), host, prefix, llmfix)
        reverse(args.claude, Path(tmp))


if __name__ == "__main__":
    main()
