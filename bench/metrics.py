"""What ``llmfix_metrics`` costs: llmfix with metrics against llmfix without, in one run on loopback.

    uv run python bench/metrics.py            # ≈2–4 min on 2 cores
    uv run python bench/metrics.py --quick    # smoke run (< 1 min; few samples, noisy ratios)

Four mitmdump processes, set up as in ``bench/run.py`` (regular mode on 127.0.0.1, ``--flow-detail 0``,
``termlog_verbosity=warn``, ``bench/redirect.py`` to the lean upstream, memory in a tmp SQLite file each):
**bare** (no llmfix), **llmfix**, **metrics** (llmfix with ``llmfix_metrics`` on a loopback port, scraped once a
second throughout by a thread of this script, harsher than Prometheus' usual 15–60 s) and **control** (a second
llmfix without metrics: ``control/llmfix`` is the run's noise floor for the ratio that matters, ``metrics/llmfix``).
Request cells alternate the four request by request in rotating order, so machine noise hits all alike:

- ``chat2k``: the 2 KB Chat request, valid for OpenAI (no repair): one request event per request;
- ``codex1m``: the Codex turn-2 capture padded to 1 MB (no repair);
- ``repair1m``: pi-ai's xAI capture with a 1 MB image in a tool output (hoist-tool-media): a request and a repair
  event per request.

Per proxy: CPU per request (all its threads, ``/proc/<pid>/task/*/schedstat``: the metrics server thread and the
scrapes included) and latency p50/p99. At the end the metrics proxy's own counts are checked against what was sent.
Writes ``bench/results/<stamp>-metrics.{md,json}``. Targets: ≤ 1.02× llmfix's CPU and median latency, or within
the run's noise (``|control/llmfix − 1|``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for p in (str(ROOT / "addon"), str(ROOT), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

import bodies  # noqa: E402
from client import Conn, Req  # noqa: E402
from run import FIX_SCRIPT, MS, REDIRECT_SCRIPT, RESULTS, Proxy, free_port, machine, summary, upstream  # noqa: E402

LABELS = ("bare", "llmfix", "metrics", "control")
TARGET = 1.02
SCRAPE_EVERY_S = 1.0


class Scraper:
    """GETs ``/metrics`` every :data:`SCRAPE_EVERY_S` on a thread until stopped; counts the scrapes."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.scrapes = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-scraper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SCRAPE_EVERY_S):
            try:
                with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as r:
                    r.read()
                self.scrapes += 1
            except OSError as e:
                self.errors.append(str(e))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


def metric(url: str, name: str) -> float:
    """The sum of every ``name`` sample of a scrape."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


def cell(px: dict[str, Proxy], title: str, url: str, body: bytes, n: int, warmup: int,
         repaired: bool) -> dict[str, Any]:
    print(f"[bench] {title}: {n} × {len(LABELS)} requests of {len(body):,} B", file=sys.stderr, flush=True)
    req = Req("POST", url, body)
    conns = {lb: Conn(px[lb].port) for lb in LABELS}
    head = req.head()
    for lb in LABELS:
        for _ in range(warmup):
            if conns[lb].request(req, head)[0] != 200:
                raise RuntimeError(f"{title} via {lb}: warm-up failed")
    lat: dict[str, list[float]] = {lb: [] for lb in LABELS}
    wrong = dict.fromkeys(LABELS, 0)
    cpu0 = {lb: px[lb].cpu()[0] for lb in LABELS}
    for i in range(n):
        k = i % len(LABELS)
        for lb in LABELS[k:] + LABELS[:k]:
            status, dt, headers = conns[lb].request(req, head)
            if status != 200:
                raise RuntimeError(f"{title} via {lb}: HTTP {status}")
            lat[lb].append(dt)
            changed = int(headers.get("x-bench-received", "-1")) != len(body)
            wrong[lb] += changed != (repaired and lb != "bare")
    cpu = {lb: (px[lb].cpu()[0] - cpu0[lb]) / n * MS for lb in LABELS}
    for c in conns.values():
        c.close()
    return {"title": title, "bytes": len(body), "n": n, "warmup": warmup, "cpu_ms": cpu,
            "latency_ms": {lb: {k: v * MS if k != "n" else v for k, v in summary(lat[lb]).items()} for lb in LABELS},
            "unexpected_bodies": wrong}


def rows(res: dict[str, Any]) -> list[str]:
    out = []
    for what, get in (("proxy CPU/req", lambda lb: res["cpu_ms"][lb]),
                      ("latency p50", lambda lb: res["latency_ms"][lb]["p50"]),
                      ("latency p99", lambda lb: res["latency_ms"][lb]["p99"])):
        v = {lb: get(lb) for lb in LABELS}
        ratio, noise = v["metrics"] / v["llmfix"], v["control"] / v["llmfix"]
        met = "yes" if ratio <= TARGET else ("within noise" if ratio - TARGET <= abs(noise - 1) else "**no**")
        if what == "latency p99":
            met = ""  # a tail on a shared machine: shown, not judged
        out.append(f"| {res['title']} — {what} | {v['bare']:.3f} ms | {v['llmfix']:.3f} ms | {v['metrics']:.3f} ms "
                   f"| {ratio:.3f} | {noise:.3f} | {v['llmfix'] / v['bare']:.3f} | {met} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples (< 1 min)")
    args = ap.parse_args(argv)
    n_small, n_big, warmup = (200, 40, 5) if args.quick else (1000, 200, 20)
    started = time.time()
    info = machine()
    tmp = Path(tempfile.mkdtemp(prefix="llmfix-bench-metrics-"))
    cells = [("2 KB chat, no repair", "http://api.openai.com/v1/chat/completions", bodies.chat_small(), n_small,
              False),
             ("1 MB Codex Responses, no repair", "http://api.openai.com/v1/responses",
              bodies.codex_padded(1024 * 1024), n_big, False),
             ("1 MB image in an xAI tool output, repaired", "http://api.x.ai/v1/responses",
              bodies.xai_repair(1024 * 1024), n_big, True)]
    results, notes = [], []
    px: dict[str, Proxy] = {}
    scraper = None
    try:
        with upstream() as port:
            common = {"flow_detail": "0", "termlog_verbosity": "warn", "bench_upstream": f"127.0.0.1:{port}"}
            metrics_url = f"http://127.0.0.1:{free_port()}"
            for lb in LABELS:
                scripts = [REDIRECT_SCRIPT] if lb == "bare" else [FIX_SCRIPT, REDIRECT_SCRIPT]
                opts = dict(common) if lb == "bare" else {**common, "llmfix_memory": str(tmp / lb / "m.sqlite3")}
                if lb == "metrics":
                    opts["llmfix_metrics"] = metrics_url.removeprefix("http://")
                px[lb] = Proxy(lb, scripts, opts, tmp / lb)
            scraper = Scraper(metrics_url)
            for title, url, body, n, repaired in cells:
                results.append(cell(px, title, url, body, n, warmup, repaired))
            scraper.stop()
            sent = sum(r["n"] + r["warmup"] for r in results)
            counted = metric(metrics_url, "llmfix_requests_total")
            if counted != sent:
                notes.append(f"the metrics proxy counted {counted:.0f} requests, {sent} were sent")
            notes.append(f"{scraper.scrapes} scrapes of /metrics during the cells"
                         + (f", {len(scraper.errors)} failed: {scraper.errors[0]}" if scraper.errors else ""))
    finally:
        if scraper is not None:
            scraper.stop()
        for p in px.values():
            p.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    for r in results:
        for lb, k in r["unexpected_bodies"].items():
            if k:
                notes.append(f"{r['title']}: {k} request(s) via {lb} were unexpectedly (not) repaired")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(started))
    md = [f"## llmfix_metrics bench — {'quick' if args.quick else 'full'} run, {when}", "",
          f"Machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}, mitmproxy {info['mitmproxy']}, "
          f"llmfix git {info['git']}; load before {', '.join(f'{x:.2f}' for x in info['load_before'])}; "
          f"run took {time.time() - started:.0f} s.", "",
          "| cell | bare | llmfix | llmfix + metrics | metrics/llmfix | control/llmfix (noise) | llmfix/bare "
          f"| ≤ {TARGET}×? |", "|---|---|---|---|---|---|---|---|",
          *(row for r in results for row in rows(r)), "", *(f"- {n}" for n in notes)]
    text = "\n".join(md)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = time.strftime("%Y%m%d-%H%M%S", time.localtime(started)) + ("-quick" if args.quick else "") + "-metrics"
    (RESULTS / f"{stem}.md").write_text(text + "\n")
    (RESULTS / f"{stem}.json").write_text(json.dumps({"machine": info, "results": results, "notes": notes},
                                                     indent=1, default=str))
    print(f"\n[bench] wrote {RESULTS / stem}.md and .json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
