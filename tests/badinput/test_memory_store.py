"""The memory store under hostile conditions, at the proxy level (its unit tests: tests/unit/test_memory.py).

- ``kill -9`` in the middle of writes: mitmdump learns Droid's two calls from its streamed turn 1,
  then learns from hundreds of concurrent streams and is killed with SIGKILL while they are being
  written; the file passes SQLite's integrity check, a new mitmdump opens it without complaint, and
  Droid's broken turn 2 is repaired with the declarations as streamed (a strict upstream answers 200).
- A file that is not a store at the memory path (garbage, or a store cut in half): mitmdump starts,
  warns once that it moved the file aside (kept for inspection), makes a fresh store, repairs, and learns.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.e2e.test_load import NumberedSSE
from tests.upstreams.captures import capture_bytes, capture_json
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(240)
FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
URL = "https://api.openai.com/v1/chat/completions"
TURN1_SSE = "droid/two_images__turn1_response.sse.txt"
STREAMED = {"call_mock_a": ("Read", '{"file_path": "/home/dev/project/a.png"}'),
            "call_mock_b": ("Read", '{"file_path": "/home/dev/project/b.png"}')}


@pytest.fixture(scope="module")
def upstream() -> Iterator[MockUpstream]:
    with MockUpstream(rules="openai") as up:
        yield up


def start(upstream: MockUpstream, conf: Path, memory: Path) -> Mitmdump:
    options = {"loopback_upstream": upstream.address, "llmfix_memory": str(memory)}
    return Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT], options=options, confdir=conf)


def known_calls(memory: Path) -> set[str]:
    with sqlite3.connect(f"file:{memory}?mode=ro", uri=True, timeout=5) as db:
        return {row[0] for row in db.execute("SELECT call_id FROM tool_calls")}


def turn1(p: Mitmdump, upstream: MockUpstream) -> None:
    upstream.queue_sse(capture_bytes(TURN1_SSE).decode(), chunk_delay=0.01)
    body = capture_json("droid/0.225.2__two_images__turn1.json")
    with httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=30) as http:
        sdk = openai.OpenAI(base_url="https://api.openai.com/v1", api_key="sk-test-droid", http_client=http,
                            max_retries=0)
        list(sdk.chat.completions.create(**body))


def turn2(p: Mitmdump, upstream: MockUpstream) -> tuple[httpx.Response, dict[str, Any]]:
    before = len(upstream.requests)
    with httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=30) as c:
        response = c.post(URL, content=capture_bytes("droid/0.225.2__two_images__turn2.json"),
                          headers={"content-type": "application/json"})
    [seen] = upstream.requests[before:]
    return response, seen.json


def declarations(sent: dict[str, Any]) -> list[tuple[str, str, str]]:
    [assistant] = [m for m in sent["messages"] if m["role"] == "assistant"]
    return [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in assistant["tool_calls"]]


def restored_as_streamed(sent: dict[str, Any]) -> None:
    """call_mock_a as the client declared it, call_mock_b back from memory exactly as the stream declared it."""
    got = declarations(sent)
    assert [(cid, name, json.loads(args)) for cid, name, args in got] == [
        (cid, name, json.loads(args)) for cid, (name, args) in STREAMED.items()]
    assert got[1][2] == STREAMED["call_mock_b"][1]


async def learning_storm(p: Mitmdump, sse: NumberedSSE, n: int) -> None:
    limits = httpx.Limits(max_connections=n + 5)
    async with httpx.AsyncClient(proxy=p.url, trust_env=False, timeout=30, limits=limits) as client:
        async def one(sid: int) -> None:
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}],
                    "metadata": {"stream_id": 10_000 + sid}}
            async with client.stream("POST", f"http://127.0.0.1:{sse.port}/v1/chat/completions", json=body) as r:
                async for _ in r.aiter_bytes():
                    pass
        await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)


def test_kill_9_while_writing_loses_nothing_already_learned(upstream: MockUpstream, tmp_path: Path) -> None:
    memory = tmp_path / "memory.sqlite3"
    p = start(upstream, tmp_path / "conf", memory)
    try:
        turn1(p, upstream)
        deadline = time.monotonic() + 10
        while not set(STREAMED) <= known_calls(memory) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(STREAMED) <= known_calls(memory)
        with NumberedSSE(events=4, delay=0.001) as sse:
            storm = threading.Thread(target=asyncio.run, args=(learning_storm(p, sse, 400),), daemon=True)
            storm.start()
            deadline = time.monotonic() + 20
            while len(known_calls(memory)) < 40 and time.monotonic() < deadline:
                time.sleep(0.01)
            learned_before_kill = len(known_calls(memory)) - len(STREAMED)
            p.process.kill()  # SIGKILL: no shutdown hook, no checkpoint, writes in flight
            p.process.wait(10)
            storm.join(30)
    finally:
        p.stop()
    assert learned_before_kill > 0, "the storm never reached the store: the kill was not mid-write"
    with sqlite3.connect(memory) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert set(STREAMED) <= known_calls(memory)

    with start(upstream, tmp_path / "conf", memory) as p2:
        response, sent = turn2(p2, upstream)
        p2.wait_for_output("untangle-tool-run", timeout=10)
        output = p2.output()
    assert response.status_code == 200, response.text
    assert "not a usable SQLite store" not in output and "Traceback" not in output
    restored_as_streamed(sent)
    print(f"killed with {learned_before_kill} storm calls stored; {len(known_calls(memory))} rows after restart")


def garbage(path: Path) -> None:
    path.write_bytes(random.Random(9).randbytes(64 * 1024))


def half_a_store(path: Path) -> None:
    scratch = path.with_name("scratch.sqlite3")
    with sqlite3.connect(scratch) as db:
        db.execute("CREATE TABLE t (x TEXT)")
        db.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 2000)
    data = scratch.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    scratch.unlink()


@pytest.mark.parametrize("spoil", [garbage, half_a_store], ids=["garbage", "store-cut-in-half"])
def test_a_corrupt_memory_file_is_moved_aside_and_llmfix_works(upstream: MockUpstream, tmp_path: Path,
                                                               spoil: Any) -> None:
    memory = tmp_path / "memory.sqlite3"
    spoil(memory)
    spoiled = memory.read_bytes()
    with start(upstream, tmp_path / "conf", memory) as p:
        p.wait_for_output("moved it to", timeout=10)
        response, sent = turn2(p, upstream)  # nothing learned yet: the orphan is kept as a user message
        assert response.status_code == 200, response.text
        assert [c[0] for c in declarations(sent)] == ["call_mock_a"]
        turn1(p, upstream)  # the fresh store learns
        deadline = time.monotonic() + 10
        while not set(STREAMED) <= known_calls(memory) and time.monotonic() < deadline:
            time.sleep(0.05)
        response, sent = turn2(p, upstream)
        output = p.output()
    assert response.status_code == 200, response.text
    restored_as_streamed(sent)
    assert output.count("is not a usable SQLite store") == 1 and "Traceback" not in output
    [aside] = [f for f in tmp_path.iterdir() if f.name.startswith("memory.sqlite3.corrupt-")
               and not f.name.endswith(("-wal", "-shm", "-journal"))]
    assert aside.read_bytes() == spoiled  # kept for inspection, untouched
    shutil.rmtree(tmp_path / "conf", ignore_errors=True)
    json.dumps(sent)  # the repaired request is valid JSON
