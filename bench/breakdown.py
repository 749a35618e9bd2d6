"""Where llmfix's added proxy CPU per request goes, against bare mitmdump, on one no-repair workload.

    uv run python bench/breakdown.py regen_responses_1m           # a fixedcost cell (bench/fixedcost.py)
    uv run python bench/breakdown.py hist_messages_1m -n 120      # more requests than the cell's own
    uv run python bench/breakdown.py team_chat_64 --quick         # smoke run (few requests: noisy)

Four mitmdumps set up as bench/run.py sets them up (regular mode on loopback, ``bench/redirect.py``, the lean
upstream), alternating request by request in rotating order: **bare** and **llmfix**, both also loading
``bench/breakdown_probe.py``, which times llmfix's hooks, its engine calls, the garbage collector and every
thread's CPU from inside the process (see its docstring), and **llmfix (no probe)** and **bare (no probe)**, whose
CPU against the probed ones' is what the probe itself costs each. The probe's snapshots (``GET
/llmfix-bench-probe``) are taken before and after the measured requests, and around the requests set apart (an
appending session's first sight, as in run.py), so only measured requests count.

Prints one table: per request, ms of thread CPU for each part, bare and llmfix and the difference, grouped by
thread (event loop, asyncio workers, llmfix's image workers, others), each group's *unattributed* rest (on the
event loop: mitmproxy itself), the probe's overhead (estimated and measured), median latencies and the
byte-identical check. Writes ``bench/results/<stamp>-breakdown-<cell>.{md,json}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for p in (str(ROOT / "addon"), str(ROOT), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

import bodies  # noqa: E402
import fixedcost  # noqa: E402
import orjson  # noqa: E402
import run  # noqa: E402
import workloads  # noqa: E402
from client import Conn, Req  # noqa: E402

PROBE = BENCH / "breakdown_probe.py"
PROBED = ("bare", "llmfix")
PLAIN = "llmfix, no probe"
PLAIN_BARE = "bare, no probe"
UNPROBED = (PLAIN, PLAIN_BARE)
LABELS = (*PROBED, *UNPROBED)
KINDS = ("event loop", "asyncio worker", "image worker", "other")
MS = 1e6  # ns per ms


@dataclass
class Load:
    key: str
    title: str
    url: str
    request: Callable[[int], bytes]
    warmups: int
    n: int
    apart: Callable[[int], bool] | None


def load(key: str, quick: bool, n: int | None) -> Load:
    """The workload of cell ``key``: a history-sweep session (``hist_*``) or a team workload."""
    if key in run.SWEEP:
        dialect, host, base, _items, what = run.sweep_bodies((key,))[key]
        session = bodies.session(dialect, base)
        plan = run.QUICK if quick else run.FULL
        count = n or plan.sweep_n[min(3, run._size_class(len(base)))]
        return Load(key, f"{what}, appending session", f"http://{host}{workloads.PATH[dialect]}", session,
                    min(5, count), count, session.starts)
    w = workloads.TEAM[key]()
    count = n or (min(w.n, 24) if quick and w.sessions == 1 else w.n)
    return Load(key, w.title, f"http://{w.host}{workloads.PATH[w.dialect]}", w.request, w.warmups, count, w.apart)


def start(tmp: Path, upstream_port: int, fix: Path) -> dict[str, run.Proxy]:
    common = {"flow_detail": "0", "termlog_verbosity": "warn", "bench_upstream": f"127.0.0.1:{upstream_port}"}
    specs = {
        "bare": ([run.REDIRECT_SCRIPT, PROBE], common),
        "llmfix": ([fix, run.REDIRECT_SCRIPT, PROBE],
                   {**common, "llmfix_memory": str(tmp / "llmfix" / "llmfix-memory.sqlite3")}),
        PLAIN: ([fix, run.REDIRECT_SCRIPT],
                {**common, "llmfix_memory": str(tmp / "llmfix_no_probe" / "llmfix-memory.sqlite3")}),
        PLAIN_BARE: ([run.REDIRECT_SCRIPT], common),
    }

    def one(label: str) -> run.Proxy:
        scripts, options = specs[label]
        return run.Proxy(label, scripts, options, tmp / label.replace(", ", "_").replace(" ", "_"))

    with ThreadPoolExecutor(len(specs)) as pool:
        futures = {label: pool.submit(one, label) for label in specs}
        return {label: f.result() for label, f in futures.items()}


def snapshot(conn: Conn) -> dict[str, Any]:
    """The probe's counters, through the proxy itself (the probe answers this path; nothing goes upstream)."""
    conn.send(Req("GET", "http://llmfix-bench-probe.invalid" + "/llmfix-bench-probe"))
    status, headers = conn._read_head()
    body = conn._read_body(headers)
    if status != 200:
        raise RuntimeError(f"probe snapshot: HTTP {status}")
    return orjson.loads(body)


class Account:
    """The probed proxies' counters summed over the measured segments, and the unprobed proxies' CPU."""

    def __init__(self) -> None:
        self.buckets: dict[str, dict[str, list[int]]] = {lb: defaultdict(lambda: [0, 0]) for lb in PROBED}
        self.kinds: dict[str, dict[str, int]] = {lb: defaultdict(int) for lb in PROBED}
        self.regions = {lb: 0 for lb in PROBED}
        self.ticks = {lb: 0 for lb in PROBED}
        self.lost_threads = {lb: 0 for lb in PROBED}
        self.plain_ns = {lb: 0 for lb in UNPROBED}
        self.outside_ns = {lb: 0 for lb in PROBED}
        self.segments = 0

    def add(self, before: dict[str, Any], after: dict[str, Any]) -> None:
        self.segments += 1
        for lb in PROBED:
            b, a = before[lb], after[lb]
            for key, (ns, calls) in a["buckets"].items():
                ns0, calls0 = b["buckets"].get(key, (0, 0))
                rec = self.buckets[lb][key]
                rec[0] += ns - ns0
                rec[1] += calls - calls0
            for tid, (kind, _name, ns) in a["threads"].items():
                self.kinds[lb][kind] += ns - (b["threads"].get(tid, (kind, "", 0))[2])
            self.lost_threads[lb] += len(set(b["threads"]) - set(a["threads"]))
            self.regions[lb] += a["regions"] - b["regions"]
            self.ticks[lb] += a["stat_ticks"] - b["stat_ticks"]
        for lb in UNPROBED:
            self.plain_ns[lb] += int((after[lb] - before[lb]) * 1e9)
        for lb in PROBED:  # the same from outside, after the snapshot's answer (a cross-check of the inside read)
            self.outside_ns[lb] += int((after["outside"][lb] - before["outside"][lb]) * 1e9)


def measure(w: Load, px: dict[str, run.Proxy], log: Callable[[str], None]) -> dict[str, Any]:
    conns = {lb: Conn(px[lb].port) for lb in LABELS}
    probes = {lb: Conn(px[lb].port) for lb in PROBED}
    size = len(w.request(0))
    log(f"{w.title}: {w.warmups} warm-ups, then {w.n} × {len(LABELS)} requests of {size:,} B")
    for lb in LABELS:
        for i in range(w.warmups):
            status, _, _ = conns[lb].request(Req("POST", w.url, w.request(-1 - i)))
            if status != 200:
                raise RuntimeError(f"{w.key} via {lb}: HTTP {status}")

    def mark() -> dict[str, Any]:
        got: dict[str, Any] = {lb: snapshot(probes[lb]) for lb in PROBED}
        for lb in UNPROBED:
            got[lb] = px[lb].cpu()[0]
        got["outside"] = {lb: px[lb].cpu()[0] for lb in PROBED}
        return got

    acc = Account()
    lat: dict[str, list[float]] = {lb: [] for lb in LABELS}
    changed = {lb: 0 for lb in LABELS}
    unchecked = {lb: 0 for lb in LABELS}
    measured = 0
    begin = mark()
    t0 = time.perf_counter()
    for i in range(w.n):
        req = Req("POST", w.url, w.request(i))
        if w.apart is not None and w.apart(i):  # a new session's first sight: sent, not counted
            acc.add(begin, mark())
            for lb in LABELS:
                conns[lb].request(req)
            begin = mark()
            continue
        measured += 1
        k = i % len(LABELS)
        for lb in LABELS[k:] + LABELS[:k]:
            status, dt, headers = conns[lb].request(req)
            if status != 200:
                raise RuntimeError(f"{w.key} via {lb}: HTTP {status}")
            lat[lb].append(dt)
            received = headers.get("x-bench-received")  # an SSE answer carries no count: unchecked
            if received is None:
                unchecked[lb] += 1
            elif int(received) != len(req.body):
                changed[lb] += 1
    acc.add(begin, mark())
    wall = time.perf_counter() - t0
    # what one snapshot costs the proxy (its GET through mitmproxy, the probe's reads): between two snapshots
    # read inside, one whole snapshot lies in a segment; taken out of the event loop's unattributed time
    snaps = {lb: [snapshot(probes[lb]) for _ in range(6)] for lb in PROBED}
    snap_ns = {lb: statistics.median(sum(t[2] for t in b["threads"].values()) - sum(t[2] for t in a["threads"].values())
                                     for a, b in itertools.pairwise(snaps[lb])) for lb in PROBED}
    for lb in PROBED:  # and its hook calls (llmfix's hooks see the snapshot's GET too): out of the buckets
        first_snap, last_snap = snaps[lb][0]["buckets"], snaps[lb][-1]["buckets"]
        for key, (ns, calls) in last_snap.items():
            ns0, calls0 = first_snap.get(key, (0, 0))
            if key in acc.buckets[lb] and calls > calls0 and not key.split("|", 1)[1].startswith("GC"):
                rec = acc.buckets[lb][key]
                rec[0] -= round((ns - ns0) / (len(snaps[lb]) - 1) * acc.segments)
                rec[1] -= round((calls - calls0) / (len(snaps[lb]) - 1) * acc.segments)
    for c in (*conns.values(), *probes.values()):
        c.close()
    first = begin["llmfix"]
    return {"key": w.key, "title": w.title, "bytes": size, "n": measured, "wall_s": wall,
            "buckets": {lb: dict(acc.buckets[lb]) for lb in PROBED},
            "threads_by_kind": {lb: dict(acc.kinds[lb]) for lb in PROBED},
            "regions": acc.regions, "region_ns": {lb: begin[lb]["region_ns"] for lb in PROBED},
            "stat_ticks": acc.ticks, "clk_tck": first["clk_tck"], "lost_threads": acc.lost_threads,
            "plain_ns": acc.plain_ns, "outside_ns": acc.outside_ns, "segments": acc.segments,
            "snapshot_ns": snap_ns, "wrapped": first["wrapped"],
            "latency_p50_ms": {lb: statistics.median(lat[lb]) * 1e3 for lb in LABELS},
            "not_byte_identical": changed, "unchecked": unchecked}


def table(res: dict[str, Any]) -> str:
    n = res["n"]

    def ms(ns: float) -> float:
        return ns / n / MS

    own: dict[str, dict[tuple[str, str], float]] = {}
    calls: dict[tuple[str, str], float] = {}
    for lb in PROBED:
        own[lb] = {}
        for key, (ns, c) in res["buckets"][lb].items():
            kind, name = key.split("|", 1)
            own[lb][(kind, name)] = ms(ns)
            if lb == "llmfix":
                calls[(kind, name)] = c / n
    totals = {lb: {k: ms(res["threads_by_kind"][lb].get(k, 0)) for k in KINDS} for lb in PROBED}
    for lb in PROBED:  # the snapshots' own cost (one per segment), measured after the run
        totals[lb]["event loop"] -= ms(res["segments"] * res["snapshot_ns"][lb])
    out = ["| part (thread CPU per request) | bare | llmfix | llmfix − bare | calls/req (llmfix) |",
           "|---|---|---|---|---|"]

    def line(name: str, b: float, f: float, c: str = "") -> None:
        out.append(f"| {name} | {b:.3f} ms | {f:.3f} ms | {f - b:+.3f} ms | {c} |")

    all_b = sum(totals["bare"].values())
    all_f = sum(totals["llmfix"].values())
    line("**proxy CPU, all threads** (schedstat)", all_b, all_f)
    for kind in KINDS:
        names = sorted({nm for lb in PROBED for (k, nm) in own[lb] if k == kind},
                       key=lambda nm: -own["llmfix"].get((kind, nm), 0.0))
        if totals["bare"][kind] == 0 and totals["llmfix"][kind] == 0 and kind in ("image worker", "other"):
            continue  # no such thread ran during the measured requests
        line(f"**{kind} thread{'s' if kind != 'event loop' else ''}**", totals["bare"][kind], totals["llmfix"][kind])
        for nm in names:
            c = calls.get((kind, nm))
            if not own["bare"].get((kind, nm)) and not own["llmfix"].get((kind, nm)):
                continue  # there, but not during the measured requests (e.g. the warm-ups' first sight)
            line(f"&nbsp;&nbsp;{nm}", own["bare"].get((kind, nm), 0.0), own["llmfix"].get((kind, nm), 0.0),
                 f"{c:.2f}" if c is not None else "")
        rest = {lb: totals[lb][kind] - sum(v for (k, _nm), v in own[lb].items() if k == kind) for lb in PROBED}
        what = {"event loop": "mitmproxy itself: sockets, HTTP, hook dispatch, asyncio",
                "asyncio worker": "thread hand-off, executor",
                "image worker": "thread hand-off", "other": ""}[kind]
        line(f"&nbsp;&nbsp;*unattributed*{f' ({what})' if what else ''}", rest["bare"], rest["llmfix"])
    code = sum(v for (_k, nm), v in own["llmfix"].items() if not nm.startswith("GC"))
    gc_d = sum(own[lb].get(key, 0.0) * (1 if lb == "llmfix" else -1) for lb in PROBED for key in own[lb]
               if key[1].startswith("GC"))
    rest_d = (all_f - all_b) - code - gc_d
    out += [f"| **in short, llmfix − bare: llmfix's own code** (hooks, engine, learners; every thread) | | "
            f"{code:.3f} ms | {code:+.3f} ms | |",
            f"| **in short: garbage collection** | | | {gc_d:+.3f} ms | |",
            f"| **in short: the rest** (mitmproxy's own work for the llmfix flow, thread hand-offs, the probe, "
            f"noise) | | | {rest_d:+.3f} ms | |"]
    est = {lb: res["regions"][lb] * res["region_ns"][lb] / n / MS for lb in PROBED}
    plain = {lb: res["plain_ns"][lb] / n / MS for lb in UNPROBED}
    over = {"bare": all_b - plain[PLAIN_BARE], "llmfix": all_f - plain[PLAIN]}

    def cols(*vals: str) -> str:
        return "| " + " | ".join(vals) + " |"

    out += ["", cols("probe and checks", "bare", "llmfix", "llmfix, no probe", "bare, no probe"),
            "|---|---|---|---|---|",
            cols("proxy CPU per request (probed: the snapshots' own cost taken out)", f"{all_b:.3f} ms",
                 f"{all_f:.3f} ms", f"{plain[PLAIN]:.3f} ms", f"{plain[PLAIN_BARE]:.3f} ms"),
            cols("the same read from outside (schedstat after each snapshot; snapshots in)",
                 *(f"{res['outside_ns'][lb] / n / MS:.3f} ms" for lb in PROBED), "", ""),
            cols(f"one probe snapshot (its GET through the proxy; {res['segments']} taken out)",
                 *(f"{res['snapshot_ns'][lb] / MS:.3f} ms" for lb in PROBED), "", ""),
            cols(f"probe overhead, estimated: timed regions/req × {res['region_ns']['llmfix']} ns",
                 *(f"{est[lb]:.3f} ms ({res['regions'][lb] / n:.1f}/req)" for lb in PROBED), "", ""),
            cols("probe overhead, measured: probed − no probe (as noisy as the run)",
                 *(f"{over[lb]:+.3f} ms" for lb in PROBED), "", ""),
            cols("llmfix − bare, without the probe (compare the table's total)", "",
                 f"{plain[PLAIN] - plain[PLAIN_BARE]:+.3f} ms", "", ""),
            cols("cross-check: utime+stime per request (10 ms ticks)",
                 *(f"{res['stat_ticks'][lb] / res['clk_tck'] * 1e3 / n:.2f} ms" for lb in PROBED), "", ""),
            cols("median latency", *(f"{res['latency_p50_ms'][lb]:.2f} ms" for lb in LABELS)),
            cols("requests not forwarded byte-identical"
                 + (" (SSE answers carry no count: unchecked)" if any(res["unchecked"].values()) else ""),
                 *(f"{res['not_byte_identical'][lb]}" + (f" ({res['unchecked'][lb]} unchecked)"
                                                        if res["unchecked"][lb] else "") for lb in LABELS))]
    if any(res["lost_threads"].values()):
        out.append(f"\nThreads that ended during the run (their CPU since the last snapshot is missing): "
                   f"{res['lost_threads']}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    cells = sorted({*fixedcost.CELLS, *run.SWEEP, *workloads.TEAM})
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("cell", choices=cells, metavar="CELL", help="one of: " + ", ".join(cells))
    ap.add_argument("-n", type=int, default=None, help="measured requests per proxy (default: the cell's own)")
    ap.add_argument("--quick", action="store_true", help="smoke run: the cell's quick request count")
    ap.add_argument("--out", type=Path, default=run.RESULTS, help="where to write the markdown and JSON")
    ap.add_argument("--sse", type=int, default=0, metavar="EVENTS",
                    help="the upstream answers a Responses-style SSE stream of this many events (no gap) instead of "
                         "small JSON: llmfix's stream callable and learner get work (bare buffers the stream)")
    ap.add_argument("--addon", type=Path, default=ROOT / "addon", metavar="DIR", help="the addon directory to measure")
    args = ap.parse_args(argv)
    w = load(args.cell, args.quick, args.n)
    if args.sse:
        w.url += f"?sse={args.sse}&gap_ms=0"
        w.title += f", answered by a {args.sse}-event SSE stream"

    def log(msg: str) -> None:
        print(f"[breakdown {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    started = time.time()
    info = run.machine()
    tmp = Path(tempfile.mkdtemp(prefix="llmfix-breakdown-"))
    px: dict[str, run.Proxy] = {}
    try:
        with run.upstream() as port:
            px.update(start(tmp, port, args.addon.resolve() / "fix.py"))
            res = measure(w, px, log)
    finally:
        for p in px.values():
            p.stop()
    errors = [lb for lb, p in px.items() if "Traceback" in p.output()]
    shutil.rmtree(tmp, ignore_errors=True)
    res["machine"] = info
    mb = res["bytes"] / bodies.MB
    md = [f"## llmfix breakdown — {w.title} ({args.cell}), {time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}",
          "", f"{res['n']} measured requests of {mb:.2f} MB per proxy, bare / llmfix / llmfix and bare "
          f"without probe alternating; {info['cpu']}, {info['cores']} cores, load before "
          f"{', '.join(f'{x:.2f}' for x in info['load_before'])}; llmfix git {info['git']}; run took "
          f"{time.time() - started:.0f} s.", "",
          "Thread CPU time per request. Each named part counts its own time only (what nested parts and garbage "
          "collections inside it took is theirs); *unattributed* = the threads' CPU (schedstat) minus every part "
          "measured in them. The probe's own cost lands in the parts (a few µs per call) and in *unattributed*; "
          "its estimate and the measured difference to the same proxies without probe are below (the part of it "
          "common to both — mitmproxy dispatching every event to one more script — cancels in llmfix − bare).", "",
          table(res)]
    if errors:
        md += ["", f"Tracebacks in the mitmdump output of: {', '.join(errors)} (see the JSON)"]
        res["outputs"] = {lb: px[lb].output()[-8000:] for lb in errors}
    text = "\n".join(md)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = time.strftime("%Y%m%d-%H%M%S", time.localtime(started)) + f"-breakdown-{args.cell}"
    (args.out / f"{stem}.md").write_text(text + "\n")
    (args.out / f"{stem}.json").write_text(json.dumps(res, indent=1, default=str))
    log(f"wrote {args.out / stem}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
