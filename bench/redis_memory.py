"""The Redis memory's cost, measured in one run on loopback against the embedded SQLite store.

    uv run python bench/redis_memory.py            # ≈1–2 min on 2 cores
    uv run python bench/redis_memory.py --quick    # smoke run (< 40 s)

Needs Debian's ``redis-server`` (started on a free loopback port, no persistence, stopped at the end).

- **store**: in process, ``RedisCallStore.lookup`` of 1 and of 10 known ids, and one ``remember`` as the
  link's writer thread pays it (one ``EVALSHA`` of the compare-and-set script), vs ``SqliteStore`` on a tmp file
  with the same rows; plus what the caller of ``remember`` pays with Redis (handing the write to that thread).
- **media**: ``RedisMediaStore.observe`` of the Codex turn-2 request's tool results (a 2 KB image) and the
  other instance's first ``correlated`` read of it (uncached: two round trips and the decode).
- **no-repair overhead**: bare mitmdump vs llmfix with SQLite vs llmfix with Redis, on the 2 KB Chat request
  and the 200 KB Codex request (both valid, left byte-identical), alternating the three proxies request by
  request; latency p50/p99 and proxy CPU per request. With Redis the engine always runs in a worker
  thread (never waiting on the network on the event loop): that hop is most of the difference.

Prints a markdown table; the machine is shared, so absolute numbers are noisy — compare within one run.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for p in (str(ROOT / "addon"), str(ROOT), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

import bodies  # noqa: E402
import orjson  # noqa: E402
from client import Conn, Req  # noqa: E402
from run import FIX_SCRIPT, MS, REDIRECT_SCRIPT, Proxy, summary, upstream  # noqa: E402

from llmfix import engine  # noqa: E402
from llmfix.dialects.registry import RESPONSES  # noqa: E402
from llmfix.memory.redis_link import RedisLink  # noqa: E402
from llmfix.memory.redis_media import RedisMediaStore  # noqa: E402
from llmfix.memory.redis_store import RedisCallStore, call_key, call_value, write_calls  # noqa: E402
from llmfix.memory.sqlite import SqliteStore  # noqa: E402
from llmfix.memory.store import ToolCall  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

ARGS = orjson.dumps({"command": ["rg", "-n", "handler", "src"], "workdir": "/home/dev/project"}).decode()


def call(i: int | str) -> ToolCall:
    return ToolCall(f"call_{i}", "shell", ARGS, "responses")


def timed(fn: Callable[[], object], n: int) -> dict[str, float]:
    xs = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t)
    return {k: v * MS if k != "n" else v for k, v in summary(xs).items()}


def store_rows(server: RedisServer, tmp: Path, entries: int, n: int) -> list[tuple[str, dict, dict]]:
    link = RedisLink(server.url, timeout_s=2.0)
    redis_calls = RedisCallStore(link, max_age_s=86400)
    sqlite = SqliteStore(tmp / "bench.sqlite3", max_entries=entries * 2)
    try:
        for start in range(0, entries, 1000):
            batch = [call(i) for i in range(start, min(start + 1000, entries))]
            redis_calls.remember(batch)
            sqlite.remember(batch)
        link.flush(30)
        rng = random.Random(1)

        def ids(k: int) -> list[str]:
            return [f"call_{rng.randrange(entries)}" for _ in range(k)]

        rows = []
        for title, k in (("lookup of 1 known id", 1), ("lookup of 10 known ids", 10)):
            rows.append((title, timed(lambda k=k: sqlite.lookup(ids(k)), n),
                         timed(lambda k=k: redis_calls.lookup(ids(k)), n)))
        counter = iter(range(10**9))

        def redis_write() -> None:  # what the writer thread pays for one remember
            c = call(f"new_{next(counter)}")
            write_calls(link.client, [(call_key(c.call_id), call_value(c))], 86400)

        rows.append(("remember of 1 call (the write itself)",
                     timed(lambda: sqlite.remember([call(f"new_{next(counter)}")]), n), timed(redis_write, n)))
        rows.append(("remember of 1 call (what its caller waits)",
                     timed(lambda: sqlite.remember([call(f"new_{next(counter)}")]), n),
                     timed(lambda: redis_calls.remember([call(f"new_{next(counter)}")]), n)))
        link.flush(30)
        return rows
    finally:
        sqlite.close()
        link.close()


def media_rows(server: RedisServer, n: int) -> list[tuple[str, dict, dict]]:
    a, b = RedisMediaStore(RedisLink(server.url)), RedisMediaStore(RedisLink(server.url))
    codex = orjson.loads((ROOT / "tests" / "fixtures" / "codex" / "turn2_request.json").read_bytes())
    call_id = codex["input"][-1]["call_id"]
    raw = orjson.dumps(codex)
    flows = iter(range(10**9))
    try:
        def observe() -> None:
            engine.process(engine.Request(RESPONSES, "api.openai.com", 443, raw, flow_id=f"f{next(flows)}"),
                           engine.Settings(window=a))

        observe_ms = timed(observe, n)

        def correlated() -> None:
            b._decoded.clear()  # the first read of an observation: fetch and decode
            if b.correlated(call_id, "gateway") is None:
                raise RuntimeError("the observation is not shared")

        nothing = {"p50": float("nan"), "p99": float("nan")}
        return [("engine.process of the Codex request, observing its image", nothing, observe_ms),
                ("correlated() of that image from another instance (uncached)", nothing, timed(correlated, n))]
    finally:
        a.link.close()
        b.link.close()


def proxy_rows(server: RedisServer, tmp: Path, n: int) -> list[tuple[str, dict, dict, dict]]:
    rows = []
    with upstream() as port:
        common = {"flow_detail": "0", "termlog_verbosity": "warn", "bench_upstream": f"127.0.0.1:{port}"}
        px = {
            "bare": Proxy("bare", [REDIRECT_SCRIPT], common, tmp / "bare"),
            "sqlite": Proxy("sqlite", [FIX_SCRIPT, REDIRECT_SCRIPT],
                            {**common, "llmfix_memory": str(tmp / "sqlite" / "m.sqlite3")}, tmp / "sqlite"),
            "redis": Proxy("redis", [FIX_SCRIPT, REDIRECT_SCRIPT], {**common, "llmfix_memory": server.url},
                           tmp / "redis"),
        }
        try:
            for title, url, body in (
                ("2 KB Chat, no repair", "http://api.openai.com/v1/chat/completions", bodies.chat_small()),
                ("200 KB Codex, no repair", "http://api.openai.com/v1/responses", bodies.codex_padded()),
            ):
                conns = {k: Conn(p.port) for k, p in px.items()}
                req = Req("POST", url, body)
                lat: dict[str, list[float]] = {k: [] for k in px}
                for k in px:
                    for _ in range(20):
                        conns[k].request(req)
                cpu0 = {k: p.cpu()[0] for k, p in px.items()}
                labels = list(px)
                for i in range(n):
                    for k in labels[i % 3:] + labels[:i % 3]:
                        status, dt, headers = conns[k].request(req)
                        if status != 200 or int(headers.get("x-bench-received", "-1")) != len(body):
                            raise RuntimeError(f"{title} via {k}: HTTP {status} or a changed body")
                        lat[k].append(dt)
                cpu = {k: (p.cpu()[0] - cpu0[k]) / n * MS for k, p in px.items()}
                for c in conns.values():
                    c.close()
                s = {k: summary(v) for k, v in lat.items()}
                for q in ("p50", "p99"):
                    rows.append((f"{title}: latency {q}", *(s[k][q] * MS for k in px)))
                rows.append((f"{title}: proxy CPU/req", *(cpu[k] for k in px)))
        finally:
            for p in px.values():
                p.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples (< 40 s)")
    args = ap.parse_args(argv)
    entries, n_store, n_media, n_proxy = (10_000, 500, 50, 100) if args.quick else (100_000, 3000, 300, 500)
    with tempfile.TemporaryDirectory(prefix="llmfix-bench-redis-") as d, RedisServer() as server:
        tmp = Path(d)
        print(f"# llmfix Redis memory bench ({'quick' if args.quick else 'full'}; shared machine: noisy)\n")
        print(f"| in process ({entries:,} calls stored) | SQLite p50 | SQLite p99 | Redis p50 | Redis p99 |")
        print("|---|---|---|---|---|")
        for title, sq, rd in store_rows(server, tmp, entries, n_store) + media_rows(server, n_media):
            print(f"| {title} | {sq['p50']:.3f} ms | {sq['p99']:.3f} ms | {rd['p50']:.3f} ms | {rd['p99']:.3f} ms |")
        print("\n| through mitmdump (no repair) | bare | llmfix + SQLite | llmfix + Redis | Redis/SQLite |")
        print("|---|---|---|---|---|")
        for title, bare, sq, rd in proxy_rows(server, tmp, n_proxy):
            print(f"| {title} | {bare:.3f} ms | {sq:.3f} ms | {rd:.3f} ms | {rd / sq:.2f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
