"""A real ``redis-server`` (Debian's package) on a free loopback port, no persistence, for tests.

    with RedisServer() as server:
        server.url            # redis://127.0.0.1:PORT/0
        server.kill()         # SIGKILL: Redis gone mid-run
        server.start()        # back, same port, empty
        server.dump()         # every key and value, to scan for secrets

Bounded: startup waits for a PING at most ``STARTUP_TIMEOUT``; `stop` waits, then kills. Tests that need it
are skipped with a reason when ``redis-server`` is not installed, unless ``LLMFIX_REQUIRE_REDIS=1``
(``.ci/run`` installs it and sets that, so CI never skips them).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import pytest
import redis

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
STARTUP_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0

needs_redis = pytest.mark.skipif(
    not Path(REDIS_SERVER).exists() and os.environ.get("LLMFIX_REQUIRE_REDIS") != "1",
    reason="redis-server is not installed (apt-get install redis-server; .ci/run does)",
)


def until(condition: Callable[[], object], timeout: float = 10.0) -> bool:
    """Poll ``condition`` until true or ``timeout`` (a bounded wait, never a timed assert)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        for attempt in range(3):
            try:
                self.start()
                return
            except RuntimeError:
                # a free port picked here can be taken by another test process before redis-server binds it
                # (the suite runs in parallel workers): on a port of its own choosing, try another one
                if port is not None or attempt == 2:
                    raise
                self.port = free_port()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, socket_connect_timeout=5)

    def start(self) -> None:
        command = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning"]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        probe = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1, socket_connect_timeout=1)
        try:
            while True:
                try:
                    if probe.ping():
                        return
                except redis.RedisError:
                    pass
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}")
                time.sleep(0.05)
        finally:
            probe.close()

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT)

    def pause(self) -> None:
        """SIGSTOP: Redis hangs (connections accepted by the kernel, never answered)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def dump(self) -> dict[bytes, bytes]:
        """Every key with its value (strings as they are; hashes as their fields and values joined)."""
        out: dict[bytes, bytes] = {}
        with self.client() as c:
            for key in c.scan_iter(count=1000):
                kind = c.type(key)
                if kind == b"string":
                    out[key] = c.get(key) or b""
                elif kind == b"hash":
                    out[key] = b"\n".join(k + b"=" + v for k, v in c.hgetall(key).items())
                else:
                    out[key] = kind
        return out

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT)

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


UNREACHABLE = "Redis is unreachable"
"""What llmfix logs, once, when its Redis link goes down (memory/redis_link.py)."""
BACK = "Redis is back"
"""What it logs when the link is up again."""
