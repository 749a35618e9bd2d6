"""Summarise a py-spy ``--format raw`` (collapsed stacks) profile: where the llmfix proxy spent its time.

    uv run python bench/pyspy_top.py bench/results/pyspy-repair10m-*.txt [--top 30] [--filter llmfix]

Prints, per thread, the total samples, then the functions with the largest inclusive share (time in
the function and what it calls) and self share. ``--filter`` keeps only frames whose text contains it
(e.g. ``llmfix`` to see only the addon's functions).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def short(frame: str) -> str:
    m = _FRAME.match(frame)
    if not m:
        return frame
    f = m.group("file")
    for marker in ("site-packages/", "addon/", "lib/python3.12/"):
        if marker in f:
            f = f.split(marker, 1)[1]
            break
    return f"{m.group('func')} ({f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--filter", default="")
    a = ap.parse_args()
    for path in a.files:
        threads: dict[str, Counter[str]] = defaultdict(Counter)
        selfs: dict[str, Counter[str]] = defaultdict(Counter)
        totals: Counter[str] = Counter()
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            frames = stack.split(";")
            thread = frames[0] if frames[0].startswith(("thread", "process")) else "?"
            if thread.startswith("process"):
                thread = frames[1] if len(frames) > 1 and frames[1].startswith("thread") else thread
            body = [short(f) for f in frames if not f.startswith(("thread", "process"))]
            main = "MainThread" in thread or ("0x" not in thread and "main" in thread.lower())
            key = "event loop" if main else thread
            totals[key] += n
            for f in set(body):
                if a.filter in f:
                    threads[key][f] += n
            if body and a.filter in body[-1]:
                selfs[key][body[-1]] += n
        grand = sum(totals.values())
        print(f"== {path.name}: {grand} samples")
        for key, total in totals.most_common():
            print(f"-- {key}: {total} samples ({total / grand:.0%} of all)")
            print("   inclusive:")
            for f, n in threads[key].most_common(a.top):
                print(f"   {n / total:6.1%}  {f}")
            print("   self:")
            for f, n in selfs[key].most_common(max(8, a.top // 3)):
                print(f"   {n / total:6.1%}  {f}")


if __name__ == "__main__":
    main()
