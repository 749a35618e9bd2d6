"""``llmfix [MITMDUMP OPTIONS] [-- CLIENT [ARGS...]]``: the console script: llmfix and a client in one command.

With ``-- CLIENT``: starts llmfix (mitmdump with llmfix's addons and the options given before ``--``) on a
free loopback port in a session of its own (so the terminal's Ctrl-C reaches only the client), its output
going to a log file; waits until it listens and its CA exists; runs the client with the proxy and CA
variables set (:func:`client_env`); forwards signals sent to the launcher; stops llmfix when the client
ends and prints one summary line; exits with the client's status (128+N if a signal N ended it).

Without ``--``: runs llmfix in the foreground like ``mitmdump -s addon/fix.py`` (same port, same output)
and, once it is ready, prints the lines to paste into a client's shell.

mitmdump is this Python's ``mitmproxy.tools.main.mitmdump``, so the launcher works wherever llmfix is
installed (a checkout with ``uv run``, ``uvx``, ``pip install``). What the launcher learns from it
(ports, confdir, counts) comes from :mod:`llmfix.runinfo` through two small JSON files in a run folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from llmfix.cli_env import no_proxy_warning
from llmfix.cli_options import LaunchError, launcher_options, metrics_line

SCRIPT = Path(__file__).resolve().parent / "mitmdump_script" / "llmfix_launched.py"
MITMDUMP = [sys.executable, "-c",
            "import sys; sys.argv[0] = 'mitmdump'; from mitmproxy.tools.main import mitmdump; sys.exit(mitmdump())"]
CA_FILE = "mitmproxy-ca-cert.pem"
DEFAULT_CONFDIR = "~/.mitmproxy"
LOG_NAME = "llmfix-changes.jsonl"
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.05
PR_SET_PDEATHSIG = 1
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")
CA_VARS = ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "CODEX_CA_CERTIFICATE", "REQUESTS_CA_BUNDLE")
NODE_PROXY_VARS = {"NODE_USE_ENV_PROXY": "1"}
"""Node ≥ 24 (and 22.21+): its built-in ``fetch``/``http`` honour HTTP(S)_PROXY only with this. Node 20 ignores it."""
FORWARDED = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, n))
FROM_TERMINAL = tuple(getattr(signal, n) for n in ("SIGINT", "SIGQUIT") if hasattr(signal, n))
"""Signals a terminal sends to its whole foreground process group: the client got them already."""
USAGE = """\
usage: llmfix [--metrics HOST:PORT] [MITMDUMP OPTIONS] -- CLIENT [ARGS...]   run CLIENT through llmfix, then stop it
       llmfix [--metrics HOST:PORT] [MITMDUMP OPTIONS]                       run llmfix like `mitmdump -s addon/fix.py`

With a client, llmfix listens on a free loopback port and the client gets HTTPS_PROXY/HTTP_PROXY (and
lower-case forms), SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, CODEX_CA_CERTIFICATE, REQUESTS_CA_BUNDLE and
NODE_USE_ENV_PROXY=1; NO_PROXY is kept (a line says which known LLM hosts it sends around llmfix). Changes
are appended to <confdir>/llmfix-changes.jsonl unless --set llmfix_log=... is given. MITMDUMP OPTIONS are any
of `mitmdump --help` (e.g. --set llmfix_mode=report, -s more.py, --mode reverse:https://api.x.ai@8081).
--metrics HOST:PORT serves Prometheus metrics at http://HOST:PORT/metrics and a health check at /healthz
(--set llmfix_metrics=HOST:PORT; port 0: a free one, printed).
"""


# ---------------------------------------------------------------------------------- pure helpers


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """``[mitmdump options] -- client args`` → (options, client); client is None without ``--``."""
    if "--" not in argv:
        return list(argv), None
    i = list(argv).index("--")
    return list(argv[:i]), list(argv[i + 1:])


def set_values(options: Sequence[str]) -> dict[str, str]:
    """The ``--set name=value`` pairs among mitmdump options (the last one of a name wins)."""
    found: dict[str, str] = {}
    for i, arg in enumerate(options):
        spec = None
        if arg == "--set" and i + 1 < len(options):
            spec = options[i + 1]
        elif arg.startswith("--set="):
            spec = arg[len("--set="):]
        if spec and "=" in spec:
            name, _, value = spec.partition("=")
            found[name] = value
    return found


def _gives(options: Sequence[str], flags: Sequence[str]) -> bool:
    return any(a in flags or any(a.startswith(f + "=") for f in flags if f.startswith("--")) for a in options)


def client_options(options: Sequence[str], run_dir: Path) -> list[str]:
    """mitmdump's arguments for client mode: llmfix's script, the run files, a free loopback port and a
    change log, unless the user's own options say otherwise (theirs come last and are kept as given)."""
    sets = set_values(options)
    args = ["-s", str(SCRIPT), *run_files(run_dir)]
    modes = [options[i + 1] for i, a in enumerate(options[:-1]) if a in ("-m", "--mode")]
    modes += [a.split("=", 1)[1] for a in options if a.startswith("--mode=")]
    has_port = _gives(options, ("-p", "--listen-port")) or "listen_port" in sets
    if not has_port and not any(m.split("@", 1)[0] == "regular" for m in modes):
        args += ["--mode", "regular@127.0.0.1:0"]  # -p 0: no clash with a taken 8080, no race
    if "llmfix_log" not in sets:
        confdir = os.path.expanduser(sets.get("confdir", DEFAULT_CONFDIR))
        args += ["--set", f"llmfix_log={os.path.join(confdir, LOG_NAME)}"]
    return [*args, *options]


def run_files(run_dir: Path) -> list[str]:
    return ["--set", f"llmfix_ready_file={run_dir / 'ready.json'}",
            "--set", f"llmfix_summary_file={run_dir / 'summary.json'}"]


def proxy_url(ready: Mapping[str, Any]) -> str | None:
    """``http://127.0.0.1:PORT`` of the first regular-mode server, None if llmfix runs no regular mode."""
    for server in ready.get("servers", ()):
        if server.get("type") != "regular" or not server.get("addrs"):
            continue
        host, port = server["addrs"][0][:2]
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    return None


def ca_path(ready: Mapping[str, Any]) -> Path:
    return Path(ready["confdir"]) / CA_FILE


def client_env(base: Mapping[str, str], proxy: str | None, ca: Path) -> dict[str, str]:
    """``base`` plus what clients read to go through llmfix and trust its CA."""
    env = dict(base)
    if proxy:
        env.update(dict.fromkeys(PROXY_VARS, proxy))
        env.update(NODE_PROXY_VARS)
    env.update(dict.fromkeys(CA_VARS, str(ca)))
    return env


def paste_lines(proxy: str | None, ca: Path) -> list[str]:
    """The ``export`` lines that point a client's shell at this llmfix."""
    env = client_env({}, proxy, ca)
    lines = []
    if proxy:
        lines.append("export " + " ".join(f"{k}={shlex.quote(env[k])}" for k in (*PROXY_VARS, *NODE_PROXY_VARS)))
    lines.append("export " + " ".join(f"{k}={shlex.quote(env[k])}" for k in CA_VARS))
    return lines


def summary_line(summary: Mapping[str, Any] | None, console_log: Path | None) -> str:
    """One line: requests seen, repaired, by repair; where the change log (and llmfix's output) are."""
    if summary is None:
        text = "llmfix: no summary (llmfix did not stop cleanly)"
    else:
        n, llm, fixed = summary["http_requests"], summary["llm_requests"], summary["repaired"]
        verb = "would be repaired" if summary.get("mode") == "report" else "repaired"
        text = f"llmfix: {n} request{'s' if n != 1 else ''} ({llm} to LLM APIs), {fixed} {verb}"
        if summary.get("by_repair"):
            text += " (" + ", ".join(f"{name} ×{count}" for name, count in summary["by_repair"].items()) + ")"
        text += f"; change log: {summary['log']}" if summary.get("log") else "; no change log (llmfix_log unset)"
    if console_log is not None:
        text += f"; llmfix output: {console_log}"
    return text


def exit_status(returncode: int) -> int:
    """A child's status as a shell reports it: 128+N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


# ---------------------------------------------------------------------------------- processes


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _tail(path: Path | None, lines: int = 40) -> str:
    if path is None:
        return ""
    try:
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
    except OSError:
        return ""


def wait_ready(proc: subprocess.Popen[bytes], run_dir: Path, output: Path | None,
               timeout: float = STARTUP_TIMEOUT_S) -> dict[str, Any]:
    """The ready file's content once llmfix has started; LaunchError if it exits or hangs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = _read_json(run_dir / "ready.json")
        if ready is not None:
            return ready
        if proc.poll() is not None:
            raise LaunchError(f"llmfix (mitmdump) exited with status {proc.returncode} during startup"
                              + (f"; its output:\n{_tail(output)}" if output else ""))
        time.sleep(POLL_S)
    raise LaunchError(f"llmfix (mitmdump) did not get ready within {timeout:.0f} s"
                      + (f"; its output:\n{_tail(output)}" if output else ""))


def _die_with_launcher() -> None:
    """In the child before exec (Linux): SIGTERM when the launcher dies without stopping it (kill -9)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT (mitmdump shuts down cleanly and writes its summary), a bounded wait, then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)


def _in_foreground_of_terminal() -> bool:
    """Is this process in its terminal's foreground process group (so Ctrl-C reached its children too)?"""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


@dataclass
class Forwarder:
    """Signal handlers that pass the launcher's signals on to a child, restored on exit.

    A terminal's Ctrl-C (SIGINT) and Ctrl-\\ (SIGQUIT) reach every process of the foreground group, the
    client included; passing them on again would deliver them twice (Codex exits on a second Ctrl-C), so
    those are forwarded only when they did not come from the terminal.
    """

    child: Callable[[], subprocess.Popen[bytes] | None]

    def __enter__(self) -> Forwarder:
        self._old = {s: signal.signal(s, self._handle) for s in FORWARDED}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        child = self.child()
        if child is None and signum in (signal.SIGINT, signal.SIGTERM):
            raise KeyboardInterrupt  # still starting llmfix: give up (the caller stops what it started)
        if child is None or child.poll() is not None:
            return
        if signum in FROM_TERMINAL and _in_foreground_of_terminal():
            return
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)


def _watch(proc: subprocess.Popen[bytes], client_done: threading.Event, output: Path) -> None:
    """Say so at once if llmfix dies while the client still runs (its requests would then fail)."""
    proc.wait()
    if not client_done.is_set():
        print(f"llmfix: llmfix (mitmdump) exited with status {proc.returncode} while the client runs; "
              f"its output: {output}", file=sys.stderr, flush=True)


def run_client(options: list[str], client: list[str]) -> int:
    if not client:
        print("llmfix: nothing to run after `--`\n" + USAGE, file=sys.stderr)
        return 2
    executable = shutil.which(client[0])
    if executable is None:
        print(f"llmfix: {client[0]}: command not found", file=sys.stderr)
        return 127
    run_dir = Path(tempfile.mkdtemp(prefix="llmfix-run-"))
    output = run_dir / "mitmdump.log"
    with open(output, "wb") as out:
        proxy = subprocess.Popen([*MITMDUMP, *client_options(options, run_dir)], stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                 preexec_fn=_die_with_launcher if sys.platform == "linux" else None)
    child: subprocess.Popen[bytes] | None = None
    client_done = threading.Event()
    try:
        with Forwarder(lambda: child):
            try:
                ready = wait_ready(proxy, run_dir, output)
            except LaunchError as e:
                print(f"llmfix: {e}", file=sys.stderr)
                return 1
            ca = ca_path(ready)
            if not ca.is_file():
                print(f"llmfix: llmfix's CA {ca} does not exist", file=sys.stderr)
                return 1
            url = proxy_url(ready)
            if url is None:
                print("llmfix: no regular proxy mode, so no HTTPS_PROXY for the client (only the CA variables)",
                      file=sys.stderr)
            if line := metrics_line(ready):  # asked for with --metrics: where (a port 0 is known only now)
                print(line, file=sys.stderr, flush=True)
            if url is not None and (line := no_proxy_warning(os.environ)):  # kept as it is: said, not changed
                print(line, file=sys.stderr, flush=True)
            threading.Thread(target=_watch, args=(proxy, client_done, output), daemon=True).start()
            try:
                child = subprocess.Popen([executable, *client[1:]], env=client_env(os.environ, url, ca))
            except OSError as e:
                print(f"llmfix: cannot run {client[0]}: {e.strerror or e}", file=sys.stderr)
                return 126
            status = exit_status(child.wait())
            client_done.set()
            return status
    finally:
        client_done.set()
        stop(proxy)
        summary = _read_json(run_dir / "summary.json")
        if child is None and summary is None:
            print(f"llmfix: stopped before the client ran; llmfix output: {output}", file=sys.stderr, flush=True)
        else:
            print(summary_line(summary, output), file=sys.stderr, flush=True)
        for name in ("ready.json", "summary.json"):
            (run_dir / name).unlink(missing_ok=True)


def serve(options: list[str]) -> int:
    """llmfix in the foreground, like ``mitmdump -s addon/fix.py``; prints the client lines once ready."""
    run_dir = Path(tempfile.mkdtemp(prefix="llmfix-run-"))
    proxy = subprocess.Popen([*MITMDUMP, "-s", str(SCRIPT), *run_files(run_dir), *options])
    try:
        with Forwarder(lambda: proxy):
            try:
                ready = wait_ready(proxy, run_dir, None, timeout=float("inf"))
            except LaunchError:
                return exit_status(proxy.wait())  # --help, --version, --options, a startup error: as mitmdump
            url, ca = proxy_url(ready), ca_path(ready)
            print("llmfix: ready. In a client's shell, paste:\n" + "\n".join(paste_lines(url, ca))
                  + "\n(or run the client with `llmfix [options] -- CLIENT`)", file=sys.stderr, flush=True)
            if line := metrics_line(ready):
                print(line, file=sys.stderr, flush=True)
            return exit_status(proxy.wait())
    finally:
        stop(proxy)
        summary = _read_json(run_dir / "summary.json")
        if summary is not None:
            print(summary_line(summary, None), file=sys.stderr, flush=True)
        shutil.rmtree(run_dir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    options, client = split_argv(sys.argv[1:] if argv is None else argv)
    if client is None and options in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    try:
        options = launcher_options(options)
    except LaunchError as e:
        print(f"llmfix: {e}\n" + USAGE, file=sys.stderr)
        return 2
    try:
        return serve(options) if client is None else run_client(options, client)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
