"""llmfix's cost against bare mitmdump, measured in one run on loopback.

    uv run python bench/run.py            # full run (≈6–9 min on 2 cores)
    uv run python bench/run.py --quick    # smoke run (< 1 min)
    uv run python bench/run.py --profile chat2k,repair10m   # also py-spy the llmfix proxy in these cells
    uv run python bench/pyspy_top.py bench/results/pyspy-repair10m-*.txt  # where its time went

Prints a markdown table (cell, bare, llmfix, ratio, target, met?) and writes it, with every raw
number, to ``bench/results/<stamp>[-quick].{json,md}``.

Setup: one lean upstream process (``bench/upstream.py``) and five mitmdump processes, all regular
mode on 127.0.0.1, each with ``--flow-detail 0``, ``termlog_verbosity=warn``,
its own tmp confdir, and ``bench/redirect.py`` (like ``tests/e2e/loopback_upstream.py``, it sends every
flow to the upstream after llmfix has seen the real host such as ``api.x.ai``):

- **bare**     — no llmfix;
- **llmfix**   — ``-s addon/fix.py`` first, memory in a tmp SQLite file (the realistic default);
- **control**  — a second bare mitmdump: the ``control/bare`` column is the run's noise floor
  (a ratio that differs from 1 by less than control does is not a measurable difference);
- **bare+stream** — bare with ``stream_large_bodies=1``, the SSE baseline (bare mitmdump buffers
  SSE; llmfix streams LLM SSE answers itself). Not used for request cells because that option also
  streams request bodies, which alone shifts time to first event by ~1 ms;
- **bare+hook** — bare plus ``bench/stream_hook.py`` (sets ``flow.response.stream = True`` for SSE,
  requests buffered as with llmfix): a second SSE baseline, shown as an extra row.

Clients speak plain HTTP to the proxy (absolute-URI requests, keep-alive, Nagle off): HTTPS is kept
out of the measurement. Request cells alternate the proxies request by request in rotating order,
so machine noise hits all of them alike. Proxy CPU is the sum of on-CPU time of all the proxy's
threads (``/proc/<pid>/task/*/schedstat``, ns resolution) over the cell, per request;
``/proc/<pid>/stat`` utime+stime (10 ms ticks) is recorded in the JSON as a cross-check.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for p in (str(ROOT / "addon"), str(ROOT), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

import bodies  # noqa: E402
import fixedcost  # noqa: E402
import orjson  # noqa: E402
import team  # noqa: E402
import workloads  # noqa: E402
from client import Conn, Req  # noqa: E402

FIX_SCRIPT = ROOT / "addon" / "fix.py"
REDIRECT_SCRIPT = BENCH / "redirect.py"
MITMDUMP = Path(sys.executable).parent / "mitmdump"
RESULTS = BENCH / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")
MS = 1e3
CELLS = ("get", "nonllm", "chat2k", "codex200k", "img10m", "codeximg10m", "repair10m", "sse", "concurrent",
         "rss_200k_repair", "rss_10m_new_ids", "fit10m", "fit10m_next")
IN_PROCESS = ("pipeline", "stall", "store", "hist_engine", "team_engine", "fitimg")  # after the proxies have stopped
# the history-size sweep: one request cell per dialect and size, plus image-heavy bodies
SWEEP_SIZES = ("2k", "200k", "1m", "5m")
SWEEP_IMAGES = ("img2m", "img10m3")  # Codex history + three view_image outputs, 2 MB and 10 MB in all
SWEEP = tuple(f"hist_{d}_{s}" for d in ("responses", "messages", "chat") for s in SWEEP_SIZES) + tuple(
    f"hist_{i}" for i in SWEEP_IMAGES)
GROUPS = {"sweep": SWEEP, "sweep_quick": ("hist_responses_200k", "hist_responses_1m", "hist_messages_1m",
                                          "hist_chat_1m", "hist_img10m3")}
# a team's proxy: many interleaved sessions, edited tails, first sights (bench/workloads.py)
TEAM = tuple(workloads.TEAM)
TEAM_GROUPS = {"team": tuple(k for k in TEAM if k not in fixedcost.GEMINI),
               "team_many": tuple(k for k in TEAM if k.startswith("team_")),
               "team_edit": tuple(k for k in TEAM if k.startswith("edit_")),
               "team_first": tuple(k for k in TEAM if k.startswith("first_") and k not in fixedcost.GEMINI)}
# the fixed cost on requests that need no repair, with each kind's targets beside it (bench/fixedcost.py)
FIXEDCOST_GROUP = "fixedcost"
GEMINI_GROUP = "gemini"  # its two cells (native Gemini API) in the fixed-cost table alone


# ------------------------------------------------------------------------------------------- modes


@dataclass(frozen=True)
class Plan:
    small_n: int  # requests per proxy, small cells
    mid_n: int  # 200 KB cell
    big_n: int  # 10 MB cells
    sse_streams: int
    sse_events: int
    sse_gap_ms: float
    pipeline_runs: int
    store_entries: int
    store_lookups: int
    store_remembers: int
    rss_requests: int
    rss_big_requests: int  # 10 MB tool-output images, a new call id each
    conc_phases: int  # per proxy
    conc_seconds: float  # per phase
    big_mb: int = 10
    # history sweep: requests per proxy by body size (2 KB, 200 KB, 1 MB, 5 MB and more)
    sweep_n: tuple[int, int, int, int] = (600, 200, 60, 20)
    fit_n: int = 12  # 10 MB screenshots fitted (each a new one), and the same one carried again


FULL = Plan(small_n=1000, mid_n=400, big_n=200, sse_streams=40, sse_events=20, sse_gap_ms=10, pipeline_runs=21,
            store_entries=100_000, store_lookups=5000, store_remembers=3000, rss_requests=1000, rss_big_requests=60,
            conc_phases=3, conc_seconds=8)
QUICK = Plan(small_n=200, mid_n=60, big_n=12, sse_streams=6, sse_events=10, sse_gap_ms=10, pipeline_runs=5,
             store_entries=100_000, store_lookups=1000, store_remembers=500, rss_requests=150, rss_big_requests=12,
             conc_phases=1, conc_seconds=3, sweep_n=(150, 50, 16, 6), fit_n=3)


# ------------------------------------------------------------------------------------------- stats


def pct(xs: list[float], q: float) -> float:
    """The q-th percentile (0–100), linear interpolation; NaN for no data."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = (len(s) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99),
            "max": max(xs, default=float("nan")), "mean": statistics.fmean(xs) if xs else float("nan")}


# ------------------------------------------------------------------------------------------- proxies


READY_SCRIPT = """import asyncio, functools


class BenchReady:
    def running(self):  # after mitmdump's startup error check: printed only if it keeps running
        asyncio.get_running_loop().call_later(0.05, functools.partial(print, "llmfix-bench: ready", flush=True))


addons = [BenchReady()]
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    """A mitmdump subprocess on a fixed loopback port, its output in a file (``termlog_verbosity=warn``
    hides the "listening at" line that tests/e2e/harness.py waits for, so the bench starts its own)."""

    def __init__(self, label: str, scripts: list[Path], options: dict[str, str], confdir: Path) -> None:
        self.label = label
        self.port = free_port()
        confdir.mkdir(parents=True, exist_ok=True)
        ready = confdir / "bench_ready.py"
        ready.write_text(READY_SCRIPT)
        cmd = [str(MITMDUMP), "--listen-host", "127.0.0.1", "-p", str(self.port)]
        for script in [*scripts, ready]:
            cmd += ["-s", str(script)]
        for k, v in {"confdir": str(confdir), "connection_strategy": "lazy", **options}.items():
            cmd += ["--set", f"{k}={v}"]
        self.command = cmd
        self.log_path = confdir / "mitmdump.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                        cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.pid = self.process.pid
        deadline = time.monotonic() + 60
        while "llmfix-bench: ready" not in self.output():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"mitmdump ({label}) did not start: {' '.join(cmd)}\n{self.output()}")
            time.sleep(0.05)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()

    def cpu(self) -> tuple[float, float, float]:
        """Seconds on CPU: (all live threads [schedstat], utime+stime [stat], the main thread = event loop)."""
        ns = main = 0
        for task in os.listdir(f"/proc/{self.pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{self.pid}/task/{task}/schedstat") as f:
                    t = int(f.read().split()[0])
                ns += t
                if task == str(self.pid):
                    main = t
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        return ns / 1e9, ticks / CLK_TCK, main / 1e9

    def status(self) -> dict[str, int]:
        """VmRSS / VmHWM in bytes."""
        out = {}
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) * 1024
        return out

    def reset_peak(self) -> bool:
        """Reset VmHWM to the current RSS (``echo 5 > /proc/<pid>/clear_refs``)."""
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False


def start_proxies(tmp: Path, upstream_port: int) -> dict[str, Proxy]:
    common = {"flow_detail": "0", "termlog_verbosity": "warn", "bench_upstream": f"127.0.0.1:{upstream_port}"}
    specs = {
        "bare": ([REDIRECT_SCRIPT], common),
        "llmfix": ([FIX_SCRIPT, REDIRECT_SCRIPT],  # FIX_SCRIPT: --addon
                   {**common, "llmfix_memory": str(tmp / "llmfix" / "llmfix-memory.sqlite3")}),
        "control": ([REDIRECT_SCRIPT], common),
        "bare+stream": ([REDIRECT_SCRIPT], {**common, "stream_large_bodies": "1"}),
        "bare+hook": ([BENCH / "stream_hook.py", REDIRECT_SCRIPT], common),
    }

    def start(label: str) -> Proxy:
        scripts, options = specs[label]
        return Proxy(label, scripts, options, tmp / label.replace("+", "_"))

    with ThreadPoolExecutor(len(specs)) as pool:
        futures = {label: pool.submit(start, label) for label in specs}
        return {label: f.result() for label, f in futures.items()}


@contextlib.contextmanager
def upstream() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, str(BENCH / "upstream.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("PORT "):
            raise RuntimeError(f"upstream did not start: {line!r}")
        yield int(line.split()[1])
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# ------------------------------------------------------------------------------------------- cells


@dataclass
class Row:
    cell: str
    bare: float | None
    llmfix: float | None
    unit: str
    target: str = "—"
    kind: str = "info"  # "ratio" (llmfix/bare ≤ x), "delta" (llmfix − bare ≤ x), "abs" (llmfix ≤ x), "info"
    limit: float | None = None
    control: float | None = None  # the control proxy's value (noise floor), where there is one
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.bare and self.llmfix is not None:
            return self.llmfix / self.bare
        return None

    @property
    def met(self) -> bool | None:
        if self.limit is None or self.llmfix is None:
            return None
        if self.kind == "ratio":
            return self.ratio is not None and self.ratio <= self.limit
        if self.kind == "delta":
            return self.bare is not None and self.llmfix - self.bare <= self.limit
        if self.kind == "abs":
            return self.llmfix <= self.limit
        return None


class Bench:
    def __init__(self, plan: Plan, proxies: dict[str, Proxy], tmp: Path, profile: frozenset[str]) -> None:
        self.plan = plan
        self.px = proxies
        self.tmp = tmp
        self.profile = profile
        self.rows: list[Row] = []
        self.raw: dict[str, Any] = {}
        self.notes: list[str] = []
        self.sweep: list[dict[str, Any]] = []  # the history-size sweep's rows
        self.hist_engine: dict[str, Any] = {}
        self.team: list[dict[str, Any]] = []  # the team workloads' rows (bench/team.py)
        self.team_engine: dict[str, Any] = {}

    def log(self, msg: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    # -- request cells ------------------------------------------------------------------------

    def request_cell(self, key: str, title: str, url: str, body: bytes | Callable[[int], bytes] | None, n: int,
                     warmup: int, target: float | None, expect_repair: bool = False,
                     labels: tuple[str, ...] = ("bare", "llmfix", "control"),
                     apart: Callable[[int], bool] | None = None) -> dict[str, Any]:
        """Send ``n`` requests to each proxy, alternating in rotating order; latency and CPU per request.
        ``apart(i)``: request ``i`` is sent to every proxy but not measured (its CPU is taken out)."""
        return self._request_cell(key, title, url, body, n, warmup, target, expect_repair, labels, apart)

    def _request_cell(self, key: str, title: str, url: str, body: bytes | Callable[[int], bytes] | None, n: int,
                      warmup: int, target: float | None, expect_repair: bool,
                      labels: tuple[str, ...], apart: Callable[[int], bool] | None = None) -> dict[str, Any]:
        method = "POST" if body is not None else "GET"
        fixed = b"" if body is None else body if isinstance(body, bytes) else None
        conns = {lb: Conn(self.px[lb].port) for lb in labels}
        size = len(fixed) if fixed is not None else len(body(0))  # type: ignore[operator]
        self.log(f"{title}: {n} × {len(labels)} requests of {size:,} B")
        for lb in labels:
            for i in range(warmup):
                req = Req(method, url, fixed if fixed is not None else body(-1 - i))  # type: ignore[operator]
                status, _, _ = conns[lb].request(req)
                if status != 200:
                    raise RuntimeError(f"{title} via {lb}: HTTP {status}")
        lat: dict[str, list[float]] = {lb: [] for lb in labels}
        mismatched = {lb: 0 for lb in labels}
        heads = {}
        if fixed is not None:
            req0 = Req(method, url, fixed)
            heads = {lb: req0.head() for lb in labels}
        set_apart = {lb: [0.0, 0.0, 0.0] for lb in labels}  # CPU of the requests not measured
        measured = n
        with self.pyspy(key):  # after the warm-ups: steady state only
            cpu0 = {lb: self.px[lb].cpu() for lb in labels}
            t0 = time.perf_counter()
            for i in range(n):
                req = req0 if fixed is not None else Req(method, url, body(i))  # type: ignore[operator]
                if apart is not None and apart(i):
                    measured -= 1
                    for lb in labels:
                        before = self.px[lb].cpu()
                        status, _, _ = conns[lb].request(req)
                        if status != 200:
                            raise RuntimeError(f"{title} via {lb}: HTTP {status}")
                        after = self.px[lb].cpu()
                        set_apart[lb] = [a + (y - x) for a, x, y in zip(set_apart[lb], before, after, strict=True)]
                    continue
                k = i % len(labels)
                for lb in labels[k:] + labels[:k]:
                    status, dt, headers = conns[lb].request(req, heads.get(lb))
                    if status != 200:
                        raise RuntimeError(f"{title} via {lb}: HTTP {status}")
                    lat[lb].append(dt)
                    received = int(headers.get("x-bench-received", "-1"))
                    repaired = received != len(req.body) if method == "POST" else False
                    if repaired != (expect_repair and lb == "llmfix"):
                        mismatched[lb] += 1
            wall = time.perf_counter() - t0
        cpu1 = {lb: self.px[lb].cpu() for lb in labels}
        for c in conns.values():
            c.close()
        res: dict[str, Any] = {"title": title, "url": url, "body_bytes": size, "n": measured, "set_apart": n - measured,
                               "wall_s": wall, "by": {}}
        for lb in labels:
            spent = [c1 - c0 - a for c1, c0, a in zip(cpu1[lb], cpu0[lb], set_apart[lb], strict=True)]
            res["by"][lb] = {
                "latency_ms": {k: v * MS if k != "n" else v for k, v in summary(lat[lb]).items()},
                "cpu_ms_per_req": spent[0] / measured * MS,
                "cpu_ms_per_req_stat": spent[1] / measured * MS,
                "cpu_ms_per_req_event_loop": spent[2] / measured * MS,
                "unexpected_bodies": mismatched[lb],
            }
            if mismatched[lb]:
                what = "repaired" if not (expect_repair and lb == "llmfix") else "not repaired"
                self.notes.append(f"{title}: {mismatched[lb]} request(s) via {lb} were unexpectedly {what}")
        self.raw[key] = res
        by = res["by"]
        for metric, name, tgt in (("p50", "latency p50", target), ("p99", "latency p99", None)):
            self.rows.append(Row(f"{title} — {name}", by["bare"]["latency_ms"][metric],
                                 by["llmfix"]["latency_ms"][metric], "ms",
                                 f"≤ {target:.2f}×" if tgt else "—", "ratio" if tgt else "info", tgt,
                                 by["control"]["latency_ms"][metric] if "control" in by else None))
        self.rows.append(Row(f"{title} — proxy CPU/req", by["bare"]["cpu_ms_per_req"], by["llmfix"]["cpu_ms_per_req"],
                             "ms", f"≤ {target:.2f}×" if target else "—", "ratio" if target else "info", target,
                             by["control"]["cpu_ms_per_req"] if "control" in by else None))
        return res

    # -- SSE ----------------------------------------------------------------------------------

    def sse_cell(self) -> None:
        p = self.plan
        url = f"http://api.openai.com/v1/responses?sse={p.sse_events}&gap_ms={p.sse_gap_ms:g}"
        labels = ("bare+stream", "bare+hook", "llmfix")
        self.log(f"SSE: {p.sse_streams} streams × {len(labels)}, {p.sse_events} events {p.sse_gap_ms:g} ms apart")
        req = Req("POST", url, bodies.sse_request(), {"accept": "text/event-stream"})
        got: dict[str, dict[str, list[float]]] = {lb: {"ttfb": [], "head": [], "gaps": [], "total": []}
                                                  for lb in labels}
        for lb in labels:  # warm-up
            Conn(self.px[lb].port).stream(req)
        cpu0 = {lb: self.px[lb].cpu() for lb in labels}
        for i in range(p.sse_streams):
            k = i % len(labels)
            for lb in labels[k:] + labels[:k]:
                status, t_head, t_first, arrivals = Conn(self.px[lb].port).stream(req)
                if status != 200 or len(arrivals) != p.sse_events + 2:
                    raise RuntimeError(f"SSE via {lb}: HTTP {status}, {len(arrivals)} events "
                                       f"(expected {p.sse_events + 2})")
                got[lb]["ttfb"].append(t_first)
                got[lb]["head"].append(t_head)
                got[lb]["total"].append(arrivals[-1])
                ev = arrivals[: p.sse_events + 1]
                got[lb]["gaps"] += [b - a for a, b in itertools.pairwise(ev)]
        cpu1 = {lb: self.px[lb].cpu() for lb in labels}
        res = {lb: {k: {m: v * MS if m != "n" else v for m, v in summary(xs).items()} for k, xs in d.items()}
               for lb, d in got.items()}
        for lb in labels:
            res[lb]["cpu_ms_per_stream"] = (cpu1[lb][0] - cpu0[lb][0]) / p.sse_streams * MS
        self.raw["sse"] = {"url": url, "streams": p.sse_streams, "events": p.sse_events, "gap_ms": p.sse_gap_ms,
                           "baseline": "bare mitmdump with --set stream_large_bodies=1", "by": res}
        b, h, f = res["bare+stream"], res["bare+hook"], res["llmfix"]
        self.rows += [
            Row("SSE time to first event p50 (bare: stream_large_bodies=1)", b["ttfb"]["p50"], f["ttfb"]["p50"], "ms",
                "≤ +2 ms", "delta", 2.0),
            Row("SSE time to first event p99", b["ttfb"]["p99"], f["ttfb"]["p99"], "ms", "≤ +2 ms", "delta", 2.0),
            Row("  (same, p50, bare: a 1-line stream hook instead)", h["ttfb"]["p50"], f["ttfb"]["p50"], "ms",
                kind="delta"),
            Row(f"SSE inter-event gap p50 (sent every {p.sse_gap_ms:g} ms)", b["gaps"]["p50"], f["gaps"]["p50"], "ms"),
            Row("SSE inter-event gap p99", b["gaps"]["p99"], f["gaps"]["p99"], "ms"),
            Row("SSE proxy CPU/stream", b["cpu_ms_per_stream"], f["cpu_ms_per_stream"], "ms"),
        ]

    # -- concurrency --------------------------------------------------------------------------

    def concurrent_cell(self, small_url: str, small_body: bytes, big_url: str, big_body: bytes) -> None:
        p = self.plan
        labels = ("bare", "llmfix")
        self.log(f"concurrency: {p.conc_phases} phase(s) × {p.conc_seconds:g} s per proxy")
        lat: dict[str, list[float]] = {lb: [] for lb in labels}
        bigs: dict[str, list[float]] = {lb: [] for lb in labels}
        for phase in range(p.conc_phases):
            for lb in (labels if phase % 2 == 0 else labels[::-1]):
                port = self.px[lb].port
                stop = threading.Event()
                errors: list[BaseException] = []
                t = threading.Thread(target=_loop, args=(port, Req("POST", big_url, big_body), stop, bigs[lb], errors),
                                     daemon=True)
                t.start()
                time.sleep(0.3)
                c = Conn(port)
                small = Req("POST", small_url, small_body)
                head = small.head()
                end = time.perf_counter() + p.conc_seconds
                while time.perf_counter() < end:
                    lat[lb].append(c.request(small, head)[1])
                    time.sleep(0.002)
                c.close()
                stop.set()
                t.join(60)
                if errors:
                    raise RuntimeError(f"concurrent 10 MB loop via {lb}: {errors[0]}")
        res = {lb: {"small_latency_ms": {k: v * MS if k != "n" else v for k, v in summary(lat[lb]).items()},
                    "big_latency_ms": {k: v * MS if k != "n" else v for k, v in summary(bigs[lb]).items()}}
               for lb in labels}
        self.raw["concurrent"] = {"small_url": small_url, "big_url": big_url, "big_bytes": len(big_body), "by": res}
        b, f = res["bare"]["small_latency_ms"], res["llmfix"]["small_latency_ms"]
        self.rows += [
            Row("2 KB chat during a 10 MB repair loop — latency p50", b["p50"], f["p50"], "ms"),
            Row("2 KB chat during a 10 MB repair loop — latency p90", b["p90"], f["p90"], "ms"),
            Row("2 KB chat during a 10 MB repair loop — latency p99", b["p99"], f["p99"], "ms", "≤ +5 ms", "delta",
                5.0),
            Row("  (the concurrent 10 MB requests — latency p50)", res["bare"]["big_latency_ms"]["p50"],
                res["llmfix"]["big_latency_ms"]["p50"], "ms"),
        ]

    # -- peak RSS ------------------------------------------------------------------------------

    def rss_cell(self) -> None:
        n = self.plan.rss_requests
        labels = ("bare", "llmfix", "control")
        reset = {lb: self.px[lb].reset_peak() for lb in labels}
        if not all(reset.values()):
            self.notes.append("could not reset VmHWM (clear_refs); peak RSS includes earlier cells")
        before = {lb: self.px[lb].status() for lb in labels}
        run = uuid.uuid4().hex[:8]
        mid: dict[str, dict[str, int]] = {}

        def body(i: int) -> bytes:  # every call id new: many conversations, or a long one's newest results
            if i == n // 2 and not mid:
                mid.update({lb: self.px[lb].status() for lb in labels})
            return bodies.xai_repair(200 * 1024, call_id=f"call_rss_{run}_{i}")

        self.request_cell("rss_200k_repair", f"{n} × 200 KB image to xAI, needs repair",
                          "http://api.x.ai/v1/responses", body, n, 3, None, expect_repair=True, labels=labels)
        after = {lb: self.px[lb].status() for lb in labels}
        self.raw["rss"] = {"requests": n, "hwm_reset": reset, "before": before, "middle": mid, "after": after}
        mb = 1 / (1 << 20)
        self.rows += [
            Row(f"peak RSS (VmHWM) over {n} × 200 KB image repair requests (fresh proxies)",
                after["bare"]["VmHWM"] * mb, after["llmfix"]["VmHWM"] * mb, "MB",
                control=after["control"]["VmHWM"] * mb),
            Row(f"  RSS growth over the last {n - n // 2} of them (a leak shows here)",
                (after["bare"]["VmRSS"] - mid["bare"]["VmRSS"]) * mb,
                (after["llmfix"]["VmRSS"] - mid["llmfix"]["VmRSS"]) * mb, "MB",
                control=(after["control"]["VmRSS"] - mid["control"]["VmRSS"]) * mb),
        ]

    def rss_big_cell(self) -> None:
        """RSS held after 10 MB tool-output images with a new call id each (what restore-tool-media keeps)."""
        n = self.plan.rss_big_requests
        labels = ("bare", "llmfix", "control")
        template = bodies.codex_image_output(10 * bodies.MB)
        old = b"call_mock883ae17f536f41f8a10f_0"
        run = uuid.uuid4().hex[:6]
        before = {lb: self.px[lb].status() for lb in labels}
        self.request_cell("rss_10m_new_ids", f"{n} × 10 MB image in Codex tool output, new call id each",
                          "http://api.openai.com/v1/responses",
                          lambda i: template.replace(old, f"call_{run}_{i:019d}".encode()), n, 0, None,
                          labels=labels)
        after = {lb: self.px[lb].status() for lb in labels}
        self.raw["rss_big"] = {"requests": n, "before": before, "after": after}
        mb = 1 / (1 << 20)
        self.rows.append(Row(f"  RSS growth over {n} × 10 MB tool-output images, new call id each",
                             (after["bare"]["VmRSS"] - before["bare"]["VmRSS"]) * mb,
                             (after["llmfix"]["VmRSS"] - before["llmfix"]["VmRSS"]) * mb, "MB",
                             control=(after["control"]["VmRSS"] - before["control"]["VmRSS"]) * mb))

    # -- in-process pipeline -------------------------------------------------------------------

    def pipeline_cell(self, cases: dict[str, tuple[str, str, bytes]], repair_case: str) -> None:
        """``engine.process`` alone against one orjson.loads + orjson.dumps of the same body."""
        runs = self.plan.pipeline_runs
        self.log(f"pipeline in-process: {runs} runs per body")
        try:
            process, make = _engine(self.tmp)
        except Exception as e:  # the engine's API moved under us: say so, keep the rest of the run
            self.notes.append(f"pipeline cell skipped: cannot set up llmfix.engine: {type(e).__name__}: {e}")
            return
        res: dict[str, Any] = {}
        for name, (dialect, host, body) in cases.items():
            eng: list[float] = []
            floor: list[float] = []
            statuses: set[str] = set()
            for i in range(runs + 2):
                t0 = time.perf_counter()
                orjson.dumps(orjson.loads(body))
                t1 = time.perf_counter()
                outcome = process(make(dialect, host, body))
                t2 = time.perf_counter()
                statuses.add(outcome.status)
                if i >= 2:  # warm-up
                    floor.append(t1 - t0)
                    eng.append(t2 - t1)
            res[name] = {"bytes": len(body), "status": sorted(statuses),
                         "engine_ms": {k: v * MS if k != "n" else v for k, v in summary(eng).items()},
                         "orjson_roundtrip_ms": {k: v * MS if k != "n" else v for k, v in summary(floor).items()}}
        self.raw["pipeline"] = res
        r = res[repair_case]
        if r["status"] != ["repaired"]:
            self.notes.append(f"pipeline: the repair body came back {r['status']}, not repaired")
        self.rows.append(Row("repair pipeline alone, 10 MB (bare column: orjson loads+dumps) p50",
                             r["orjson_roundtrip_ms"]["p50"], r["engine_ms"]["p50"], "ms", "≤ 1.50×", "ratio", 1.5))
        for name, v in res.items():
            if name != repair_case:
                self.rows.append(Row(f"  engine.process alone: {name} [{'/'.join(v['status'])}] p50",
                                     v["orjson_roundtrip_ms"]["p50"], v["engine_ms"]["p50"], "ms"))

    # -- fitting one image ----------------------------------------------------------------------

    def fit_image_cell(self, png: bytes) -> None:
        """``llmfix.images.fit`` alone on a 10 MB screenshot for Anthropic's limits: thread CPU time of the first
        fit (the cache emptied before each run: decode, resize, encode) and of a next one (the cache's answer)."""
        from llmfix import images
        from llmfix.profiles import BUILTIN
        from llmfix.repairs.fit_images import rules_of

        limits = rules_of(BUILTIN["anthropic"]).limits  # type: ignore[union-attr]
        text = __import__("base64").b64encode(png).decode()
        runs = max(3, self.plan.pipeline_runs // 3)
        self.log(f"fitting one {len(png) / bodies.MB:.1f} MB screenshot in-process: {runs} runs")
        first: list[float] = []
        again: list[float] = []
        got = None
        for _ in range(runs):
            images.CACHE.clear()
            t0 = time.thread_time()
            got = images.fit(text, "image/png", limits)
            t1 = time.thread_time()
            images.fit(text, "image/png", limits)
            t2 = time.thread_time()
            first.append(t1 - t0)
            again.append(t2 - t1)
        self.raw["fitimg"] = {"bytes": len(png), "result": getattr(got, "summary", lambda: repr(got))(),
                              "first_cpu_ms": [x * MS for x in first], "again_cpu_ms": [x * MS for x in again]}
        self.rows.append(Row(f"fitting one {len(png) / bodies.MB:.0f} MB screenshot, in-process CPU p50 (bare column: "
                             "the next fit of it, from the cache)", pct(again, 50) * MS, pct(first, 50) * MS, "ms"))
        self.notes.append(f"the screenshot fitted: {self.raw['fitimg']['result']}")

    # -- event-loop stalls ----------------------------------------------------------------------

    def stall_cell(self, cases: dict[str, tuple[str, str, bytes]]) -> None:
        """The event loop's longest gap while ``engine.process`` runs in a worker thread, as the proxy runs
        large bodies. Work that holds the GIL in one C call (a JSON parse, one pydantic-core validation)
        freezes every other flow for its whole duration; pure-Python work yields every 5 ms."""
        process, make = _engine(self.tmp)
        self.log(f"event-loop stalls: {len(cases)} bodies, 3 runs each")

        async def worst_gap(req: Any) -> tuple[float, float, str]:
            task = asyncio.ensure_future(asyncio.to_thread(process, req))
            worst, started = 0.0, time.perf_counter()
            while not task.done():
                t = time.perf_counter()
                await asyncio.sleep(0.001)
                worst = max(worst, time.perf_counter() - t)
            outcome = await task
            return worst, time.perf_counter() - started, outcome.status

        res: dict[str, Any] = {}
        for name, (dialect, host, body) in cases.items():
            runs = [asyncio.run(worst_gap(make(dialect, host, body))) for _ in range(3)]
            res[name] = {"worst_gap_ms": [r[0] * MS for r in runs], "took_ms": [r[1] * MS for r in runs],
                         "status": sorted({r[2] for r in runs})}
            self.rows.append(Row(f"event loop's longest stall while a worker processes: {name} "
                                 f"[{'/'.join(res[name]['status'])}, {statistics.median(res[name]['took_ms']):.0f} ms]",
                                 None, statistics.median(res[name]["worst_gap_ms"]), "ms"))
        self.raw["stall"] = res


    # -- history-size sweep --------------------------------------------------------

    def sweep_cell(self, key: str, dialect: str, host: str, base: bytes, items: int, what: str) -> None:
        """One no-repair session through bare / llmfix / control, request by request in rotating order
        (``request_cell``); request ``i`` is the history ``base`` plus ``i + 1`` new tool round trips, as a
        client resends it. Then one row of the sweep table: CPU per request and its ratio, median latency
        and its delta, and llmfix's added CPU per MB of body."""
        n = self.plan.sweep_n[min(3, _size_class(len(base)))]
        body = bodies.session(dialect, base)
        path = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}[dialect]
        mark = len(self.rows)
        res = self.request_cell(key, f"{what}, no repair", f"http://{host}{path}", body, n, min(5, n),
                                1.10, apart=body.starts)
        del self.rows[mark:]  # request_cell's rows put a ratio target on latency too: the sweep's own follow
        by = res["by"]
        cpu = {lb: by[lb]["cpu_ms_per_req"] for lb in by}
        p50 = {lb: by[lb]["latency_ms"]["p50"] for lb in by}
        mb = len(base) / bodies.MB
        self.sweep.append({
            "key": key, "what": what, "dialect": dialect, "bytes": len(base), "items": items, "n": res["n"],
            "first_sights_apart": res["set_apart"],
            "cpu_ms": cpu, "latency_p50_ms": p50,
            "cpu_ratio": cpu["llmfix"] / cpu["bare"], "control_cpu_ratio": cpu["control"] / cpu["bare"],
            "latency_delta_ms": p50["llmfix"] - p50["bare"], "control_latency_delta_ms": p50["control"] - p50["bare"],
            "added_cpu_ms_per_mb": (cpu["llmfix"] - cpu["bare"]) / mb,
            "control_added_cpu_ms_per_mb": (cpu["control"] - cpu["bare"]) / mb,
            "unexpected_bodies": by["llmfix"]["unexpected_bodies"],
        })
        self.rows += [
            Row(f"{what}, no repair — proxy CPU/req", cpu["bare"], cpu["llmfix"], "ms", "≤ 1.10×", "ratio", 1.10,
                cpu["control"]),
            Row(f"{what}, no repair — latency p50", p50["bare"], p50["llmfix"], "ms", "≤ +1 ms", "delta", 1.0,
                p50["control"]),
        ]

    def hist_engine_cell(self, cases: dict[str, tuple[str, str, bytes, int]]) -> None:
        """``engine.process`` alone on each sweep body: CPU time of the calling thread (``time.thread_time``,
        not wall clock: the machine may be shared), p50 of ``pipeline_runs`` runs, and per MB."""
        try:
            process, make = _engine(self.tmp)
        except Exception as e:
            self.notes.append(f"hist_engine skipped: cannot set up llmfix.engine: {type(e).__name__}: {e}")
            return
        runs = self.plan.pipeline_runs
        self.log(f"history sweep in-process: {len(cases)} bodies, {runs} runs per 200 KB")
        res: dict[str, Any] = {}
        for name, (dialect, host, base, items) in cases.items():
            k = max(3, min(10 * runs, int(runs * 200 * 1024 / max(len(base), 1))))
            session = bodies.session(dialect, base)
            cpu: list[float] = []
            first: list[float] = []
            statuses: set[str] = set()
            for i in range(-1, k):  # request i extends request i - 1 (the first one: the cache's first sight)
                body = session(i)
                t0 = time.thread_time()
                outcome = process(make(dialect, host, body))
                t1 = time.thread_time()
                outcome_first = process(make(dialect, host, body), True)
                t2 = time.thread_time()
                statuses |= {outcome.status, outcome_first.status}
                if i >= 0:
                    cpu.append(t1 - t0)
                    first.append(t2 - t1)
            mb = len(base) / bodies.MB
            res[name] = {"bytes": len(base), "items": items, "runs": k, "status": sorted(statuses),
                         "engine_cpu_ms_p50": pct(cpu, 50) * MS, "engine_cpu_ms_per_mb": pct(cpu, 50) * MS / mb,
                         "first_sight_cpu_ms_p50": pct(first, 50) * MS,
                         "first_sight_cpu_ms_per_mb": pct(first, 50) * MS / mb}
            if statuses != {"untouched"}:
                self.notes.append(f"hist_engine: {name} came back {sorted(statuses)}, not untouched")
        self.raw["hist_engine"] = res
        self.hist_engine = res

    def sweep_table(self) -> str:
        if not self.sweep and not self.hist_engine:
            return ""
        out = ["| history (no repair) | bytes | items | n | proxy CPU/req bare → llmfix | ratio | control/bare "
               "| latency p50 bare → llmfix | Δ | control Δ | added CPU per MB | engine.process CPU (per MB) "
               "| first sight (per MB) |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        eng = self.hist_engine
        for r in self.sweep:
            e = eng.get(r["key"])
            ecol = (f"{e['engine_cpu_ms_p50']:.2f} ms ({e['engine_cpu_ms_per_mb']:.2f}) | "
                    f"{e['first_sight_cpu_ms_p50']:.2f} ms ({e['first_sight_cpu_ms_per_mb']:.2f})") if e else " |"
            c, p = r["cpu_ms"], r["latency_p50_ms"]
            ok = r["cpu_ratio"] <= 1.10
            out.append(f"| {r['what']} | {r['bytes']:,} | {r['items']:,} | {r['n']} | {c['bare']:.2f} → "
                       f"{c['llmfix']:.2f} ms | {'' if ok else '**'}{r['cpu_ratio']:.3f}{'' if ok else '**'} "
                       f"| {r['control_cpu_ratio']:.3f} | {p['bare']:.2f} → {p['llmfix']:.2f} ms "
                       f"| {r['latency_delta_ms']:+.2f} ms | {r['control_latency_delta_ms']:+.2f} ms "
                       f"| {r['added_cpu_ms_per_mb']:+.2f} ms | {ecol} |")
        done = {r["key"] for r in self.sweep}
        for key, e in eng.items():  # in-process only (the proxy cells did not run)
            if key not in done:
                out.append(f"| {e['what']} | {e['bytes']:,} | {e['items']:,} | {e['runs']} | | | | | | | "
                           f"| {e['engine_cpu_ms_p50']:.2f} ms ({e['engine_cpu_ms_per_mb']:.2f}) "
                           f"| {e['first_sight_cpu_ms_p50']:.2f} ms ({e['first_sight_cpu_ms_per_mb']:.2f}) |")
        return "\n".join(out)

    # -- memory store ---------------------------------------------------------------------------

    def store_cell(self) -> None:
        p = self.plan
        from llmfix.memory.sqlite import SqliteStore
        from llmfix.memory.store import ToolCall

        path = self.tmp / "store" / "bench-memory.sqlite3"
        self.log(f"memory store: {p.store_entries:,} entries, {p.store_lookups} lookups, {p.store_remembers} remembers")
        args = orjson.dumps({"command": ["rg", "-n", "handler", "src"], "workdir": "/home/dev/project"}).decode()

        def call(i: int | str) -> ToolCall:
            return ToolCall(f"call_{i}", "shell", args, "responses")

        m = SqliteStore(path, max_entries=p.store_entries)
        try:
            t0 = time.perf_counter()
            for start in range(0, p.store_entries, 1000):
                m.remember([call(i) for i in range(start, min(start + 1000, p.store_entries))])
            fill = time.perf_counter() - t0
            rng = random.Random(1)
            look: list[float] = []
            for _ in range(p.store_lookups):
                cid = f"call_{rng.randrange(p.store_entries)}"
                t = time.perf_counter()
                found = m.lookup([cid])
                look.append(time.perf_counter() - t)
                if cid not in found:
                    raise RuntimeError(f"memory store lost {cid}")
            miss: list[float] = []
            for i in range(min(1000, p.store_lookups)):
                t = time.perf_counter()
                m.lookup([f"call_absent_{i}"])
                miss.append(time.perf_counter() - t)
            rem: list[float] = []
            for i in range(p.store_remembers):
                c = call(f"new_{i}")
                t = time.perf_counter()
                m.remember([c])
                rem.append(time.perf_counter() - t)
            rows = m.count()
        finally:
            m.close()
        ms = {k: {m_: v * MS if m_ != "n" else v for m_, v in summary(xs).items()}
              for k, xs in (("lookup_hit", look), ("lookup_miss", miss), ("remember_1", rem))}
        self.raw["store"] = {"entries": p.store_entries, "rows_at_end": rows, "fill_s": fill, **ms}
        self.rows += [
            Row(f"memory store lookup of 1 id ({p.store_entries:,} rows) p50", None, ms["lookup_hit"]["p50"], "ms"),
            Row(f"memory store lookup of 1 id ({p.store_entries:,} rows) p99", None, ms["lookup_hit"]["p99"], "ms",
                "< 1 ms", "abs", 1.0),
            Row("memory store remember of 1 call p50", None, ms["remember_1"]["p50"], "ms"),
            Row("memory store remember of 1 call p99 (runs on the event loop; bench's own target)", None,
                ms["remember_1"]["p99"], "ms", "< 1 ms", "abs", 1.0),
            Row("memory store remember of 1 call max (a prune every 1000 writes)", None, ms["remember_1"]["max"], "ms"),
        ]

    # -- profiling ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def pyspy(self, name: str) -> Iterator[None]:
        """py-spy the llmfix proxy (all threads, native frames off) while the block runs."""
        exe = Path(sys.executable).parent / "py-spy"
        if name not in self.profile or not exe.exists():
            if name in self.profile:
                self.notes.append("--profile: py-spy not found in the venv (uv pip install py-spy)")
            yield
            return
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"pyspy-{name}-{time.strftime('%Y%m%d-%H%M%S')}.txt"
        proc = subprocess.Popen([str(exe), "record", "--pid", str(self.px["llmfix"].pid), "--rate", "500",
                                 "--format", "raw", "--threads", "--output", str(out)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        try:
            yield
        finally:
            proc.send_signal(2)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
            self.raw.setdefault("profiles", {})[name] = str(out)
            self.notes.append(f"py-spy profile of llmfix during '{name}': {out.relative_to(ROOT)} (this run's "
                              "llmfix numbers for that cell are perturbed by the sampling)")


def _size_class(n: int) -> int:
    """0: up to 100 KB, 1: up to 600 KB, 2: up to 3 MB, 3: larger (the sweep's request counts)."""
    return 0 if n <= 100 * 1024 else 1 if n <= 600 * 1024 else 2 if n <= 3 * bodies.MB else 3


def sweep_bodies(keys: frozenset[str] | tuple[str, ...]) -> dict[str, tuple[str, str, bytes, int, str]]:
    """The sweep cells wanted: key → (dialect, host, body, items, description), built on demand."""
    names = {"responses": "Codex-like Responses", "messages": "Claude Code-like Messages",
             "chat": "Droid/opencode-like Chat"}
    out: dict[str, tuple[str, str, bytes, int, str]] = {}
    for key in SWEEP:
        if key not in keys:
            continue
        _, what, *rest = key.split("_")
        if what in bodies.HISTORIES:
            dialect, host, build = bodies.HISTORIES[what]
            body = build(bodies.HISTORY_SIZES[rest[0]])
            label = f"{names[what]} {rest[0].upper().replace('K', ' KB').replace('M', ' MB')}"
        else:
            size = 2 * bodies.MB if what == "img2m" else 10 * bodies.MB
            dialect, host, body = "responses", "api.openai.com", bodies.history_images(size)
            label = f"Codex-like Responses {size // bodies.MB} MB, 3 images"
        obj = orjson.loads(body)
        items = len(obj.get("input") or obj.get("messages") or [])
        out[key] = (dialect, host, body, items, label)
    return out


def _loop(port: int, req: Req, stop: threading.Event, sink: list[float], errors: list[BaseException]) -> None:
    """Send ``req`` again and again on one connection until ``stop``; latencies to ``sink``."""
    c = Conn(port)
    head = req.head()
    try:
        while not stop.is_set():
            sink.append(c.request(req, head)[1])
    except Exception as e:  # reported by the caller
        errors.append(e)
    finally:
        c.close()


def _engine(tmp: Path) -> tuple[Callable[[Any], Any], Callable[[str, str, bytes], Any]]:
    """``engine.process`` with the Settings the addon builds from its default options, as ``LLMFix.configure``
    builds them (a tmp SQLite memory holding the calls, the learned quirks and the reasoning records; the media
    window of restore-tool-media), and a Request factory with a fresh flow id per call."""
    from llmfix import engine, options
    from llmfix.dialects.registry import named
    from llmfix.memory import backend
    from llmfix.memory.media_window import MediaWindow
    from llmfix.memory.recall import Recall
    from llmfix.retry.learned import LearnedQuirks

    opts = SimpleNamespace(**{name: default for name, _t, default, _h in options.OPTIONS}, confdir=str(tmp))
    max_age = options.parse_duration(opts.llmfix_memory_max_age, "llmfix_memory_max_age")
    memory = backend.open_memory(options.memory_path(opts), max_age_s=int(max_age),
                                 max_entries=opts.llmfix_memory_max_entries,
                                 timeout_s=options.parse_duration(opts.llmfix_memory_timeout, "llmfix_memory_timeout"))
    window = MediaWindow(options.parse_duration(opts.llmfix_restore_window, "llmfix_restore_window"))
    settings = dataclasses.replace(options.with_state(options.parse_settings(opts), Recall(memory.calls), window),
                                   quirks=LearnedQuirks(memory.quirks, max_age, shared=memory.shared),
                                   reasoning=memory.reasoning)

    def make(dialect: str, host: str, body: bytes, path: str | None = None) -> Any:
        """``path``: what the proxy reads from it too (Gemini's model, its countTokens), as ``engine.request``."""
        if path is not None:
            return engine.request(named(dialect), host, 443, path.split("?")[0], body, None, uuid.uuid4().hex)
        return engine.Request(named(dialect), host, 443, body, None, uuid.uuid4().hex)

    def process(req: Any, first_sight: bool = False) -> Any:
        """``first_sight``: as if llmfix had never seen an earlier request of this session (no prefix cache
        entry to extend; an llmfix without ``body/prefix.py`` always runs so)."""
        s = settings
        if first_sight and hasattr(settings, "prefix"):
            from llmfix.body.prefix import PrefixCache

            s = dataclasses.replace(settings, prefix=PrefixCache())
        try:
            return engine.process(req, s)
        finally:
            window.finish(req.flow_id)  # as the proxy's response hook does

    return process, make


# ------------------------------------------------------------------------------------------- output


def machine() -> dict[str, Any]:
    model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    from importlib.metadata import version

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "?"

    dirty = git("status", "--porcelain", "--", "addon")
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "mitmproxy": version("mitmproxy"),
        "pydantic": version("pydantic"),
        "orjson": version("orjson"),
        "kernel": platform.release(),
        "git": git("rev-parse", "--short", "HEAD") + (f" + {len(dirty.splitlines())} changed file(s) in addon/"
                                                       if dirty else ""),
        "load_before": os.getloadavg(),
    }


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "MB":
        return f"{v:.0f} MB"
    if v >= 100:
        return f"{v:.1f} {unit}"
    if v >= 1:
        return f"{v:.2f} {unit}"
    return f"{v:.3f} {unit}"


def table(rows: list[Row]) -> str:
    out = ["| cell | bare | llmfix | ratio | control/bare | target | met? |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r.ratio:.3f}" if r.ratio is not None else "—"
        if r.kind == "delta" and r.bare is not None and r.llmfix is not None:
            ratio += f" ({r.llmfix - r.bare:+.2f} ms)"
        ctl = f"{r.control / r.bare:.3f}" if r.control is not None and r.bare else ""
        met = {True: "yes", False: "**NO**", None: ""}[r.met]
        if r.met is False and r.kind == "ratio" and r.control and r.bare and r.ratio is not None and r.limit:
            noise = abs(r.control / r.bare - 1)
            if r.ratio - r.limit <= noise:
                met = "no (within noise)"
        out.append(f"| {r.cell} | {fmt(r.bare, r.unit)} | {fmt(r.llmfix, r.unit)} | {ratio} | {ctl} | {r.target} "
                   f"| {met} |")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run, < 1 min (few samples: ratios are noisy)")
    ap.add_argument("--profile", nargs="?", const="repair10m", default="", metavar="CELLS",
                    help="py-spy the llmfix proxy during these cells (comma-separated keys; default repair10m):\n"
                         + ", ".join(CELLS) + "; stacks go to bench/results/pyspy-<cell>-*.txt,\n"
                         "summarise them with bench/pyspy_top.py")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON and markdown results")
    ap.add_argument("--only", default="", metavar="CELLS",
                    help="run only these cells (comma-separated): " + ", ".join((*CELLS, *IN_PROCESS)) +
                         ";\nthe history sweep: " + ", ".join(SWEEP) + "\n(groups: sweep = all of them and "
                         "hist_engine, sweep_quick = five of them);\na team's proxy: " + ", ".join(TEAM) +
                         "\n(groups: team = all of them and team_engine; team_many, team_edit, team_first);\n"
                         "fixedcost = " + ", ".join(fixedcost.CELLS) + "\n(appending, many sessions, regenerated "
                         "last turn, first sight, Gemini CLI; its own table and targets);\n"
                         "gemini = " + ", ".join(fixedcost.GEMINI) + " (in the fixedcost table alone)")
    ap.add_argument("--addon", type=Path, default=ROOT / "addon", metavar="DIR",
                    help="the addon directory to measure (default: addon/); point it at a scratch copy\n"
                         "with a proposed change to measure it against bare mitmdump the same way")
    args = ap.parse_args(argv)
    global FIX_SCRIPT
    FIX_SCRIPT = args.addon.resolve() / "fix.py"
    sys.path.insert(0, str(args.addon.resolve()))  # the in-process cells import this llmfix
    only = frozenset(filter(None, args.only.split(",")))
    fixed_only = only == {FIXEDCOST_GROUP} or only == {GEMINI_GROUP}  # print the group's own table alone
    fixed_asked = FIXEDCOST_GROUP in only or GEMINI_GROUP in only
    if GEMINI_GROUP in only:
        only = (only - {GEMINI_GROUP}) | set(fixedcost.GEMINI)
    if FIXEDCOST_GROUP in only:
        only = (only - {FIXEDCOST_GROUP}) | set(fixedcost.CELLS)
    for group, members in GROUPS.items():
        if group in only:
            only = (only - {group}) | set(members) | {"hist_engine"}
    for group, members in TEAM_GROUPS.items():
        if group in only:
            only = (only - {group}) | set(members) | {"team_engine"}
    unknown = only - {*CELLS, *IN_PROCESS, *SWEEP, *TEAM}
    if unknown:
        ap.error(f"unknown cell(s) {sorted(unknown)}")

    def want(cell: str) -> bool:
        return not only or cell in only

    plan = QUICK if args.quick else FULL
    started = time.time()
    info = machine()
    tmp = Path(tempfile.mkdtemp(prefix="llmfix-bench-"))
    print(f"[bench] {'quick' if args.quick else 'full'} run; tmp {tmp}", file=sys.stderr)

    big = plan.big_mb * bodies.MB
    b_nonllm = bodies.non_llm()
    b_chat = bodies.chat_small()
    b_codex = bodies.codex_padded()
    b_img = bodies.image_user_message(big)
    b_codex_img = bodies.codex_image_output(big)
    b_repair = bodies.xai_repair(big)
    u_chat = "http://api.openai.com/v1/chat/completions"
    u_resp = "http://api.openai.com/v1/responses"
    u_xai = "http://api.x.ai/v1/responses"

    proxies: dict[str, Proxy] = {}
    b = Bench(plan, proxies, tmp, frozenset(filter(None, args.profile.split(","))))
    try:
        with upstream() as up_port:
            if any(want(c) for c in (*CELLS, *SWEEP, *TEAM)):
                proxies.update(start_proxies(tmp, up_port))
            if want("rss_200k_repair"):  # first: peak RSS of fresh proxies, before any 10 MB body
                b.rss_cell()
            if want("get"):
                b.request_cell("get", "GET /status (not LLM)", "http://example.com/status", None, plan.small_n, 30,
                               1.02)
            if want("nonllm"):
                b.request_cell("nonllm", "2 KB POST /upload JSON (not LLM)", "http://example.com/upload", b_nonllm,
                               plan.small_n, 30, 1.02)
            if want("chat2k"):
                b.request_cell("chat2k", "2 KB chat, no repair", u_chat, b_chat, plan.small_n, 30, 1.02)
            if want("codex200k"):
                b.request_cell("codex200k", "200 KB Codex Responses, no repair", u_resp, b_codex, plan.mid_n, 10,
                               1.02)
            if want("img10m"):
                b.request_cell("img10m", "10 MB image in user message (OpenAI), no repair", u_resp, b_img,
                               plan.big_n, 3, 1.10)
            if want("codeximg10m"):
                b.request_cell("codeximg10m", "10 MB image in Codex tool output (OpenAI), no repair", u_resp,
                               b_codex_img, plan.big_n, 3, 1.10)
            if want("repair10m"):
                b.request_cell("repair10m", "10 MB image in tool output to xAI, needs repair", u_xai, b_repair,
                               plan.big_n, 3, None, expect_repair=True)
            if want("rss_10m_new_ids"):
                b.rss_big_cell()
            if want("fit10m") or want("fit10m_next"):
                shot = bodies.screenshot()
                u_msg = "http://api.anthropic.com/v1/messages"
                if want("fit10m"):  # each request a new screenshot (other bytes, the same pixels): fitted every time
                    b.request_cell("fit10m", f"{len(shot) / bodies.MB:.0f} MB screenshot to Anthropic, fitted (a new "
                                   "one each request)", u_msg,
                                   lambda i: bodies.claude_screenshot(bodies.screenshot_variant(shot, i)),
                                   plan.fit_n, 1, None, expect_repair=True)
                if want("fit10m_next"):  # the next turns carry the same screenshot: fitted from the cache
                    b.request_cell("fit10m_next", f"{len(shot) / bodies.MB:.0f} MB screenshot to Anthropic, the next "
                                   "turn carrying it again", u_msg, bodies.claude_screenshot(shot), plan.fit_n, 2, None,
                                   expect_repair=True)
            if want("sse"):
                with b.pyspy("sse"):
                    b.sse_cell()
            if want("concurrent"):
                with b.pyspy("concurrent"):
                    b.concurrent_cell(u_chat, b_chat, u_xai, b_repair)
            sweep = sweep_bodies(tuple(c for c in SWEEP if want(c)))
            for key, (dialect, host, body, items, what) in sweep.items():
                b.sweep_cell(key, dialect, host, body, items, what)
            for key in TEAM:
                if want(key):
                    team.cell(b, key, quick=args.quick)
            b.raw["status_at_end"] = {lb: p.status() for lb, p in proxies.items()}
            for lb in proxies:
                if not proxies[lb].running:
                    b.notes.append(f"the {lb} mitmdump died during the run")
    finally:
        for p in proxies.values():
            p.stop()
    if proxies:
        llmfix_out = proxies["llmfix"].output()
        if "Traceback" in llmfix_out or "internal error" in llmfix_out:
            b.notes.append("the llmfix mitmdump logged errors; see 'llmfix_output' in the JSON")
        b.raw["llmfix_output"] = llmfix_out[-20000:]
    # in-process cells: the proxies are stopped, so nothing else competes for the CPU
    if want("pipeline"):
        b.pipeline_cell({
            "10 MB repair (xAI)": ("responses", "api.x.ai", b_repair),
            "10 MB image in user message (OpenAI)": ("responses", "api.openai.com", b_img),
            "10 MB Codex tool-output image (OpenAI)": ("responses", "api.openai.com", b_codex_img),
            "200 KB Codex (OpenAI)": ("responses", "api.openai.com", b_codex),
            "2 KB chat (OpenAI)": ("chat", "api.openai.com", b_chat),
        }, "10 MB repair (xAI)")
    if want("stall"):
        b.stall_cell({
            "10 MB repair (xAI)": ("responses", "api.x.ai", b_repair),
            "1,000,000 short chat messages (OpenAI, 30 MB)": ("chat", "api.openai.com", bodies.million_messages()),
        })
    if want("store"):
        b.store_cell()
    if want("team_engine"):
        team.engine_cell(b, tuple(k for k in TEAM if not only or k in only) or TEAM, quick=args.quick)
    if want("fitimg"):
        b.fit_image_cell(bodies.screenshot())
    if want("hist_engine"):
        engine_bodies = sweep_bodies(SWEEP if not only or not (only & set(SWEEP)) else tuple(only & set(SWEEP)))
        b.hist_engine_cell({k: (d, h, body, n) for k, (d, h, body, n, _w) in engine_bodies.items()})
        for k, (_d, _h, _b, _n, w) in engine_bodies.items():
            b.hist_engine[k]["what"] = w
    shutil.rmtree(tmp, ignore_errors=True)

    duration = time.time() - started
    mach = (f"{info['cpu']}, {info['cores']} cores (affinity {info['affinity']}), Linux {info['kernel']}, "
            f"Python {info['python']}, mitmproxy {info['mitmproxy']}, pydantic {info['pydantic']}, "
            f"orjson {info['orjson']}, llmfix git {info['git']}"
            + ("" if args.addon.resolve() == (ROOT / "addon").resolve() else f"; measured addon: {args.addon}"))
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(started))
    md = [f"## llmfix bench — {'quick' if args.quick else 'full'} run, {when}",
          "", f"Machine: {mach}; load before {', '.join(f'{x:.2f}' for x in info['load_before'])}; "
          f"run took {duration:.0f} s.", "",
          "Plain HTTP through regular-mode mitmdump on loopback, `--flow-detail 0`, `termlog_verbosity=warn`, "
          "`bench/redirect.py` (loopback redirect) in every proxy. *control* is a second bare mitmdump: "
          "control/bare is the run's noise floor, and a miss by less than that is marked *within noise*. "
          "SSE baseline: bare mitmdump with `--set stream_large_bodies=1` (it buffers SSE otherwise).", "",
          table(b.rows)]
    if sweep_md := b.sweep_table():
        md += ["", "History-size sweep: requests that need no repair, bare / llmfix / control alternating "
               "request by request. *ratio* = llmfix/bare proxy CPU per request (target ≤ 1.10), *Δ* = median "
               "latency llmfix − bare (target ≤ +1 ms), *control* columns = the second bare against bare (noise), "
               "*added CPU per MB* = (llmfix − bare) CPU per request / body MB (target: flat from 200 KB to 5 MB); "
               "last columns: `engine.process` alone in-process (thread CPU time, p50) and per MB, on the "
               "session's next turn and on a request llmfix sees first (no earlier request to extend). Each "
               "request extends the one before by one tool round trip, as a long session that grew to this size "
               "(its earlier turns are the warm-ups); every ~10 % of growth a new session starts, and its first "
               "request — llmfix's first sight, measured in the last column — is sent to every proxy but not "
               "counted (*n*: requests counted; bytes/items: the history's). Bodies under 16 KB are parsed whole "
               "every time (nothing to set apart).",
               "", sweep_md]
    if team_md := team.table(b):
        md += ["", team.HEADER, "", team_md]
    fixed_rows = fixedcost.rows(b)
    if fixed_only:  # the group's own table and targets stand alone (the sweep's rows carry the sweep's targets)
        md = [*md[:5], "", fixedcost.HEADER, "", fixedcost.table(b)]
    elif (fixed_asked or not only) and fixed_rows:
        md += ["", fixedcost.HEADER, "", fixedcost.table(b)]
    if b.notes:
        md += ["", "Notes:", *(f"- {n}" for n in b.notes)]
    missed = [r.cell for r in b.rows if r.met is False]
    if fixed_only:
        missed = [f"{r['key']} {what}" for r in fixed_rows for what, ok in (("CPU", r["cpu_met"]),
                                                                            ("latency", r["latency_met"])) if not ok]
    md += ["", f"Targets missed: {len(missed)}" + (": " + "; ".join(missed) if missed else "")]
    text = "\n".join(md)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = time.strftime("%Y%m%d-%H%M%S", time.localtime(started)) + ("-quick" if args.quick else "")
    (args.out / f"{stem}.md").write_text(text + "\n")
    (args.out / f"{stem}.json").write_text(json.dumps({
        "mode": "quick" if args.quick else "full", "started": started, "duration_s": duration, "machine": info,
        "plan": asdict(plan), "rows": [{**asdict(r), "ratio": r.ratio, "met": r.met} for r in b.rows],
        "notes": b.notes, "sweep": b.sweep, "team": b.team, "fixedcost": fixed_rows, "raw": b.raw}, indent=1,
        default=str))
    print(f"\n[bench] wrote {args.out / stem}.json and .md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
