"""One request through llmfix, with no mitmproxy objects: bytes in, an :class:`Outcome` out.

decode → cheap pre-check → parse → repairs → serialize once. Pure apart from the memory it reads,
safe to run in a worker thread. Bad input never raises: it comes back as ``Outcome.failed`` with the
reason, and the proxy forwards the request unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from llmfix import images
from llmfix.body import codec, media
from llmfix.body.answers import Answers
from llmfix.body.conversation import BadBody, Conversation, loads, parse, serialize, typed
from llmfix.body.haystack import Searchable, haystack
from llmfix.body.locate import between, split
from llmfix.body.prefix import Entry, Hit, PrefixCache, answers_for
from llmfix.collector import COLLECTOR
from llmfix.dialects.base import Dialect
from llmfix.memory import observations
from llmfix.memory.learn import calls_in_request
from llmfix.memory.recall import Recall
from llmfix.memory.store import RecallOnce, upstream_id
from llmfix.profiles import ProfileTable
from llmfix.repairs import pipeline, settled
from llmfix.repairs.base import Context
from llmfix.repairs.top import TopContext
from llmfix.report import render
from llmfix.report.changes import Change
from llmfix.wire import toolresults


@dataclass(frozen=True, slots=True)
class Settings:
    mode: Literal["repair", "report", "off"] = "repair"
    enabled: frozenset[str] = frozenset(pipeline.NAMES)
    max_body: int = 64 * 1024 * 1024
    table: ProfileTable = field(default_factory=ProfileTable)
    memory: Recall | None = None  # tool calls seen before (None: no memory)
    window: Any = None  # a MediaWindow: tool-result media of recent requests (None: restore is off)
    quirks: Any = None  # a retry.learned.LearnedQuirks: flags learned from upstream rejections (None: none)
    reasoning: Any = None  # a memory.store.ReasoningStore: what answers said about reasoning (None: not kept)
    prefix: PrefixCache | None = field(default_factory=PrefixCache)  # recent bodies (None: parse every body whole)


@dataclass(frozen=True, slots=True)
class Request:
    dialect: Dialect
    host: str
    port: int | None
    raw: bytes
    content_encoding: str | None = None
    flow_id: str | None = None
    model: str | None = None  # the model the request's path names, where its body names none (Gemini)
    counts_only: bool = False  # the request asks only for a token count (Gemini's countTokens)


def request(dialect: Dialect, host: str, port: int | None, path: str, raw: bytes, content_encoding: str | None,
            flow_id: str | None) -> Request:
    """The request a transport hands the engine for a body sent to ``path`` (what the path says, the dialect reads:
    Gemini's model and its countTokens)."""
    return Request(dialect, host, port, raw, content_encoding, flow_id, dialect.shape.path_model(path),
                   dialect.shape.counts_only(path))


@dataclass(frozen=True, slots=True)
class Outcome:
    status: Literal["untouched", "repaired", "failed", "deferred"]  # deferred: run it again off the event loop
    reason: str | None = None
    changes: tuple[Change, ...] = ()
    body: bytes | None = None  # the repaired body, decoded
    wire: bytes | None = None  # the repaired body encoded as the request's Content-Encoding says
    profile: str | None = None
    model: str | None = None  # the body's model, else the one its path names (Gemini)
    before: tuple[str, ...] = ()  # rendered conversation lines, for the diff view
    after: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()  # Change.line() of each change, rendered here: off the event loop for large bodies
    records: tuple[dict[str, Any], ...] = ()  # Change.record() of each change (redacted), likewise

    @property
    def repairs(self) -> list[str]:
        return list(dict.fromkeys(c.repair for c in self.changes))


def decode(raw: bytes, content_encoding: str | None, limit: int = 1 << 62) -> bytes:
    """The body without its Content-Encoding; a truncated, corrupt or too large body raises :class:`BadBody`."""
    try:
        return codec.decode(raw, content_encoding, limit)
    except codec.TooLarge:
        raise BadBody(f"decoded body exceeds llmfix_max_body={limit}") from None
    except codec.CodecError as e:
        raise BadBody(str(e)) from None


def _not_an_object(data: bytes) -> str | None:
    """Why ``data`` cannot be a JSON object, judged from its ends; None when it may be one.

    The reason names one byte at most: a warning must never carry body bytes (a key, a payload)."""
    head = data[:64].lstrip()
    if not head.startswith(b"{"):
        if head:
            return f"starts with {head[:1]!r}"
        return "only whitespace" if data.isspace() else "no '{' in its first 64 bytes"
    if not data[-64:].rstrip().endswith(b"}"):
        return "does not end with '}': truncated?"
    return None


LIGHT_BYTES = 1536 * 1024
LIGHT_ITEMS = 1500
"""An append of a kept body up to this size and item count is :func:`light`."""


def light(req: Request, settings: Settings) -> bool:
    """Whether :func:`process` will handle ``req`` in well under the GIL's 5 ms switch interval whatever its
    size: an append of a recent body (``body.prefix``) of at most :data:`LIGHT_BYTES` and :data:`LIGHT_ITEMS`,
    not content-encoded. Running such a request in a worker thread gains the event loop nothing (it gets the
    GIL back no sooner) and costs the thread hand-off (~0.3 ms of CPU, more on a busy machine)."""
    cache = settings.prefix
    if cache is None or req.content_encoding not in (None, "", "identity") or len(req.raw) > LIGHT_BYTES:
        return False
    entry = cache.peek(str(req.dialect), req.raw)
    return entry is not None and entry.count <= LIGHT_ITEMS


def process(req: Request, settings: Settings) -> Outcome:
    """Repair one request body; never raises for bad input (only for llmfix's own bugs)."""
    if len(req.raw) > settings.max_body:
        return Outcome("failed", f"body of {len(req.raw)} bytes exceeds llmfix_max_body={settings.max_body}")
    try:
        with COLLECTOR.paused():  # released for image work (llmfix.collector)
            return _top(_process(req, settings), req, settings)
    except BadBody as e:
        return Outcome("failed", str(e))
    except images.WouldBlock as e:  # called on the event loop, and an image must be decoded: nothing was sent
        return Outcome("deferred", str(e))
    finally:
        media.forget()


def _process(req: Request, settings: Settings) -> Outcome:
    data = decode(req.raw, req.content_encoding, settings.max_body)
    if len(data) > settings.max_body:
        return Outcome("failed", f"decoded body of {len(data)} bytes exceeds llmfix_max_body={settings.max_body}")
    if (why := _not_an_object(data)) is not None:
        return Outcome("failed", f"body is not a JSON object ({why})")
    table = settings.table
    learned = settings.quirks.flags(req.host, req.port, req.dialect) if settings.quirks is not None else ()
    host_only = table.resolve(req.host, req.port, None, req.dialect, learned)
    cache = settings.prefix
    hit = cache.find(str(req.dialect), data) if cache is not None else None
    hay = answers_for(data, hit) if cache is not None else haystack(data)
    todo = pipeline.candidates(req.dialect, host_only.profile, hay, settings.enabled)
    learn = settings.memory is not None and any(n in hay for n in req.dialect.tools.DECLARES)
    observe = settings.window is not None and req.flow_id is not None and any(
        n in hay for n in req.dialect.tools.ANSWERS)
    # parsed and typed even when nothing may change, whatever the size: bad JSON or a wrong shape gets its warning.
    # A 10 MB image body costs ~2 ms more than skipping the parse; 1,000,000 small items ~2 s of the worker.
    conv, new, kept = _conversation(req.dialect, data, cache, hit, hay)
    if conv is None:
        return Outcome("untouched", profile=host_only.profile.name)
    if learn:  # from the items not seen before: an earlier request's were learned then
        memory = settings.memory
        seen = conv.body if new is None else {conv.key: new}
        memory.remember(calls_in_request(req.dialect, seen, memory.recently_written))
    if not (todo or observe or table.models or req.model):
        return Outcome("untouched", profile=host_only.profile.name)
    model = conv.model or req.model
    resolved = host_only if model is None else table.resolve(req.host, req.port, model, req.dialect, learned)
    if resolved.profile != host_only.profile:  # the model's own profile: other repairs may apply
        todo = pipeline.candidates(req.dialect, resolved.profile, hay, settings.enabled)
    server_state = req.dialect.shape.server_state(conv.body)
    # each reasoning key read once per request: the certain checks run at every mark (memory/store.RecallOnce)
    reasoning = None if settings.reasoning is None else RecallOnce(settings.reasoning)
    ctx = Context(req.dialect, resolved.profile, model, resolved.modalities, settings.memory,
                  window=settings.window, flow_id=req.flow_id, server_state=server_state,
                  reasoning=reasoning, upstream=upstream_id(req.host, req.port, str(req.dialect)),
                  counts_only=req.counts_only)
    # a body that appends to one which needed nothing continues that body's certain checks from where they
    # stopped (repairs/settled.py); any other starts them from scratch. Only when one is unsure do the repairs run.
    verdict_key = (resolved.profile, model, resolved.modalities, tuple(r.name for r in todo), server_state,
                   req.counts_only)
    start, prior = _prior(hit, verdict_key)
    if hit is not None and new is not None and start < hit.count:
        # the newest verdict is for fewer items than the body continues (Claude Code: the mark before its last
        # message): the known items after it are parsed from their own bytes; none at all, every item
        known = _known(req.dialect, data, hit, start) if prior is not None else None
        if known is None:
            conv = _whole(req.dialect, data)
        else:
            conv.items[start : hit.count] = known
    states, sure, verdicts = _settle(todo, conv.items, start, prior, hit, kept, ctx, verdict_key)
    n = len(conv.items)
    record = verdicts[n].observed if states is not None and n in verdicts else None
    if new is not None and conv.items[0] is settled.KNOWN and (sure < len(todo) or (observe and (
            record is None or observations.reads_before(settings.window, req.flow_id, record, n - len(new))))):
        # a repair must run (on the whole conversation, as the whole path runs it), or the media window needs
        # an item of the known prefix: the whole body, typed now
        conv = _whole(req.dialect, data)
    # the repairs before the first unsure one change nothing: the rest see the items as sent
    items, changes = pipeline.run(conv.items, ctx, todo[sure:], settings.enabled)
    if observe:
        window = settings.window
        if changes or record is None:
            found = window.worth_keeping(toolresults.results(req.dialect, items, text_too=window.knows))
        else:
            found = observations.seen(window, req.flow_id, req.dialect, items, record)
        window.observe(req.flow_id, found)
    if kept is not None:
        kept.verdicts.update(verdicts)
        if any(v.observed is not None and v.observed.media for v in verdicts.values()):
            cache.reweigh(kept)  # its records hold media whole
    if not changes:
        return Outcome("untouched", profile=resolved.profile.name, model=model)
    out = serialize(conv.with_items(items), conv, size=len(data))
    return Outcome(
        "repaired",
        changes=tuple(changes),
        body=out,
        wire=codec.encode(out, req.content_encoding),
        profile=resolved.profile.name,
        model=model,
        before=tuple(render.lines(req.dialect, conv.items)),
        after=tuple(render.lines(req.dialect, items)),
        lines=tuple(c.line() for c in changes),
        records=tuple(c.record() for c in changes),
    )


def _top(outcome: Outcome, req: Request, settings: Settings) -> Outcome:
    """``outcome`` (the pipeline's, for ``req``) with the top-level repairs' changes (:mod:`llmfix.repairs.top`); the
    very same outcome when none of them wants the request or changes its body."""
    if outcome.status not in ("untouched", "repaired"):
        return outcome
    quirks = settings.quirks
    learned = quirks.flags(req.host, req.port, req.dialect) if quirks is not None else ()
    model = outcome.model or req.model
    profile = settings.table.resolve(req.host, req.port, model, req.dialect, learned).profile
    ctx = TopContext(req.dialect, req.host, req.port, profile, model, learned, quirks)
    todo = [r for r in pipeline.TOP if r.name in settings.enabled and r.wants(ctx)]
    if not todo:
        return outcome
    data = outcome.body if outcome.body is not None else decode(req.raw, req.content_encoding, settings.max_body)
    changes: list[Change] = []
    try:
        for repair in todo:
            if (got := repair.apply(data, ctx)) is not None:
                data, more = got
                changes += more
    except ValueError as e:
        return dataclasses.replace(outcome, status="failed", reason=str(e), changes=(), body=None, wire=None,
                                   lines=(), records=())
    if not changes:
        return outcome
    return dataclasses.replace(
        outcome, status="repaired", changes=outcome.changes + tuple(changes), body=data,
        wire=codec.encode(data, req.content_encoding), lines=outcome.lines + tuple(c.line() for c in changes),
        records=outcome.records + tuple(c.record() for c in changes))


def _settle(todo: list[Any], items: list[Any], start: int, prior: settled.Verdict | None, hit: Hit | None,
            kept: Entry | None, ctx: Context, key: tuple[Any, ...]
            ) -> tuple[tuple[Any, ...] | None, int, dict[int, settled.Verdict]]:
    """The certain checks over ``items[start:]`` from ``prior`` (repairs/settled.py): (the states for the whole
    of ``items`` or None, how many leading repairs are certain to change nothing, the verdicts to keep, each
    with the record of where the tool results are, ``memory/observations.py``).

    Also settled at the kept entry's marks past ``start`` (``body/prefix.py``), where the first items of a
    next request may end — Claude Code changes the message that was last — so that such a request has a
    verdict to continue from. A mark whose prefix is not certain (an Anthropic tool_use whose results are
    the next item) gets none; each check continues from the last point it was certain at
    (``settled.advance``), the checks before the unsure one from that mark."""
    n = len(items)
    # marks before the end only for a client that changes its last items (found from such a mark), one not seen
    # before, or one found from a mark without a verdict (the run that kept it stopped short: deferred for an
    # image, and this is its run again): a client that appends byte for byte (Codex, Droid) continues from the end
    edits = hit is None or hit.edited or start < hit.count
    # marks past the newest verdict: one at the mark the body was found from too when it has none (its request
    # stopped short, deferred for an image, or was unsure there), else every later request would start from 0
    counts = [m.count for m in kept.marks if start < m.count < n] if kept is not None and edits else []
    states = list(prior.states) if prior is not None else [None] * len(todo)
    ats = [start] * len(todo)  # the item count each check's state is for
    record = prior.observed if prior is not None else None
    at = start  # the last point every check was certain at (the record's)
    out: dict[int, settled.Verdict] = {}
    for c in [*counts, n]:
        sub = items if c == n else items[:c]
        sure = settled.advance(todo, states, ats, sub, ctx)
        if sure < len(todo):
            if c == n:
                return None, sure, out
            continue
        if kept is not None and (record is not None or at == 0):  # a record only for a body kept for its successor
            record = observations.extend(record, ctx.dialect, sub, at)
        at = c
        out[c] = settled.Verdict(key, tuple(states), record)
    return tuple(states), len(todo), out


def _prior(hit: Hit | None, key: tuple[Any, ...]) -> tuple[int, settled.Verdict | None]:
    """The newest verdict, for the same key, of a prefix of the body ``hit`` found (its item count and it);
    (0, None) when there is none."""
    if hit is None:
        return 0, None
    verdicts = dict(hit.entry.verdicts)  # one C-level copy: another flow may be adding to them meanwhile
    for count in sorted((c for c in verdicts if c <= hit.count), reverse=True):
        if verdicts[count].key == key:
            return count, verdicts[count]
    return 0, None


def _conversation(dialect: Dialect, data: bytes, cache: PrefixCache | None, hit: Hit | None,
                  hay: Searchable | Answers) -> tuple[Conversation | None, list[Any] | None, Entry | None]:
    """The typed conversation of ``data``, the raw items it adds to a body seen before (None: the whole body was
    parsed), and its cache entry (None: not kept).

    A body that continues a kept one (``hit``, see ``body.prefix``) has only its new items parsed and typed:
    its conversation holds :data:`llmfix.repairs.settled.KNOWN` for each item of the known prefix, and its
    ``body`` only the top-level members besides the message array (what the fast path reads: the model,
    server state). Any other body is parsed whole and typed. Either is kept for its own successor."""
    answers = hay.answers if isinstance(hay, Answers) else None
    if hit is None:
        conv = parse(dialect, loads(data))
        kept = None
        if conv is not None and cache is not None and len(data) >= cache.min_size:
            end = split(data, conv.body, conv.key)
            if end is not None:
                top = {k: v for k, v in conv.body.items() if k != conv.key}
                kept = cache.keep(str(dialect), data, end, len(conv.items), conv.body[conv.key], 0, top, answers)
        return conv, None, kept
    entry = hit.entry
    items = [settled.KNOWN] * hit.count + typed(dialect, hit.new, hit.count)
    conv = Conversation(dialect, entry.top, items)
    kept = None
    if cache is not None:
        kept = cache.keep(str(dialect), data, len(data) - len(entry.tail), len(items), hit.new, hit.count, entry.top,
                          answers, hit)
    return conv, hit.new, kept


def _known(dialect: Dialect, data: bytes, hit: Hit, start: int) -> list[Any] | None:
    """The typed items ``start`` to ``hit.count`` of a body that continues a kept one, from the bytes between
    the entry's mark for ``start`` items and the hit's (both inside the prefix the digest vouched for); None
    when the entry has no such mark."""
    mark = next((m for m in hit.entry.marks if m.count == start), None)
    if mark is None or mark.offset > hit.offset:
        return None
    raw = between(data, mark.offset, hit.offset)
    if raw is None or len(raw) != hit.count - start:
        return None
    return typed(dialect, raw, start)


def _whole(dialect: Dialect, data: bytes) -> Conversation:
    """The whole body parsed and typed (a body that continues a kept one, when its known items are needed)."""
    conv = parse(dialect, loads(data))
    if conv is None:  # it parsed as a message array a moment ago
        raise BadBody("the message array changed while it was read")
    return conv
