"""body/prefix.py: a request that appends items to an earlier one is recognised with certainty, and
llmfix's answer for it is exactly the answer of parsing it whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from llmfix import engine
from llmfix.body.locate import split
from llmfix.body.prefix import Entry, PrefixCache, answers_for
from llmfix.dialects.base import Dialect
from llmfix.dialects.registry import CHAT, MESSAGES, RESPONSES
from llmfix.memory.recall import Recall
from llmfix.memory.sqlite import SqliteStore

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def fixture(rel: str) -> dict[str, Any]:
    return json.loads((FIXTURES / rel).read_text())


def compact(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def pretty(body: dict[str, Any]) -> bytes:
    return json.dumps(body, indent=2, ensure_ascii=False).encode()


# -- split: where the message array ends --------------------------------------------------------


@pytest.mark.parametrize("dumps", [compact, pretty])
def test_split_finds_the_end_of_the_message_array(dumps: Any) -> None:
    body = fixture("codex/turn2_request.json")  # input is followed by tools, tool_choice, …
    data = dumps(body)
    e = split(data, orjson.loads(data), "input")
    assert e is not None and data[e : e + 1] == b"]"
    assert orjson.loads(data[:e] + b',{"type":"message","role":"user","content":"x"}' + data[e:])["input"][-1] == {
        "type": "message", "role": "user", "content": "x"}


def test_split_when_the_array_is_the_last_member() -> None:
    data = b'{"model":"m","messages":[{"role":"user","content":"hi"}]  }'
    assert split(data, orjson.loads(data), "messages") == data.index(b"]  }")


@pytest.mark.parametrize("data", [
    # a top-level array before the message array: with duplicate keys its twin could sit where ours ends
    b'{"x":[0],"messages":[{"role":"user","content":"a"}],"x":[1],"tools":[]}',
    # the tail names the message array's key again (a duplicate key: the parser keeps the last one)
    b'{"messages":[{"role":"user","content":"a"}],"tools":[],"messages":[{"role":"user","content":"b"}]}',
    # an empty array: nothing to append to
    b'{"messages":[],"tools":[]}',
])
def test_split_refuses_what_it_cannot_be_sure_of(data: bytes) -> None:
    assert split(data, orjson.loads(data), "messages") is None


def test_split_takes_the_leftmost_end_when_a_tail_key_repeats() -> None:
    data = b'{"messages":[{"role":"user","content":"a"}],"tools":[1],"tools":[2]}'
    e = split(data, orjson.loads(data), "messages")
    assert e == data.index(b'],"tools"')


def test_split_is_not_fooled_by_the_key_inside_the_history() -> None:
    # the first tail key also appears inside a message, right after a nested array
    data = (b'{"messages":[{"role":"user","content":[{"type":"text","text":"a"}],"tools":"x"},'
            b'{"role":"user","content":"b"}],"tools":[]}')
    e = split(data, orjson.loads(data), "messages")
    assert e == data.rindex(b'],"tools"')


# -- appended: what the new request adds ---------------------------------------------------------


def keep(cache: PrefixCache, data: bytes, key: str = "messages", **kw: Any) -> Entry | None:
    """Keep ``data`` as the engine keeps a body it parsed whole."""
    body = orjson.loads(data)
    end = split(data, body, key)
    assert end is not None
    return cache.keep("chat", data, end, len(body[key]), body[key], 0, {k: v for k, v in body.items() if k != key},
                      **kw)


class Kept:
    """A cache holding one body: what it finds in others."""

    def __init__(self, data: bytes, key: str = "messages") -> None:
        self.cache = PrefixCache(min_size=0)
        entry = keep(self.cache, data, key)
        assert entry is not None
        self.entry = entry

    @property
    def marks(self) -> list[tuple[int, int]]:
        return [(m.offset, m.count) for m in self.entry.marks]


def appended(data: bytes, kept: Kept) -> tuple[int, int, list[Any]] | None:
    hit = kept.cache._look("chat", data)
    return None if hit is None else (hit.count, hit.offset, hit.new)


def test_appended_items_and_non_appends() -> None:
    data = b'{"messages":[{"role":"user","content":"a"}],"model":"m"}'
    e = Kept(data)
    end = data.index(b"]")
    assert appended(data, e) == (1, end, [])
    assert appended(b'{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"model":"m"}',
                    e) == (1, end, [{"role": "user", "content": "b"}])
    for other in (
        b'{"messages":[{"role":"user","content":"a"}],"model":"n"}',  # the tail changed
        b'{"messages":[{"role":"user","content":"A"}],"model":"m"}',  # the history changed
        b'{"messages":[{"role":"user","content":"a"}{"role":"user"}],"model":"m"}',  # no comma: bad JSON
        b'{"messages":[{"role":"user","content":"a"},{"role":"user",],"model":"m"}',  # bad JSON
        b'{"messages":[{"role":"user","content":"a"}],"x":[1],"model":"m"}',  # not inside the array
    ):
        assert appended(other, e) is None, other


def test_a_changed_last_item_is_found_from_its_mark() -> None:
    """Claude Code moves its cache_control breakpoint to the new last message: the old last one changes."""
    a = b'{"role":"user","content":"a"}'
    b_marked = b'{"role":"user","content":[{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}'
    b_plain = b'{"role":"user","content":[{"type":"text","text":"b"}]}'
    c = b'{"role":"assistant","content":"c"}'
    e = Kept(b'{"messages":[' + a + b"," + b_marked + b'],"model":"m"}')
    assert appended(b'{"messages":[' + a + b"," + b_plain + b"," + c + b'],"model":"m"}', e) == (
        1, len(b'{"messages":[' + a), [orjson.loads(b_plain), orjson.loads(c)])
    assert appended(b'{"messages":[' + a + b'],"model":"m"}', e) == (1, len(b'{"messages":[' + a), [])  # dropped
    assert appended(b'{"messages":[{"role":"user","content":"A"},' + b_plain + b'],"model":"m"}', e) is None
    pretty = b'{"messages": [' + a + b", " + b_marked + b'], "model": "m"}'  # not compact: no mark for b
    e = Kept(pretty)
    assert appended(b'{"messages": [' + a + b", " + b_plain + b'], "model": "m"}', e) is None
    assert e.marks == [(len(pretty) - len(b'], "model": "m"}'), 2)]


# -- the engine: the same answer as parsing whole ------------------------------------------------


def session(body: dict[str, Any], key: str, new: list[list[dict[str, Any]]]) -> list[bytes]:
    """``body``, then ``body`` with each group of ``new`` items appended in turn (as a client resends it)."""
    out, items = [], list(body[key])
    out.append(compact(body))
    for group in new:
        items += group
        out.append(compact({**body, key: items}))
    return out


def run(dialect: Dialect, host: str, bodies: list[bytes], prefix: PrefixCache | None,
        tmp_path: Path) -> tuple[list[tuple[Any, ...]], Recall]:
    memory = Recall(SqliteStore(tmp_path / f"m{id(prefix)}.sqlite3"))
    settings = engine.Settings(memory=memory, prefix=prefix)
    got = []
    for i, raw in enumerate(bodies):
        o = engine.process(engine.Request(dialect, host, 443, raw, None, f"flow{i}"), settings)
        got.append((o.status, o.reason, o.body, tuple(o.lines), o.profile, o.model))
    return got, memory


CHAT_TURNS = [
    [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_new_1", "type": "function",
         "function": {"name": "Execute", "arguments": "{\"command\":\"ls\"}"}}]},
     {"role": "tool", "tool_call_id": "call_new_1", "content": "a.png\nb.png"}],
    [{"role": "user", "content": "and now?"}],
    # an image inside a tool message: OpenAI rejects it, llmfix must hoist it on the fast path too
    [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_new_2", "type": "function", "function": {"name": "Read", "arguments": "{}"}}]},
     {"role": "tool", "tool_call_id": "call_new_2", "content": [
         {"type": "text", "text": "b.png"},
         {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}],
    # a malformed new item: the one warning, naming its place in the whole array
    [{"role": "user", "content": 42}],
]


def test_chat_session_same_answers_with_and_without_the_cache(tmp_path: Path) -> None:
    body = fixture("droid/0.225.2__single_image__turn2.json")  # 50 KB: over the cache's minimum size
    bodies = session(body, "messages", CHAT_TURNS)
    cache = PrefixCache()
    fast, memory = run(CHAT, "api.openai.com", bodies, cache, tmp_path)
    whole, _ = run(CHAT, "api.openai.com", bodies, None, tmp_path)
    assert fast == whole
    assert cache.hits == len(CHAT_TURNS) - 0  # every later turn recognised (the malformed one too)
    assert [s for s, *_ in fast] == ["untouched", "untouched", "untouched", "repaired", "failed"]
    n = len(body["messages"])
    assert fast[-1][1] == f"unexpected shape at messages[{n + 5}].content: Input should be a valid string"
    assert "call_new_1" in memory.lookup(["call_new_1"])  # learned from an appended item


def test_responses_session_repairs_on_the_fast_path(tmp_path: Path) -> None:
    """pi-ai → xAI needs hoist-tool-media in every turn: each later turn, recognised as an append, is
    repaired byte for byte as the whole parse repairs it."""
    body = fixture("pi-ai/xai_responses.json")
    body["instructions"] = "x" * 20_000  # over the cache's minimum size
    turns = [[{"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"turn {k}"}]}]
             for k in range(3)]
    bodies = session(body, "input", turns)
    cache = PrefixCache()
    fast, _ = run(RESPONSES, "api.x.ai", bodies, cache, tmp_path)
    whole, _ = run(RESPONSES, "api.x.ai", bodies, None, tmp_path)
    assert fast == whole
    assert cache.hits == 3
    assert {s for s, *_ in fast} == {"repaired"}


def test_edited_history_is_parsed_whole(tmp_path: Path) -> None:
    """An edit before every mark (the first message) is a miss; an edit of one of the last items (Claude Code
    moving its cache_control breakpoint) is found from the mark before it; both answer as the whole parse."""
    body = fixture("claude-code/single_png__turn2.json")
    first = compact(body)
    for edited, hits in ((dict(body, messages=[{"role": "user", "content": "compacted"}, *body["messages"][1:]]), 0),
                         (dict(body, messages=[*body["messages"][:-1], {"role": "user", "content": "compacted"}]), 1)):
        cache = PrefixCache()
        fast, _ = run(MESSAGES, "api.anthropic.com", [first, compact(edited)], cache, tmp_path)
        whole, _ = run(MESSAGES, "api.anthropic.com", [first, compact(edited)], None, tmp_path)
        assert fast == whole
        assert (cache.hits, cache.misses) == (hits, 2 - hits)


def test_cache_is_bounded() -> None:
    cache = PrefixCache(max_entries=2, min_size=0)
    for i in range(5):
        keep(cache, b'{"messages":[{"role":"user","content":"%d"}]}' % i)
    assert len(cache) == 2
    data = b'{"messages":[{"role":"user","content":"x"}],"tools":"' + b"t" * 60 + b'"}'
    weight = 3 * len(b'],"tools":"' + b"t" * 60 + b'"}') + 160  # the tail and one item
    cache = PrefixCache(max_weight=10 * weight, min_size=0)
    for _ in range(30):
        keep(cache, data)
    assert len(cache) == 10 and cache.weight <= 10 * weight
    big = b'{"messages":[{"role":"user","content":"x"}],"tools":"' + b"t" * 600 + b'"}'  # over a quarter: not kept
    assert keep(cache, big) is None and cache.peek("chat", big) is None


def test_many_sessions_sharing_a_tail_are_told_apart_by_their_prefix() -> None:
    """A team's sessions of one client share the head and the tail of their bodies: each later turn is found
    as the continuation of its own session, whatever the number of sessions kept."""
    def body(s: int, turns: int) -> bytes:
        items = [{"role": "system", "content": "shared"}] + [
            {"role": "user", "content": f"session {s} turn {k}"} for k in range(turns)]
        return compact({"model": "m", "messages": items, "tools": [{"name": "t"}]})

    cache = PrefixCache(min_size=0)
    for s in range(300):
        assert keep(cache, body(s, 2)) is not None
    for s in (0, 17, 299):
        hit = cache.find("chat", body(s, 3))
        assert hit is not None and hit.count == 3 and hit.new == [{"role": "user", "content": f"session {s} turn 2"}]
    hit = cache.find("chat", body(300, 3))  # never seen: only its first item, shared with every session, is known
    assert hit is not None and hit.count == 1
    for s in (1, 298):  # and the sessions it shares that item with are still kept
        hit = cache.find("chat", body(s, 3))
        assert hit is not None and hit.count == 3


def test_a_prefix_with_the_same_probe_and_another_digest_is_no_hit() -> None:
    """The 16 bytes before a mark only pick the candidates: the digest of everything before it decides."""
    first = compact({"model": "m", "messages": [{"role": "user", "content": "A" + "x" * 40}], "tools": []})
    other = compact({"model": "m", "messages": [{"role": "user", "content": "B" + "x" * 40},
                                                {"role": "user", "content": "new"}], "tools": []})
    kept = Kept(first)
    assert appended(other, kept) is None


# -- Answers: the byte questions of an append, from the earlier body's answers -------------------


def test_answers_of_an_append_never_miss_a_needle() -> None:
    first = b'{"messages":[{"role":"user","content":"alpha"}],"model":"m"}'
    cache = PrefixCache(min_size=0)
    hay = answers_for(first, None)
    assert b"alpha" in hay and b'"tool"' not in hay and b"beta" not in hay
    keep(cache, first, answers=hay.answers)
    later = b'{"messages":[{"role":"user","content":"alpha"},{"role":"tool","content":"beta"}],"model":"m"}'
    hit = cache.find("chat", later)
    assert hit is not None
    hay = answers_for(later, hit)
    assert b"alpha" in hay  # from the earlier body's answer
    assert b'"tool"' in hay and b"beta" in hay  # in the new bytes (asked before: false for the earlier body)
    assert b'a"}' + b',{"role"' in hay  # straddles the end of the old items and the new bytes
    assert b'"model":"m"' in hay  # in the tail, never asked before: searched in the whole body
    assert b"gamma" not in hay
    long = b'{"role":"tool","content":"beta"}],"model":"m"}' + b" " * 40
    assert (long in hay) is False and len(long) > 64


def test_light_requests_are_appends_of_kept_bodies(tmp_path: Path) -> None:
    body = fixture("droid/0.225.2__single_image__turn2.json")
    first, second = session(body, "messages", CHAT_TURNS[:1])
    settings = engine.Settings()

    def req(raw: bytes, encoding: str | None = None) -> engine.Request:
        return engine.Request(CHAT, "api.openai.com", 443, raw, encoding, "f")

    assert not engine.light(req(first), settings)  # never seen: parsed whole, may take long
    assert engine.process(req(first), settings).status == "untouched"
    assert engine.light(req(second), settings)
    assert engine.light(req(first), settings)  # the same body again
    assert not engine.light(req(second, "gzip"), settings)
    assert not engine.light(req(second), engine.Settings(prefix=None))
    assert settings.prefix is not None and settings.prefix.hits == 0  # light() only looks


def test_concurrent_turns_of_one_session_answer_as_the_whole_parse(tmp_path: Path) -> None:
    """Flows of one session in worker threads at once (a retry, parallel sub-agents sharing a history): they
    find, extend and add verdicts to the same entries; every answer is still the whole parse's."""
    import sys
    import threading

    body = fixture("claude-code/single_png__turn2.json")
    turns = [[{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_c{k}", "name": "Bash",
                                                 "input": {"command": "ls"}}]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_c{k}",
                                            "content": "x" * 4000}]}] for k in range(12)]
    bodies = session(body, "messages", turns)
    whole, _ = run(MESSAGES, "api.anthropic.com", bodies, None, tmp_path)
    memory = Recall(SqliteStore(tmp_path / "shared.sqlite3"))
    settings = engine.Settings(memory=memory, prefix=PrefixCache(min_size=0))
    errors: list[BaseException] = []
    got: dict[tuple[int, int], tuple[Any, ...]] = {}

    def worker(w: int) -> None:
        try:
            for i, raw in enumerate(bodies):
                o = engine.process(engine.Request(MESSAGES, "api.anthropic.com", 443, raw, None,
                                                  f"w{w}-{i}"), settings)
                got[(w, i)] = (o.status, o.reason, o.body, tuple(o.lines), o.profile, o.model)
        except BaseException as e:  # reported by the assert below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can: interleave every step
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(interval)
        memory.close()
    assert not errors and not any(t.is_alive() for t in threads)
    assert all(got[(w, i)] == whole[i] for w in range(4) for i in range(len(bodies)))


def test_answers_of_a_body_found_from_an_earlier_mark_are_the_haystacks() -> None:
    """A needle whose only match was in the item the new body replaced is not in the new body (Claude Code's
    breakpoint moved away): the answers are exactly the whole search's, not the earlier body's."""
    a = b'{"role":"user","content":"alpha"}'
    marked = b'{"role":"user","content":[{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}'
    plain = b'{"role":"user","content":[{"type":"text","text":"b"}]}'
    first = b'{"messages":[' + a + b"," + marked + b'],"model":"m","tools":[{"name":"image_url"}]}'
    cache = PrefixCache(min_size=0)
    hay = answers_for(first, None)
    needles = (b"cache_control", b"alpha", b"image_url", b"beta", b'"tool"', b'"model"')
    assert [n in hay for n in needles] == [True, True, True, False, False, True]
    keep(cache, first, answers=hay.answers)
    later = b'{"messages":[' + a + b"," + plain + b',{"role":"tool","content":"beta"}],"model":"m",' \
            b'"tools":[{"name":"image_url"}]}'
    hit = cache.find("chat", later)
    assert hit is not None and hit.count == 1
    hay = answers_for(later, hit)
    assert [n in hay for n in needles] == [n in later for n in needles] == [False, True, True, True, True, True]
    assert hay.answers == {n: later.find(n) for n in needles}  # where each first occurs, for the next body


# -- found by review: shapes where the fast path once answered otherwise than the whole parse -------------------


def _answers_both(dialect: Dialect, host: str, bodies: list[bytes], prep: Any = None) -> list[list[tuple[Any, ...]]]:
    from llmfix.memory.media_window import MediaWindow
    from tests.property.test_promises import Tick

    out = []
    for prefix in (PrefixCache(min_size=0), None):
        settings = engine.Settings(window=MediaWindow(0.0, clock=Tick()), prefix=prefix)
        if prep is not None:
            prep(settings)
        got = []
        for i, raw in enumerate(bodies):
            o = engine.process(engine.Request(dialect, host, 443, raw, None, f"t{i}"), settings)
            window = {c: (s.flow_id, s.result) for c, s in settings.window._latest.items()}
            settings.window.finish(f"t{i}")
            got.append((o.status, o.reason, o.body, o.lines, o.profile, o.model, window))
        out.append(got)
    return out


def test_a_lone_trailing_comma_is_bad_json_not_an_append() -> None:
    first = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}'
    comma = first[:-2] + b",]}"
    fast, whole = _answers_both(CHAT, "api.openai.com", [first, comma])
    assert fast == whole and fast[1][0] == "failed"


def test_a_text_part_of_an_unknown_shape_overrides_a_held_observation() -> None:
    """A Responses output part ``{"type": "text"}`` is no media: the request's result still overrides what
    the window holds for its call id (an ended request's image), on the fast path as on the whole one."""
    from llmfix.wire.toolresults import Piece, Result

    body = orjson.dumps({"model": "gpt-4.1", "input": [
        {"role": "user", "content": "look"},
        {"type": "function_call", "call_id": "X", "name": "view_image", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "X", "output": [{"type": "text", "text": "image dropped"}]}]})

    def held(settings: Any) -> None:
        settings.window.observe("other", [Result("X", 0, (Piece("image", url="data:image/png;base64,iVBORw0KGgo="),))])
        settings.window.finish("other")

    fast, whole = _answers_both(RESPONSES, "api.openai.com", [body], held)
    assert fast == whole and fast[0][-1]["X"][0] == "t0"


def test_a_needle_inside_a_payload_of_a_large_body_is_not_an_answer() -> None:
    """In a body of 256 KB or more the haystack skips base64 payloads: so do the answers of an append."""
    history = [{"role": "user", "content": "lorem ipsum " * 30000}, {"role": "assistant", "content": "ok"}]
    first = orjson.dumps({"model": "gpt-4.1", "messages": history})
    later = orjson.dumps({"model": "gpt-4.1", "messages": [*history, {"role": "user",
                                                                      "content": "pasted ;base64,tool_calls"}]})
    fast, whole = _answers_both(CHAT, "api.openai.com", [first, later])
    assert fast == whole and fast[1][5] is None  # no candidate: the untouched early return, no model resolved


def test_own_marks_for_the_last_items_of_every_client() -> None:
    """A body found at the end of the one before (Codex, Droid) and one found from an earlier mark (Claude
    Code) both keep the marks they were found from and get marks for their own last items: a retried or
    regenerated turn replaces the items after the last turn's end, whatever the client."""
    def item(k: int, marked: bool = False) -> bytes:
        extra = b',"cache_control":{"type":"ephemeral"}' if marked else b""
        return b'{"role":"user","content":[{"type":"text","text":"m%d"%s}]}' % (k, extra)

    def body(*items: bytes) -> bytes:
        return b'{"messages":[' + b",".join(items) + b'],"model":"m"}'

    def kept_after(first: bytes, second: bytes) -> tuple[int, ...]:
        cache = PrefixCache(min_size=0)
        keep(cache, first)
        hit = cache.find("chat", second)
        assert hit is not None
        n = len(orjson.loads(second)["messages"])
        entry = cache.keep("chat", second, len(second) - len(hit.entry.tail), n, hit.new, hit.count,
                           hit.entry.top, hit=hit)
        assert entry is not None
        return tuple(m.count for m in entry.marks)

    assert kept_after(body(item(0), item(1)), body(item(0), item(1), item(2), item(3))) == (1, 2, 3, 4)  # appended
    assert kept_after(body(item(0), item(1, True)), body(item(0), item(1), item(2), item(3, True))) == (1, 2, 3, 4)


def claude_code_turns(body: dict[str, Any], turns: int, regenerated: bool = False) -> list[bytes]:
    """``body`` (a Claude Code request), then ``turns`` more as Claude Code sends them: a tool round trip each,
    the cache_control breakpoint moved from the message that was last to the new last one; ``regenerated``:
    each one replaces the round trip before it (a retried turn)."""
    messages = base = [dict(m) for m in body["messages"]]

    def unmarked(m: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(m["content"], list):
            return m
        return {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}

    bodies = [compact(body)]
    for k in range(turns):
        messages = [unmarked(m) for m in (base if regenerated else messages)] + [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_next{k}", "name": "Bash",
                                               "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_next{k}", "content": "a.png",
                                          "cache_control": {"type": "ephemeral"}}]}]
        bodies.append(compact({**body, "messages": messages}))
    return bodies


def test_claude_code_turns_with_a_moving_breakpoint_run_no_repair(tmp_path: Path, monkeypatch: Any) -> None:
    """Claude Code's capture, then two turns as Claude Code sends them: the cache_control breakpoint leaves
    the message that was last for the new last one. Each later turn is found from a mark and settled from
    the verdict before it: no repair runs on it, and the answer is the whole parse's."""
    from llmfix.repairs import pipeline, settled

    body = fixture("claude-code/single_png__turn2.json")
    bodies = claude_code_turns(body, 2)
    whole, _ = run(MESSAGES, "api.anthropic.com", bodies, None, tmp_path)
    ran: list[int] = []
    real = pipeline.run
    monkeypatch.setattr(pipeline, "run", lambda items, ctx, repairs, enabled=None: ran.append(len(repairs)) or
                        real(items, ctx, repairs, enabled))
    starts: list[tuple[int, int]] = []  # (items checked, from where at the earliest) of every settle
    real_advance = settled.advance
    monkeypatch.setattr(settled, "advance", lambda todo, states, ats, items, ctx: starts.append(
        (len(items), min(ats, default=len(items)))) or real_advance(todo, states, ats, items, ctx))
    parsed: list[int] = []  # bodies parsed whole (the known items needed after all)
    real_whole = engine._whole
    monkeypatch.setattr(engine, "_whole", lambda dialect, data: parsed.append(len(data)) or real_whole(dialect, data))
    cache = PrefixCache()
    fast, _ = run(MESSAGES, "api.anthropic.com", bodies, cache, tmp_path)
    assert fast == whole and [s for s, *_ in fast] == ["untouched"] * 3
    assert cache.hits == 2 and ran[1:] == [0, 0]  # both later turns: every repair certain, none run
    assert parsed == []  # the item between the verdict and the mark is parsed from its own bytes
    # each later turn continues the verdict of the turn before's prefix: it checks its last turn, not all
    n = len(body["messages"])
    assert min(start for size, start in starts if size > n) >= n - 1


def test_the_walk_to_a_mark_costs_what_is_new_not_what_other_sessions_hold() -> None:
    """Shorter sessions of the same client (the same tail) keep marks everywhere before a long session's end:
    the walk back from the long session's next turn tries only the marks after its own newest one."""
    def body(turns: int, s: int = 0) -> bytes:
        items = [{"role": "user", "content": f"session {s} turn {k}"} for k in range(turns)]
        return compact({"model": "m", "messages": items, "tools": [{"name": "t"}]})

    cache = PrefixCache(min_size=0)
    for s in range(1, 200):
        keep(cache, body(2 + s % 50, s))  # many sessions, shorter than the one below, with marks all over
    keep(cache, body(60))
    later = body(61)
    (group,) = cache._tails.values()
    tried = list(group.candidates(later, len(later) - len(group.tail)))
    hit = cache.find("chat", later)
    assert hit is not None and hit.count == 60
    assert tried[0] == hit.offset  # the first mark tried is the one it continues


@pytest.mark.parametrize("regenerated", [False, True])
def test_a_first_turn_deferred_for_its_image_leaves_the_next_turns_a_verdict(monkeypatch: Any,
                                                                             regenerated: bool) -> None:
    """In the proxy a light request runs on the event loop (a large one in the shared pool), where an image not
    converted yet defers it: the run stops, the body already kept, and the request runs again on the image
    workers, finding itself. The turns after it — appended with Claude Code's moving breakpoint, or each
    regenerating the last one — must still continue a verdict from the mark before their last message, not parse
    and check every item again (measured: 0.3 ms became 13 ms for a 1 MB Claude Code session with images, and a
    5 MB session's next turn cost a whole parse, 68 ms)."""
    from llmfix import images
    from llmfix.repairs import settled

    body = fixture("claude-code/single_png__turn2.json")
    bodies = claude_code_turns(body, 4, regenerated)[1:]  # first sight: a turn after the capture
    monkeypatch.setattr(images, "CACHE", images.Cache())  # its image not converted yet
    settings = engine.Settings(prefix=PrefixCache(min_size=0))
    starts: list[tuple[int, int]] = []
    real_advance = settled.advance
    monkeypatch.setattr(settled, "advance", lambda todo, states, ats, items, ctx: starts.append(
        (len(items), min(ats, default=len(items)))) or real_advance(todo, states, ats, items, ctx))
    parsed: list[int] = []
    real_whole = engine._whole
    monkeypatch.setattr(engine, "_whole", lambda dialect, data: parsed.append(len(data)) or real_whole(dialect, data))
    statuses = []
    for i, raw in enumerate(bodies):
        req = engine.Request(MESSAGES, "api.anthropic.com", 443, raw, None, f"flow{i}")
        first = images.deferring(engine.process, req, settings)
        statuses.append(first.status)
        if first.status == "deferred":
            assert engine.process(req, settings).status == "untouched"
        if i == 0:
            starts.clear()
            parsed.clear()  # the first sight's run again parses it (nothing was kept of its parse)
    assert statuses == ["deferred", "untouched", "untouched", "untouched"]
    assert parsed == []
    n = len(body["messages"])
    assert min(start for size, start in starts) >= n  # every later turn: from the verdict before its last turn


def test_an_entry_weighs_each_image_its_verdicts_hold_once() -> None:
    """The verdicts at an entry's marks continue one record of the tool results and share its media: a session
    holding a 1 MB screenshot weighs that megabyte once, not once per verdict (at eight verdicts a session with
    3 MB of images was over the quarter of the cache an entry may take, and was never kept)."""
    from types import SimpleNamespace

    from llmfix.body.prefix import weight
    from llmfix.repairs.settled import Verdict

    shot = "data:image/png;base64," + "A" * 1_000_000
    record = SimpleNamespace(media=(SimpleNamespace(pieces=(SimpleNamespace(url=shot),)),))
    one = weight(b"]}", 10, {10: Verdict((), (), record)})
    assert weight(b"]}", 10, {c: Verdict((), (), record) for c in range(3, 11)}) == one
    other = SimpleNamespace(media=(SimpleNamespace(pieces=(SimpleNamespace(url=shot[:-1] + "B"),)),))
    assert weight(b"]}", 10, {9: Verdict((), (), record), 10: Verdict((), (), other)}) == one + len(shot)
