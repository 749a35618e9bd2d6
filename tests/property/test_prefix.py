"""The prefix fast path (``body/prefix.py``) under generated sessions: every turn of a generated
conversation, sent as a client resends its history, gets from an llmfix that recognises appends exactly
the answer of an llmfix that parses every body whole and runs every repair — status, warning text, repaired
bytes, change lines, what memory learned, what the media window recorded — and the recognising one does
recognise the appends. Valid and broken histories: a turn that needs nothing is settled from its new items
(``repairs/settled.py``), one that needs a repair is repaired as the whole path repairs it.

Turns are also mutated the ways a session may break an append (an edited old item, a changed top-level
field, a truncated or malformed new item), so the fast path must fall back, or warn, exactly as the whole
parse does.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from llmfix import engine
from llmfix.body.conversation import loads, parse
from llmfix.body.prefix import Hit, PrefixCache
from llmfix.dialects.registry import named
from llmfix.engine import Request, Settings
from llmfix.memory.media_window import MediaWindow
from llmfix.memory.recall import Recall
from llmfix.memory.sqlite import SqliteStore
from llmfix.wire.toolresults import Piece, Result, results
from tests.property.breakage import valid_or_broken
from tests.property.budget import BUDGET
from tests.property.strategies import CONVERSATIONS, HOSTS
from tests.property.test_promises import Tick

MUTATIONS = ("none", "edit_old", "change_top", "bad_new", "truncate", "repeat", "mark_moved", "flip_id")


def mutate(raw: bytes, kind: str, key: str, before: int = 0) -> bytes:
    """``raw`` broken the way ``kind`` says (still a body a client could send, or a malformed one). ``before``:
    how many items the previous turn had (``mark_moved`` changes its last one, as Claude Code moves its
    cache_control breakpoint: an Anthropic block gains the marker, another item its text)."""
    if kind == "none" or kind == "repeat":
        return raw
    if kind == "flip_id":  # one byte of the first call id changed: the same length, the same bytes near the end
        at = raw.find(b'_id":"')
        if at < 0 or not raw[at + 6 : at + 7].isalnum():
            return raw
        at += 6
        return raw[:at] + (b"Q" if raw[at : at + 1] != b"Q" else b"R") + raw[at + 1 :]
    body = orjson.loads(raw)
    items = body[key] if isinstance(body.get(key), list) else []
    if kind == "mark_moved" and 0 < before <= len(items):
        item = items[before - 1]
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, list) and content and isinstance(content[-1], dict) and key == "messages" \
                and "type" in content[-1]:
            content[-1] = {**content[-1], "cache_control": {"type": "ephemeral"}}
        elif isinstance(item, dict):
            items[before - 1] = {**item, "content": "edited"}
    elif kind == "edit_old" and items:
        items[0] = {**items[0], "role": "user", "content": "edited"}
    elif kind == "change_top":
        body["temperature"] = 0.5
    elif kind == "bad_new" and items:
        items[-1] = {**items[-1], "content": 42}
    elif kind == "truncate":
        return raw[: len(raw) * 2 // 3]
    return orjson.dumps(body)


class Cache(PrefixCache):
    """A prefix cache that counts the appends found from a mark before the end of the kept body's array."""

    marked = 0

    def find(self, dialect: str, data: bytes) -> Hit | None:
        hit = super().find(dialect, data)
        if hit is not None and hit.edited:
            self.marked += 1
        return hit


def answer(settings: Settings, dialect: str, host: str, raw: bytes, flow: str) -> tuple[Any, ...]:
    o = engine.process(Request(named(dialect), host, 443, raw, None, flow), settings)
    window = _window(settings.window)  # what the media window recorded, before the request ends
    settings.window.finish(flow)
    return o.status, o.reason, o.body, o.lines, o.profile, o.model, window


def _elsewhere(dialect: str, raw: bytes) -> list[Result]:
    """The tool results of ``raw`` as another request might have carried them: another text, an image."""
    conv = parse(named(dialect), loads(raw))
    image = Piece("image", url="data:image/png;base64,iVBORw0KGgo=")
    return [Result(r.call_id, r.index, (Piece("text", text="elsewhere"), image)) for r in
            results(named(dialect), conv.items)] if conv is not None else []


def _window(window: MediaWindow) -> dict[str, Any]:
    """Each held observation: its request, the result, and (for one with media: the only kind restore reads
    it from) the media after it in that request."""
    return {c: (s.flow_id, s.result, s.result.later if s.result.media else None) for c, s in window._latest.items()}


@pytest.mark.parametrize("host", ["openai", "xai", "anthropic"])
@pytest.mark.parametrize("dialect", list(CONVERSATIONS))
@BUDGET
@given(data=st.data())
def test_fast_path_answers_as_the_whole_parse(dialect: str, host: str, data: st.DataObject) -> None:
    _broken, conv = valid_or_broken(data, dialect, host)
    cache = Cache(min_size=0)
    fast = Settings(memory=Recall(SqliteStore(":memory:")), window=MediaWindow(0.0, clock=Tick()), prefix=cache)
    whole = Settings(memory=Recall(SqliteStore(":memory:")), window=MediaWindow(0.0, clock=Tick()), prefix=None)
    try:
        appends = 0  # turns that extend the request before them byte for byte (or repeat it)
        clean = False
        seed_at = data.draw(st.integers(0, len(conv.chunks) + 1), label="another request seen before turn")
        for turns in range(1, len(conv.chunks) + 1):
            if turns == seed_at:  # another request in flight carried other results, with media, for these ids
                for settings in (fast, whole):
                    settings.window.observe("other", _elsewhere(dialect, conv.raw()))
            kind = data.draw(st.sampled_from(MUTATIONS), label=f"turn {turns}")
            raw = mutate(conv.raw(turns), kind, conv.key, len(conv.body(turns - 1)[conv.key]))
            for copy in range(2 if kind == "repeat" else 1):
                flow = f"t{turns}.{copy}"
                got = answer(fast, dialect, HOSTS[host].name, raw, flow)
                assert got == answer(whole, dialect, HOSTS[host].name, raw, flow), f"turn {turns} ({kind})"
            now_clean = kind in ("none", "repeat")
            appends += (clean and now_clean) + (kind == "repeat")
            clean = now_clean
        known = {c.call_id for c in conv.calls}
        assert fast.memory.lookup(sorted(known)).keys() == whole.memory.lookup(sorted(known)).keys()
        event(f"recognised appends: {'some' if cache.hits else 'none'}")
        event(f"found from an earlier mark: {'some' if cache.marked else 'none'}")
        if appends:
            assert cache.hits, "no append was recognised"
    finally:
        fast.memory.close()
        whole.memory.close()



@pytest.mark.parametrize("host", list(HOSTS))
@pytest.mark.parametrize("dialect", list(CONVERSATIONS))
@BUDGET
@given(data=st.data())
def test_interleaved_edited_and_restarted_sessions_answer_as_the_whole_parse(dialect: str, host: str,
                                                                             data: st.DataObject) -> None:
    """A team's proxy: several sessions (valid or broken) at once, their turns interleaved, some turns
    regenerated (the last turn replaced by another), some mutated as above, llmfix restarted now and then
    (its cache empty, its memory kept), and a cache that may hold fewer sessions than there are: every
    answer is the whole path's, and sessions that continue are recognised."""
    sessions = [valid_or_broken(data, dialect, host)[1] for _ in range(data.draw(st.integers(2, 4), label="sessions"))]
    order = data.draw(st.permutations([s for s, c in enumerate(sessions) for _ in c.chunks]), label="order")
    cache = Cache(min_size=0, max_entries=data.draw(st.sampled_from([1, 2, 1024]), label="max entries"))
    fast = Settings(memory=Recall(SqliteStore(":memory:")), window=MediaWindow(0.0, clock=Tick()), prefix=cache)
    whole = Settings(memory=Recall(SqliteStore(":memory:")), window=MediaWindow(0.0, clock=Tick()), prefix=None)
    name = HOSTS[host].name
    sent = [0] * len(sessions)
    try:
        for step, s in enumerate(order):
            conv = sessions[s]
            sent[s] += 1
            turns = sent[s]
            kind = data.draw(st.sampled_from((*MUTATIONS, "regenerate", "restart")), label=f"step {step}")
            if kind == "restart":
                cache.clear()
            if kind == "regenerate" and turns >= 2:  # the turn before replaced by this one (a retried turn)
                body = conv.body(turns - 2)
                body[conv.key] = body[conv.key] + conv.chunks[turns - 1]
                raw = orjson.dumps(body)
            else:
                raw = mutate(conv.raw(turns), kind, conv.key, len(conv.body(turns - 1)[conv.key]))
            flow = f"s{s}.t{turns}"
            got = answer(fast, dialect, name, raw, flow)
            assert got == answer(whole, dialect, name, raw, flow), f"step {step}: session {s} turn {turns} ({kind})"
        event(f"recognised: {'some' if cache.hits else 'none'}")
        event(f"found from an earlier mark: {'some' if cache.marked else 'none'}")
    finally:
        fast.memory.close()
        whole.memory.close()
