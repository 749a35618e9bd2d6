"""The fixed-cost group of bench/run.py (``--only fixedcost``): llmfix's cost on the requests most agent traffic is.

Requests that need no repair, each workload through bare / llmfix / control alternating request by request
(``Bench.request_cell``, checked forwarded byte-identical), with the targets of each kind printed beside it:

- *appending*: one session, each request the one before plus one tool round trip (the history sweep's cells:
  Codex Responses at 200 KB, 1 MB, 5 MB; Claude Code Messages and Droid Chat at 1 MB);
- *many*: 64 interleaved sessions of 1 MB (Chat, Responses: the team cells);
- *regenerated*: one Codex session of 1 MB whose last turn — reasoning item, call, output — comes with new ids
  and a new encrypted content on every request (``workloads.regenerated``);
- *first sight*: every request the first of a session llmfix has not seen (Codex, Chat, 1 MB);
- Gemini CLI (native Gemini API, ``bench/gemini.py``): an appending 1 MB session and its first sight.

Targets: appending, many and regenerated ≤ 1.15 × bare proxy CPU per request and ≤ bare + 2 ms median latency;
first sight ≤ 2 × bare CPU and ≤ bare + 8 ms median latency per MB of body.
"""

from __future__ import annotations

from typing import Any

import bodies

KIND = {
    "hist_responses_200k": "appending", "hist_responses_1m": "appending", "hist_responses_5m": "appending",
    "hist_messages_1m": "appending", "hist_chat_1m": "appending",
    "team_chat_64": "many", "team_responses_64": "many",
    "regen_responses_1m": "regenerated",
    "first_responses_1m": "first sight", "first_chat_1m": "first sight",
    "hist_gemini_1m": "appending", "first_gemini_1m": "first sight",
}
CELLS = tuple(KIND)
"""The group's cells, in the order the table lists them."""

WHAT = {
    "hist_responses_200k": "Codex Responses appending session, 200 KB",
    "hist_responses_1m": "Codex Responses appending session, 1 MB",
    "hist_responses_5m": "Codex Responses appending session, 5 MB",
    "hist_messages_1m": "Claude Code Messages appending session, 1 MB (breakpoint moves each turn)",
    "hist_chat_1m": "Droid Chat appending session, 1 MB",
    "team_chat_64": "64 interleaved Chat sessions of 1 MB",
    "team_responses_64": "64 interleaved Codex Responses sessions of 1 MB",
    "regen_responses_1m": "Codex Responses 1 MB, last turn (reasoning, call, output) regenerated each request",
    "first_responses_1m": "Codex Responses 1 MB, first sight",
    "first_chat_1m": "Chat 1 MB, first sight",
    "hist_gemini_1m": "Gemini CLI appending session, 1 MB (signed functionCall + functionResponse each turn)",
    "first_gemini_1m": "Gemini CLI 1 MB, first sight",
}
GEMINI = ("hist_gemini_1m", "first_gemini_1m")
"""The ``gemini`` group (``--only gemini``): the native Gemini API cells alone, printed in this group's table."""


def targets(kind: str, body_bytes: int) -> tuple[float, float]:
    """(CPU ratio limit, median latency Δ limit in ms) for a workload of this kind and body size."""
    if kind == "first sight":
        return 2.0, 8.0 * body_bytes / bodies.MB
    return 1.15, 2.0


def rows(b: Any) -> list[dict[str, Any]]:
    """The group's rows, from the sweep's and the team table's results of this run (those cells' own code ran them)."""
    got = {r["key"]: r for r in (*b.sweep, *b.team)}
    out = []
    for key in CELLS:
        r = got.get(key)
        if r is None:
            continue
        kind = KIND[key]
        cpu_max, lat_max = targets(kind, r["bytes"])
        out.append({"key": key, "kind": kind, "what": WHAT[key], "bytes": r["bytes"], "n": r["n"],
                    "cpu_ms": r["cpu_ms"], "latency_p50_ms": r["latency_p50_ms"], "cpu_ratio": r["cpu_ratio"],
                    "control_cpu_ratio": r["control_cpu_ratio"], "latency_delta_ms": r["latency_delta_ms"],
                    "control_latency_delta_ms": r["control_latency_delta_ms"], "cpu_target": cpu_max,
                    "latency_target_ms": lat_max, "cpu_met": r["cpu_ratio"] <= cpu_max,
                    "latency_met": r["latency_delta_ms"] <= lat_max,
                    "unexpected_bodies": r["unexpected_bodies"]})
    return out


HEADER = ("Fixed cost (`--only fixedcost`): requests that need no repair, bare / llmfix / control alternating "
          "request by request, every one checked forwarded byte-identical. *CPU* = proxy CPU per request "
          "(all threads, schedstat), *ratio* = llmfix/bare, *control* = the second bare against bare (the run's "
          "noise); *Δ p50* = median latency minus bare's. Targets: appending, many sessions and regenerated "
          "≤ 1.15× and ≤ +2 ms; first sight ≤ 2× and ≤ +8 ms per MB. A miss by less than the control's own "
          "distance from bare is marked *within noise*.")


def _mark(met: bool, miss: float, noise: float) -> str:
    if met:
        return "yes"
    return "no (within noise)" if miss <= noise else "**NO**"


def table(b: Any) -> str:
    rs = rows(b)
    if not rs:
        return ""
    out = ["| workload (no repair) | kind | MB | n | CPU/req bare → llmfix | ratio | control/bare | target | met? "
           "| p50 bare → llmfix | Δ p50 | control Δ | target | met? | not byte-identical |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        c, p = r["cpu_ms"], r["latency_p50_ms"]
        cpu_ok = _mark(r["cpu_met"], r["cpu_ratio"] - r["cpu_target"], abs(r["control_cpu_ratio"] - 1))
        lat_ok = _mark(r["latency_met"], r["latency_delta_ms"] - r["latency_target_ms"],
                       abs(r["control_latency_delta_ms"]))
        out.append(f"| {r['what']} | {r['kind']} | {r['bytes'] / bodies.MB:.2f} | {r['n']} "
                   f"| {c['bare']:.2f} → {c['llmfix']:.2f} ms | {r['cpu_ratio']:.3f} | {r['control_cpu_ratio']:.3f} "
                   f"| ≤ {r['cpu_target']:.2f}× | {cpu_ok} | {p['bare']:.2f} → {p['llmfix']:.2f} ms "
                   f"| {r['latency_delta_ms']:+.2f} ms | {r['control_latency_delta_ms']:+.2f} ms "
                   f"| ≤ +{r['latency_target_ms']:.1f} ms | {lat_ok} | {r['unexpected_bodies']} |")
    return "\n".join(out)
