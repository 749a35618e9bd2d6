"""``engine.process`` alone on the team workloads (``bench/workloads.py``): CPU per request, repeatable under load.

    uv run python bench/engine_cost.py team_chat_64 edit_responses_1m     # thread CPU per request, p50 / mean
    uv run python bench/engine_cost.py --cprofile /tmp/p.out team_chat_256
    uv run python bench/engine_cost.py --bare team_chat_64               # the same requests through a bare
                                                                         # parse (orjson.loads), for scale

The machine this runs on is shared, so wall clock is noise: the numbers are ``time.thread_time`` of the
calling thread. For instruction counts (repeatable to a fraction of a percent under any load), run it
under callgrind with ``--measure N`` and ``--measure 2N``, both with ``--build 2N`` (the measured bodies are
built before the first is measured: the same bodies built in both runs), and take the difference over N:

    for m in 4 8; do valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$m .venv/bin/python \\
        bench/engine_cost.py --measure $m --build 8 first_messages_1m; done
    (the "summary:" line of each output file is its total Ir; (Ir of 8 − Ir of 4) / 4 = instructions per request)

The diff of two callgrind runs moves by a few percent from run to run (the cycle collector runs when the
allocation count says, over a heap of warm-up bodies). Steadier (two runs of one tree within 0.02%): one run
under callgrind with ``--callgrind``, which reads callgrind's Ir counter (``callgrind_control -e``) before and
after the measured requests, the collector off between the reads, less what an empty pair of reads costs:

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python \
        bench/engine_cost.py --callgrind --measure 10 hist_messages_1m

Or count Python bytecodes (``--bytecodes``: ``sys.monitoring`` INSTRUCTION events during the measured requests,
deterministic, with the functions that execute most of them; it does not see C work such as a SQLite query or
a hash, nor what one bytecode costs), beside thread CPU:

    uv run python bench/engine_cost.py --bytecodes 20 --measure 10 hist_messages_1m

Instructions do not see everything: a search that mispredicts its branches (CPython's two-way substring
search) costs several times its instruction count in time; thread CPU is the other yardstick.

Each workload's warm-ups run first (for the many-session ones: every session's first request), then the
measured requests, every one checked to come back untouched.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for p in (str(ROOT / "addon"), str(ROOT), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

import workloads  # noqa: E402

TOOL = 5  # a sys.monitoring tool id of its own (0-2 and 5 are the debugger's, coverage's, profiler's, optimizer's)


def engine(tmp: Path):
    sys.path.insert(0, str(BENCH))
    import run

    return run._engine(tmp)


def measure(key: str, count: int | None, profile: cProfile.Profile | None = None, bare: bool = False,
            factory: Any = None, build: int | None = None, bytecodes: Counter[Any] | None = None,
            callgrind: bool = False) -> dict[str, float]:
    """Thread CPU of ``engine.process`` per measured request of workload ``key`` (``factory``: how to build
    the engine, default bench/run.py's ``_engine``; ``build``: how many of the measured bodies to build before
    measuring, at least the measured count)."""
    w = {**workloads.TEAM, **workloads.APPENDING}[key]()
    with tempfile.TemporaryDirectory(prefix="llmfix-engine-cost-") as tmp:
        process, make = (factory or engine)(Path(tmp))
        import orjson

        def one(body: bytes) -> str:
            if bare:
                orjson.loads(body)
                return "untouched"
            path = workloads.PATH[w.dialect] if w.dialect == "gemini" else None  # Gemini: the model is in the path
            return process(make(w.dialect, w.host, body, path) if path else make(w.dialect, w.host, body)).status

        for j in range(w.warmups):
            one(w.request(-1 - j))
        n = count if count is not None else w.n
        bodies = [w.request(i) for i in range(max(n, build or 0))]
        cpu: list[float] = []
        statuses: set[str] = set()
        if callgrind:
            gc.disable()
            empty = -_ir() + _ir()
            before = _ir()
        for i in range(n):
            body = bodies[i]
            if profile is not None:
                profile.enable()
            if bytecodes is not None:
                sys.monitoring.set_events(TOOL, sys.monitoring.events.INSTRUCTION)
            t0 = time.thread_time()
            statuses.add(one(body))
            t1 = time.thread_time()
            if bytecodes is not None:
                sys.monitoring.set_events(TOOL, 0)
            if profile is not None:
                profile.disable()
            if w.apart is None or not w.apart(i):  # a new session's first request: sent, not counted
                cpu.append(t1 - t0)
        if callgrind:
            spent = _ir() - before - empty
            gc.enable()
    if statuses != {"untouched"}:
        raise RuntimeError(f"{key}: requests came back {sorted(statuses)}, not untouched")
    got = {"n": len(cpu), "p50_ms": statistics.median(cpu) * 1e3, "mean_ms": statistics.fmean(cpu) * 1e3,
           "max_ms": max(cpu) * 1e3}
    if callgrind:
        got["ir_per_request"] = spent / n  # all n requests, a new session's first one included
    return got


def _ir() -> int:
    """Instructions callgrind has counted in this process so far (all threads)."""
    out = subprocess.run(["callgrind_control", "-e", "Ir", str(os.getpid())], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    counts = [int(m.replace(",", "")) for m in re.findall(r"^\s*Th\s+\d+\s+([\d,]+)", out, re.M)]
    if not counts:
        raise RuntimeError(f"not under callgrind? callgrind_control said: {out.strip()[:200]!r}")
    return sum(counts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("cells", nargs="+", choices=sorted({*workloads.TEAM, *workloads.APPENDING}))
    ap.add_argument("--measure", type=int, default=None, help="measured requests (default: the workload's own)")
    ap.add_argument("--cprofile", type=Path, default=None, help="write a cProfile of the measured requests here")
    ap.add_argument("--bare", action="store_true", help="orjson.loads instead of engine.process (for scale)")
    ap.add_argument("--bytecodes", type=int, default=None, metavar="TOP",
                    help="count Python bytecodes of the measured requests; show the TOP functions")
    ap.add_argument("--callgrind", action="store_true",
                    help="under callgrind: instructions per measured request (callgrind_control, see above)")
    ap.add_argument("--build", type=int, default=None, help="bodies built before measuring (callgrind: see above)")
    args = ap.parse_args(argv)
    profile = cProfile.Profile() if args.cprofile else None
    for key in args.cells:
        counts: Counter[Any] | None = None
        if args.bytecodes is not None:
            counts = Counter()
            sys.monitoring.use_tool_id(TOOL, "engine_cost")
            sys.monitoring.register_callback(TOOL, sys.monitoring.events.INSTRUCTION,
                                             lambda code, _offset, c=counts: c.update((code,)))
        got = measure(key, args.measure, profile, args.bare, build=args.build, bytecodes=counts,
                      callgrind=args.callgrind)
        print(f"{key}: n={got['n']} thread CPU p50 {got['p50_ms']:.3f} ms, mean {got['mean_ms']:.3f} ms, "
              f"max {got['max_ms']:.3f} ms", flush=True)
        if args.callgrind:
            print(f"  instructions per request (callgrind): {got['ir_per_request']:,.0f}", flush=True)
        if counts is not None:
            sys.monitoring.free_tool_id(TOOL)
            n = got["n"]
            print(f"  Python bytecodes per request: {sum(counts.values()) / n:,.0f} (thread CPU above is inflated "
                  "by the counting)")
            for code, c in counts.most_common(args.bytecodes):
                print(f"  {c / n:9,.0f}  {code.co_qualname} ({Path(code.co_filename).name}:{code.co_firstlineno})")
    if profile is not None:
        profile.dump_stats(args.cprofile)
        print(f"cProfile written to {args.cprofile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
