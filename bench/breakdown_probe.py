"""mitmproxy script for bench/breakdown.py: where a mitmdump's CPU goes, measured from outside llmfix.

Loaded into the bare and the llmfix mitmdump alike (after ``addon/fix.py`` and ``bench/redirect.py``). Once the
proxy runs, it replaces, on llmfix's addon objects (every addon whose class lives in the ``llmfix`` package),
each mitmproxy hook method with a wrapper that adds the calling thread's CPU time (``time.thread_time_ns``) to
a bucket named after the class and hook; an async hook (``LLMFix.request``) is stepped by the wrapper and each
step timed, so what it awaits (a worker thread) is not counted in it. Stream callables a hook sets are wrapped
the same way. Inside the hooks: ``engine.request``, ``engine.light``, ``engine.process`` (wherever it runs: the
event loop, asyncio's worker threads, llmfix's image workers), ``events.request_seen``,
``learn.learn_json_response`` and the addon's memory writes, by replacing the module attribute the package's
code looks up at each call. Python's garbage collections are timed through ``gc.callbacks``.

Each bucket counts its own time: a piece nested inside another (``engine.process`` inside ``LLMFix.request``
when it runs on the event loop, a collection inside anything) is taken out of the enclosing one. Buckets are
kept per thread and named with the thread's kind (``event loop``: the main thread; ``asyncio worker``;
``image worker``; ``other``).

``GET /llmfix-bench-probe`` (any host) is answered by this script with a JSON snapshot: the buckets, each
thread's total CPU (``/proc/self/task/<tid>/schedstat``) with its kind, the process's utime + stime, how many
timed regions were entered and what one costs (calibrated at start), so the bench can take differences.
Nothing of llmfix's package is changed on disk; a bare mitmdump has no llmfix addon, so only its collections
and threads are measured. ``--set breakdown_probe=gc`` (collections and threads only) or ``off`` (threads only)
leave the wrappers out, to measure what they cost.
"""

from __future__ import annotations

import gc
import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Generator
from typing import Any

import orjson
from mitmproxy import ctx, http
from mitmproxy.addonmanager import traverse
from mitmproxy.hooks import all_hooks

PATH = "/llmfix-bench-probe"
clock = time.thread_time_ns
LIFECYCLE = frozenset({"load", "configure", "running", "done"})
# module functions the package looks up at each call (``engine.process(...)``): (module, attribute, bucket)
FUNCTIONS = (
    ("llmfix.engine", "request", "engine.request"),
    ("llmfix.engine", "light", "engine.light"),
    ("llmfix.engine", "process", "engine.process"),
    ("llmfix.events", "request_seen", "events.request_seen"),
    ("llmfix.memory.learn", "learn_json_response", "learn.learn_json_response"),
)
METHODS = ("_apply", "_remember", "_note", "finished")  # LLMFix's helpers its hooks and learners call


def _kind(t: threading.Thread) -> str:
    if t is threading.main_thread():
        return "event loop"
    if t.name.startswith("asyncio"):
        return "asyncio worker"
    if t.name.startswith("llmfix-images"):
        return "image worker"
    return "other"


_REGISTRY: list[tuple[str, dict[str, list[int]], list[int]]] = []
_REGISTRY_LOCK = threading.Lock()


class _Thread(threading.local):
    """What this thread has measured: ``attributed`` (ns counted in some bucket so far: an enclosing region takes
    its change out of its own time), its buckets, the regions entered, the start of a running collection."""

    def __init__(self) -> None:
        self.attributed = 0
        self.regions = [0]
        self.gc_start = 0
        self.kind = _kind(threading.current_thread())
        self.buckets: dict[str, list[int]] = {}
        with _REGISTRY_LOCK:
            _REGISTRY.append((self.kind, self.buckets, self.regions))


_TL = _Thread()


def _add(tl: _Thread, bucket: str, t0: int, a0: int, calls: int) -> None:
    dt = clock() - t0
    own = dt - (tl.attributed - a0)
    tl.attributed = a0 + dt
    tl.regions[0] += 1
    rec = tl.buckets.get(bucket)
    if rec is None:
        rec = tl.buckets[bucket] = [0, 0]
    rec[0] += own
    rec[1] += calls


def timed(bucket: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` timed into ``bucket`` (its result, when awaitable, stepped and timed step by step)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        tl = _TL
        t0, a0 = clock(), tl.attributed
        try:
            res = fn(*args, **kwargs)
        finally:
            _add(tl, bucket, t0, a0, 1)
        if inspect.iscoroutine(res):
            return _Steps(bucket, res)
        return res

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(fn, "__name__", bucket)
    return wrapper


class _Steps:
    """An awaitable running ``coro`` step by step, each step's thread CPU into ``bucket``."""

    def __init__(self, bucket: str, coro: Any) -> None:
        self.bucket, self.coro = bucket, coro

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value, error = self.coro, None, None
        while True:
            tl = _TL
            t0, a0 = clock(), tl.attributed
            try:
                out = coro.throw(error) if error is not None else coro.send(value)
            except StopIteration as stop:
                _add(tl, self.bucket, t0, a0, 0)
                return stop.value
            except BaseException:
                _add(tl, self.bucket, t0, a0, 0)
                raise
            _add(tl, self.bucket, t0, a0, 0)
            try:
                value, error = (yield out), None
            except BaseException as e:  # thrown in by the task (a cancellation): passed on to the hook
                value, error = None, e


def _gc(phase: str, info: dict[str, Any]) -> None:
    tl = _TL
    if phase == "start":
        tl.gc_start = clock()
        return
    dt = clock() - tl.gc_start
    tl.attributed += dt
    rec = tl.buckets.get(key := f"GC gen{info.get('generation')}")
    if rec is None:
        rec = tl.buckets[key] = [0, 0]
    rec[0] += dt
    rec[1] += 1


def _calibrate(n: int = 20000) -> int:
    """ns of thread CPU one timed region adds (a wrapped no-op against the no-op), median of five tries."""
    def noop() -> None:
        return None

    wrapped = timed("probe calibration", noop)
    got = []
    for _ in range(5):
        t0 = clock()
        for _ in range(n):
            noop()
        t1 = clock()
        for _ in range(n):
            wrapped()
        t2 = clock()
        got.append(((t2 - t1) - (t1 - t0)) / n)
    for _k, buckets, _r in _REGISTRY:
        buckets.pop("probe calibration", None)
    _TL.regions[0] -= 5 * n
    return int(sorted(got)[2])


class BreakdownProbe:
    def __init__(self) -> None:
        self.installed = False
        self.wrapped: list[str] = []
        self.region_ns = 0

    def load(self, loader: Any) -> None:
        loader.add_option("breakdown_probe", str, "all", "What the probe measures: all, gc (collections and "
                          "threads only), off (threads only): to measure the probe's own cost.")

    def running(self) -> None:
        self.install()

    def install(self) -> None:
        if self.installed:
            return
        self.installed = True
        mode = ctx.options.breakdown_probe
        if mode != "off":
            gc.callbacks.append(_gc)
        if mode != "all":
            return
        hooks = set(all_hooks) - LIFECYCLE
        for addon in traverse(ctx.master.addons.chain):
            cls = type(addon)
            if not cls.__module__.startswith("llmfix."):
                continue
            for name in sorted(hooks):
                fn = getattr(addon, name, None)
                if callable(fn) and not isinstance(fn, type(sys)):
                    wrapped = timed(f"{cls.__name__}.{name}", fn)
                    if name in ("requestheaders", "responseheaders"):
                        wrapped = self._streams(cls.__name__, name, wrapped)
                    setattr(addon, name, wrapped)
                    self.wrapped.append(f"{cls.__name__}.{name}")
            for name in METHODS:
                fn = getattr(addon, name, None)
                if callable(fn) and cls.__name__ == "LLMFix":
                    setattr(addon, name, timed(f"LLMFix.{name}", fn))
                    self.wrapped.append(f"LLMFix.{name}")
        for module, attr, bucket in FUNCTIONS:
            mod = sys.modules.get(module)
            if mod is not None and callable(getattr(mod, attr, None)):
                setattr(mod, attr, timed(bucket, getattr(mod, attr)))
                self.wrapped.append(bucket)
        self.region_ns = _calibrate()

    @staticmethod
    def _streams(cls_name: str, hook: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` (a ``*headers`` hook), and the stream callable it sets on the flow, if any, timed too."""
        side = "request" if hook == "requestheaders" else "response"

        def wrapper(flow: http.HTTPFlow) -> Any:
            msg = getattr(flow, side)
            before = msg.stream if msg is not None else None
            res = fn(flow)
            msg = getattr(flow, side)
            if msg is not None and callable(msg.stream) and msg.stream is not before:
                msg.stream = timed(f"{cls_name}.{side} stream callable", msg.stream)
            return res

        return wrapper

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.request.path != PATH:
            return
        self.install()
        flow.response = http.Response.make(200, orjson.dumps(self.snapshot()), {"content-type": "application/json"})

    def snapshot(self) -> dict[str, Any]:
        buckets: dict[str, list[int]] = {}
        with _REGISTRY_LOCK:
            registry = list(_REGISTRY)
        for kind, own, _regions in registry:
            for name, (ns, calls) in dict(own).items():  # dict(): one C call, safe against another thread's insert
                rec = buckets.setdefault(f"{kind}|{name}", [0, 0])
                rec[0] += ns
                rec[1] += calls
        regions = sum(r[0] for _k, _b, r in registry)
        names = {t.native_id: t for t in threading.enumerate()}
        threads: dict[str, list[Any]] = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    ns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            t = names.get(int(tid))
            threads[tid] = [_kind(t) if t is not None else "other", t.name if t is not None else "?", ns]
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return {"buckets": buckets, "threads": threads, "regions": regions,
                "region_ns": self.region_ns, "stat_ticks": int(fields[11]) + int(fields[12]),
                "clk_tck": os.sysconf("SC_CLK_TCK"), "wrapped": self.wrapped}


addons = [BreakdownProbe()]
