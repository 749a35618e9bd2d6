"""The team-proxy cells of bench/run.py: many interleaved sessions, edited tails, first sights, and RSS after them.

Each workload (``bench/workloads.py``) goes through bare / llmfix / control request by request in rotating
order (``Bench.request_cell``), its warm-ups first (for the many-session ones: every session's first
request, llmfix's first sight of it, not measured). Targets: many sessions and edited tails ≤ 1.15× bare
proxy CPU and ≤ bare + 2 ms median latency; first sight ≤ 2× bare CPU; after the many-session cells
llmfix's resident memory ≤ bare + 160 MB (64 sessions of 1 MB), growing with the number of sessions,
not their size.
"""

from __future__ import annotations

import time
from typing import Any

import workloads

HEADER = ("A team's proxy: each workload through bare / llmfix / control alternating request by request "
          "(`bench/workloads.py`). *ratio* = llmfix/bare proxy CPU per request (target ≤ 1.15, first sight ≤ 2), "
          "*Δ* = median latency llmfix − bare (target ≤ +2 ms), *control* columns = the second bare against bare "
          "(noise); RSS: each proxy's VmRSS after the cell (target for 64 sessions of 1 MB: llmfix ≤ bare + 160 MB); "
          "last column: `engine.process` alone in-process (thread CPU p50, `bench/engine_cost.py`).")


def cell(b: Any, key: str, quick: bool = False) -> None:
    w = workloads.TEAM[key]()
    n = min(w.n, 24) if quick and w.sessions == 1 else w.n
    target = 2.0 if w.first_sight else 1.15
    url = f"http://{w.host}{workloads.PATH[w.dialect]}"
    mark = len(b.rows)
    t0 = time.perf_counter()
    res = b.request_cell(key, w.title + ", no repair", url, w.request, n, w.warmups, target, apart=w.apart)
    del b.rows[mark:]  # request_cell's rows put a ratio target on latency: this table's own follow
    by = res["by"]
    cpu = {lb: by[lb]["cpu_ms_per_req"] for lb in by}
    p50 = {lb: by[lb]["latency_ms"]["p50"] for lb in by}
    rss = {lb: b.px[lb].status().get("VmRSS", 0) / (1 << 20) for lb in ("bare", "llmfix", "control")}
    row = {"key": key, "what": w.title, "dialect": w.dialect, "sessions": w.sessions, "n": res["n"],
           "bytes": res["body_bytes"], "target": target, "cpu_ms": cpu, "latency_p50_ms": p50,
           "cpu_ratio": cpu["llmfix"] / cpu["bare"], "control_cpu_ratio": cpu["control"] / cpu["bare"],
           "latency_delta_ms": p50["llmfix"] - p50["bare"], "control_latency_delta_ms": p50["control"] - p50["bare"],
           "rss_mb_after": rss, "wall_s": time.perf_counter() - t0,
           "unexpected_bodies": by["llmfix"]["unexpected_bodies"]}
    b.team.append(row)


def engine_cell(b: Any, keys: tuple[str, ...], quick: bool = False) -> None:
    import engine_cost
    from run import _engine

    for key in keys:
        b.log(f"team in-process: {key}")
        w = workloads.TEAM[key]()
        try:
            got = engine_cost.measure(key, min(w.n, 24) if quick and w.sessions == 1 else None, factory=_engine)
        except Exception as e:  # the engine's API moved under us: say so, keep the rest of the run
            b.notes.append(f"team_engine {key} skipped: {type(e).__name__}: {e}")
            continue
        b.team_engine[key] = {**got, "what": w.title}
    b.raw["team_engine"] = b.team_engine


def table(b: Any) -> str:
    if not b.team and not b.team_engine:
        return ""
    out = ["| workload (no repair) | n | proxy CPU/req bare → llmfix | ratio | control/bare | latency p50 bare → "
           "llmfix | Δ | control Δ | RSS after: bare / llmfix / control | engine.process CPU p50 |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    done = set()
    for r in b.team:
        e = b.team_engine.get(r["key"])
        c, p, m = r["cpu_ms"], r["latency_p50_ms"], r["rss_mb_after"]
        ok = r["cpu_ratio"] <= r["target"]
        ecol = f"{e['p50_ms']:.2f} ms" if e else ""
        out.append(f"| {r['what']} | {r['n']} | {c['bare']:.2f} → {c['llmfix']:.2f} ms "
                   f"| {'' if ok else '**'}{r['cpu_ratio']:.3f}{'' if ok else '**'} | {r['control_cpu_ratio']:.3f} "
                   f"| {p['bare']:.2f} → {p['llmfix']:.2f} ms | {r['latency_delta_ms']:+.2f} ms "
                   f"| {r['control_latency_delta_ms']:+.2f} ms | {m['bare']:.0f} / {m['llmfix']:.0f} / "
                   f"{m['control']:.0f} MB | {ecol} |")
        done.add(r["key"])
    for key, e in b.team_engine.items():
        if key not in done:
            out.append(f"| {e['what']} | {e['n']} | | | | | | | | {e['p50_ms']:.2f} ms |")
    return "\n".join(out)
