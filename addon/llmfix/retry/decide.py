"""What a known rejection teaches and what to resend, whatever carried the request (HTTP, a WebSocket).

The transport (``retry/addon.py`` for HTTP) finds a known rejection (:func:`llmfix.retry.rejections.match`)
and hands :func:`decide` the request as the client sent it and as llmfix sent it; :func:`decide` works out,
without sending anything, which learned flags would have avoided it (judged against what is learned now:
another request may have taught a flag since this one left) and the repaired body to resend, or why there is
none. A rule with ``facts`` (a rejection only the upstream can judge, such as a thinking block's signature)
teaches :class:`~llmfix.memory.store.Reasoning` records about the body it rejected instead: the repair is tried
with them (:class:`Overlay`), and they are noted in the reasoning memory when the resend goes out, so the next
request is repaired up front. The transport sends it, then :func:`settle` says what the answer means for what
was learned (a resend rejected the same way did not help: its new flags are dropped again).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from llmfix import engine, offload
from llmfix.body.conversation import BadBody
from llmfix.dialects.base import Dialect
from llmfix.memory.store import Quirk, Reasoning, ReasoningStore, upstream_id
from llmfix.report.redact import redact_text
from llmfix.retry import rejections

EXCERPT = 200
Flags = tuple[tuple[str, bool], ...]


class Fixed:
    """A quirks view giving one request exactly these flags (to try a repair before learning it)."""

    def __init__(self, flags: Flags) -> None:
        self._flags = flags

    def flags(self, host: str, port: int | None, dialect: str) -> Flags:
        return self._flags


class Overlay:
    """A reasoning memory that also knows ``records`` (what a rejection taught), ahead of ``base`` (may be None)."""

    def __init__(self, base: ReasoningStore | None, records: Iterable[Reasoning]) -> None:
        self.base = base
        self.records = {(r.kind, r.key): r for r in records}

    def note(self, records: Iterable[Reasoning]) -> int:
        return self.base.note(records) if self.base is not None else 0

    def recall(self, kind: str, keys: Iterable[str]) -> dict[str, Reasoning]:
        keys = list(keys)
        found = self.base.recall(kind, keys) if self.base is not None else {}
        found.update({k: self.records[kind, k] for k in keys if (kind, k) in self.records})
        return found

    def close(self) -> None:
        """Nothing of its own."""


def merge(*groups: Flags) -> Flags:
    merged: dict[str, bool] = {}
    for group in groups:
        merged.update(group)
    return tuple(sorted(merged.items()))


@dataclass
class Decision:
    """What to do about one rejection: ``outcome`` is the repaired request to resend (None: nothing to resend,
    ``why`` says why); ``event`` is the record the transport logs (status, rule, redacted excerpt, learned)."""

    found: rejections.Match
    dialect: Dialect
    host: str
    port: int
    event: dict[str, Any]
    outcome: engine.Outcome | None = None
    why: str = ""
    known: list[tuple[str, bool]] = field(default_factory=list)
    useful: list[tuple[str, bool]] = field(default_factory=list)
    new: list[bool] = field(default_factory=list)
    facts: list[Reasoning] = field(default_factory=list)  # what a ``facts`` rule taught about the rejected body

    @property
    def reason(self) -> str:
        return f"{self.event['status']} {self.found.rule.name}: {self.event['error']}"


Run = Callable[[engine.Request, engine.Settings], Awaitable[engine.Outcome]]
"""How the transport runs ``engine.process`` (``LLMFix.run``: in a worker thread where it must be, a deferred
image converted off the event loop): the decision's trial repairs run exactly as the request's own did."""


async def in_a_thread(req: engine.Request, settings: engine.Settings) -> engine.Outcome:
    """The runner where no transport gives one (tests, offline): always in a worker thread, never on a loop, and
    image work on llmfix's image workers."""
    return await offload.process(req, settings, offload=True)


async def _body(run: Run, req: engine.Request, settings: engine.Settings, flags: Flags) -> bytes | None:
    """The decoded body llmfix sends for ``req`` with exactly these learned ``flags`` (None: unchanged)."""
    return (await run(req, dataclasses.replace(settings, quirks=Fixed(flags)))).body


async def decide(found: rejections.Match, status: int, req: engine.Request, sent_raw: bytes,
                 settings: engine.Settings, run: Run = in_a_thread) -> Decision:
    """The decision for ``req`` (the request as the client sent it; ``req.host``/``port``: the upstream it went
    to) rejected with ``status`` and ``found``; ``sent_raw``: the body llmfix sent (its wire bytes); ``run``: how
    the transport runs the engine."""
    host, port = req.host, req.port or 0
    excerpt = redact_text(found.text.replace("\n", " "), EXCERPT)
    event: dict[str, Any] = {"status": status, "rejection": found.rule.name, "error": excerpt, "learned": [],
                             "resent": False}
    d = Decision(found, req.dialect, host, port, event)
    try:
        sent = engine.decode(sent_raw, req.content_encoding, settings.max_body)
    except BadBody as e:
        d.why = f"not resent: the body sent cannot be decoded ({e})"
        return d
    if found.rule.facts is not None:
        return await _decide_facts(d, req, sent, settings, run)
    quirks = settings.quirks
    assert quirks is not None
    base = quirks.flags(host, port, req.dialect)
    d.known = [f for f in found.flags if f in base]
    base_body = await _body(run, req, settings, base)
    for flag in found.flags:
        if flag not in base and await _body(run, req, settings, merge(base, (flag,))) != base_body:
            d.useful.append(flag)
    event["learned"] = [{"flag": f, "value": v} for f, v in d.known + d.useful]
    outcome = await run(req, dataclasses.replace(settings, quirks=Fixed(merge(base, tuple(d.useful)))))
    why = "its repair is always on" if not found.flags else "no flag llmfix could learn would change the body"
    return _resend(d, outcome, sent, settings, why)


def _resend(d: Decision, outcome: engine.Outcome, sent: bytes, settings: engine.Settings, why: str) -> Decision:
    """``d`` with ``outcome`` to resend, unless it changes nothing (``why``) or llmfix only reports."""
    if outcome.status != "repaired" or outcome.body == sent or outcome.wire is None:
        d.why = f"not resent: {why}"
    elif settings.mode != "repair":
        d.why = "report mode: would learn and resend once"
    else:
        d.outcome = outcome
    return d


async def _decide_facts(d: Decision, req: engine.Request, sent: bytes, settings: engine.Settings,
                        run: Run) -> Decision:
    """A rule that teaches facts about the rejected body: the repaired body with them known, or why none."""
    assert d.found.rule.facts is not None
    try:
        body = orjson.loads(sent)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        d.why = "not resent: the body sent is not a JSON object"
        return d
    d.facts = d.found.rule.facts(d.found, body, upstream_id(d.host, d.port, str(d.dialect)))
    d.event["learned"] = [{"fact": r.kind, "key": r.key[:16]} for r in d.facts]
    if not d.facts:
        d.why = "not resent: the rejection names nothing llmfix can repair"
        return d
    outcome = await run(req, dataclasses.replace(settings, reasoning=Overlay(settings.reasoning, d.facts)))
    return _resend(d, outcome, sent, settings, "what the rejection taught would not change the body")


def learn(d: Decision, settings: engine.Settings) -> None:
    """Learn the decision's useful flags, or note the facts it taught (just before its resend goes out)."""
    if d.facts:
        noted = settings.reasoning.note(d.facts) if settings.reasoning is not None else 0
        for record in d.event["learned"]:
            record["new"] = bool(noted)
        return
    assert settings.quirks is not None
    now = time.time()
    d.new = [False] * len(d.known)
    d.new += [settings.quirks.learn(Quirk(d.host, d.port, str(d.dialect), f, v, d.reason, now)) for f, v in d.useful]
    for record, is_new in zip(d.event["learned"], d.new, strict=True):
        record["new"] = is_new


def settle(d: Decision, settings: engine.Settings, again: rejections.Match | None) -> None:
    """The resend was answered: rejected the same way (``again`` is the same rule, naming the same fields), its new
    flags did not help, so later requests are not shaped by them. A refusal of another field is progress: kept."""
    if again is None or (again.rule, again.taught) != (d.found.rule, d.found.taught) or settings.quirks is None:
        return
    for (f, _), is_new in zip(d.known + d.useful, d.new, strict=True):
        if is_new:
            settings.quirks.unlearn(d.host, d.port, str(d.dialect), f)
