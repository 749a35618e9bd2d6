"""The Redis memory against a real redis-server: two instances (two links) share calls, media and quirks;
bounds live in Redis; Redis gone or hung costs one warning and comes back by itself."""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.registry import RESPONSES
from llmfix.memory.backend import check_location, open_memory
from llmfix.memory.media_window import MAX_IN_FLIGHT_S
from llmfix.memory.redis_link import RedisLink, check_url, is_url, redacted
from llmfix.memory.redis_media import MAX_OBSERVE_BYTES, RedisMediaStore
from llmfix.memory.redis_store import MAX_REMEMBER_BYTES, RedisCallStore, RedisQuirkStore
from llmfix.memory.sqlite import SqliteStore
from llmfix.memory.store import MemoryStoreError, Quirk, ToolCall
from tests.conftest import fixture_json
from tests.images import data_url, padded_png
from tests.redis_server import RedisServer, needs_redis, until

pytestmark = [needs_redis, pytest.mark.timeout(60)]

CODEX = fixture_json("codex/turn2_request.json")
CALL = CODEX["input"][-1]["call_id"]
MEDIA_KEY = b"llmfix:media:" + CALL.encode()
"""Where Redis holds the observation of CALL's media."""
IMAGE = CODEX["input"][-1]["output"][0]
DAY = 86400


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as s:
        yield s


@pytest.fixture
def links(server: RedisServer) -> Iterator[Callable[..., RedisLink]]:
    made: list[RedisLink] = []
    with server.client() as c:
        c.flushdb()

    def make(**kw: Any) -> RedisLink:
        link = RedisLink(server.url, **{"timeout_s": 1.0, **kw})
        made.append(link)
        return link

    yield make
    for link in made:
        link.close()


def call(call_id: str, arguments: str = '{"file_path": "/home/dev/project/b.png"}') -> ToolCall:
    return ToolCall(call_id, "Read", arguments, "chat")


def warnings(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


# -- locations ---------------------------------------------------------------------------------


@pytest.mark.parametrize("location", ["redis://127.0.0.1:6379/0", "rediss://h:6380/2", "REDIS://h",
                                      "redis:", "unix:///tmp/x", "http://h"])
def test_urls_are_never_paths(location: str) -> None:
    assert is_url(location)


@pytest.mark.parametrize("location", [":memory:", "memory.sqlite3", "/tmp/x.sqlite3", "C:/x.sqlite3", "./a:b"])
def test_paths_are_not_urls(location: str) -> None:
    assert not is_url(location)


@pytest.mark.parametrize(("url", "match"), [
    ("redis:", "names no host"), ("http://h/0", "not supported"), ("redis://h/zero", "must be a number"),
    ("redis://h:99999/0", "not a valid URL"),
])
def test_bad_urls_are_refused(url: str, match: str) -> None:
    with pytest.raises(MemoryStoreError, match=match):
        check_url(url)


def test_a_password_is_never_printed() -> None:
    for url in ("redis://:s3cret-pw@h:6379/0", "redis://user:s3cret-pw@h:6379/0", "rediss://s3cret-pw@h/1",
                "redis://h:6379/0?password=s3cret-pw"):
        assert "s3cret-pw" not in redacted(url)
        assert redacted(url).startswith(("redis://", "rediss://"))
    with pytest.raises(MemoryStoreError) as e:
        check_url("redis://:s3cret-pw@h:bad/0")
    assert "s3cret-pw" not in str(e.value)


def test_a_path_whose_directory_does_not_exist_is_refused(tmp_path) -> None:
    with pytest.raises(MemoryStoreError, match="does not exist"):
        check_location(str(tmp_path / "nowhere" / "memory.sqlite3"))
    check_location(str(tmp_path / "memory.sqlite3"))
    check_location(":memory:")


def test_the_default_location_gets_its_directory(tmp_path) -> None:
    check_location(str(tmp_path / "confdir" / "llmfix-memory.sqlite3"), given=False)


def test_open_memory_picks_the_backend(server: RedisServer, tmp_path) -> None:
    shared = open_memory(server.url, max_age_s=DAY, max_entries=10, timeout_s=1.0)
    local = open_memory(str(tmp_path / "m.sqlite3"), max_age_s=DAY, max_entries=10, timeout_s=1.0)
    try:
        assert shared.shared and isinstance(shared.calls, RedisCallStore) and shared.quirks is not None
        assert not local.shared and isinstance(local.calls, SqliteStore) and local.media is None
    finally:
        shared.calls.close()
        local.calls.close()


# -- tool calls ----------------------------------------------------------------------------------


def test_a_call_remembered_by_one_instance_is_known_to_another(links, server: RedisServer) -> None:
    a, b = RedisCallStore(links(), max_age_s=DAY), RedisCallStore(links(), max_age_s=DAY)
    assert a.remember([call("call_mock_b")]) == 1
    a.link.flush()
    assert b.lookup(["call_mock_b", "call_unknown"]) == {"call_mock_b": call("call_mock_b")}
    with server.client() as c:
        assert 0 < c.ttl(b"llmfix:call:call_mock_b") <= DAY  # the age bound is Redis's own expiry
        assert all(k.startswith(b"llmfix:") for k in c.scan_iter())


def test_a_re_seen_call_is_refreshed_with_its_latest_values(links) -> None:
    a = RedisCallStore(links(), max_age_s=DAY)
    a.remember([call("c1", '{"a": 1, "b": [2]}')])
    a.remember([call("c1", '{"b":[2],"a":1}')])  # the same declaration in a client's own JSON
    a.link.flush()
    assert a.lookup(["c1"])["c1"].arguments == '{"b":[2],"a":1}'


def test_an_id_two_instances_wrote_with_different_declarations_is_ambiguous_for_the_fleet(links, server) -> None:
    """Kimi's ``functions.bash:0``: session A's call through one instance, session B's through another."""
    a, b = RedisCallStore(links(), max_age_s=DAY), RedisCallStore(links(), max_age_s=DAY)
    a.remember([ToolCall("functions.bash:0", "bash", '{"cmd": "cat ~/.env"}', "chat")])
    a.link.flush()
    assert set(b.lookup(["functions.bash:0"])) == {"functions.bash:0"}
    b.remember([ToolCall("functions.bash:0", "bash", '{"cmd": "ls"}', "chat")])
    b.link.flush()
    assert a.lookup(["functions.bash:0"]) == {} == b.lookup(["functions.bash:0"])
    a.remember([ToolCall("functions.bash:0", "bash", '{"cmd": "cat ~/.env"}', "chat")])
    a.link.flush()
    assert b.lookup(["functions.bash:0"]) == {}  # it stays so while it is written again
    with server.client() as c:
        assert 0 < c.ttl(b"llmfix:call:functions.bash:0") <= DAY
        c.set(b"llmfix:call:older", json.dumps(["Read", "{}", "chat", "function"]))  # an older llmfix's value
    assert set(b.lookup(["older"])) == {"older"}
    b.remember([ToolCall("older", "Write", "{}", "chat")])
    b.link.flush()
    assert b.lookup(["older"])["older"].name == "Write"  # replaced, not taken for another declaration


def test_oversized_calls_are_not_written_and_one_request_writes_at_most_the_cap(links, server, caplog) -> None:
    a = RedisCallStore(links(), max_age_s=DAY)
    assert a.remember([call("huge", "x" * ((1 << 20) + 1)), call("x" * 600)]) == 0
    big = "y" * (1 << 20)
    written = a.remember([call(f"big{i}", big) for i in range(8)])
    a.link.flush()
    assert written == MAX_REMEMBER_BYTES // len(json.dumps(["Read", big, "chat", "function"])) < 8
    assert len(a.lookup([f"big{i}" for i in range(8)])) == written
    assert warnings(caplog, "not shared")


def test_a_foreign_value_under_our_key_is_ignored(links, server: RedisServer) -> None:
    with server.client() as c:
        c.set(b"llmfix:call:odd", b"not json")
    assert RedisCallStore(links(), max_age_s=DAY).lookup(["odd"]) == {}


# -- media ---------------------------------------------------------------------------------------


def send(body: dict[str, Any], flow: str, window: RedisMediaStore) -> engine.Outcome:
    req = engine.Request(RESPONSES, "api.openai.com", 443, json.dumps(body).encode(), flow_id=flow)
    return engine.process(req, engine.Settings(window=window))


def degraded(output: Any) -> dict[str, Any]:
    body = copy.deepcopy(CODEX)
    body["input"][-1]["output"] = output
    return body


def ended(store: RedisMediaStore) -> RedisMediaStore:
    """``store`` once it saw the client's request and its end, what it wrote flushed to Redis."""
    send(CODEX, "client-flow", store)
    store.finish("client-flow")
    store.link.flush()
    return store


def test_media_seen_by_one_instance_are_restored_by_another(links, server: RedisServer) -> None:
    a, b = RedisMediaStore(links()), RedisMediaStore(links())
    assert send(CODEX, "client-flow", a).status == "untouched"  # observed on A, before A forwards it
    with server.client() as c:
        ttl = c.pttl(MEDIA_KEY)
    assert 0 < ttl <= MAX_IN_FLIGHT_S * 1000  # held only while its request may be in flight
    result = send(degraded(""), "gateway-flow", b)
    assert [c.repair for c in result.changes] == ["restore-tool-media"]
    assert json.loads(result.body)["input"][-1]["output"] == [IMAGE]  # same bytes, detail kept


def test_the_end_of_the_client_request_ends_the_correlation_for_the_fleet(links, server: RedisServer) -> None:
    a, b = RedisMediaStore(links()), RedisMediaStore(links())
    send(CODEX, "client-flow", a)
    a.finish("client-flow")
    key = MEDIA_KEY
    with server.client() as c:
        assert until(lambda: not c.exists(key), 1.0)  # window 0s: gone at once, within a second
    assert send(degraded(""), "gateway-flow", b).status == "untouched"


def test_a_restore_window_is_an_expiry_in_redis(links, server: RedisServer) -> None:
    ended(RedisMediaStore(links(), window_s=2.0))
    with server.client() as c:
        assert 0 < c.pttl(MEDIA_KEY) <= 2000


def test_the_end_of_an_older_request_does_not_cut_a_later_observation_short(links, server: RedisServer) -> None:
    a, b = RedisMediaStore(links()), RedisMediaStore(links())
    send(CODEX, "turn-1", a)
    send(CODEX, "turn-2", b)  # the latest observation of the call is turn 2's, made on B
    a.finish("turn-1")
    a.link.flush()
    assert a.correlated(CALL, "gateway-flow") is not None


def test_a_client_that_dropped_the_image_overrides_what_another_instance_holds(links) -> None:
    a, b = RedisMediaStore(links()), RedisMediaStore(links())
    send(CODEX, "turn-1", a)
    send(degraded("[image omitted]"), "turn-2", b)  # the client itself sends the call without its image now
    assert send(degraded("[image omitted]"), "turn-2-gateway", a).status == "untouched"
    assert send(degraded(""), "turn-2-gateway-b", a).status == "untouched"


def test_one_request_writes_at_most_the_media_cap(links, caplog) -> None:
    a = RedisMediaStore(links())
    body = copy.deepcopy(CODEX)
    big = dict(IMAGE, image_url=data_url(padded_png(MAX_OBSERVE_BYTES // 4)))
    for n in range(4):  # each output with its call: an orphan output is pair-tool-calls' to settle, not a result
        body["input"].append({"type": "function_call", "call_id": f"call_big_{n}", "name": "view_image",
                              "arguments": "{}"})
        body["input"].append({"type": "function_call_output", "call_id": f"call_big_{n}", "output": [big]})
    send(body, "client-flow", a)
    held = [n for n in range(4) if a.held(f"call_big_{n}")]
    assert held == [0, 1]
    assert warnings(caplog, "not shared")


# -- quirks ----------------------------------------------------------------------------------------


def quirk(host: str = "api.vendor.example", flag: str = "responses_tool_output_array", at: float | None = None
          ) -> Quirk:
    return Quirk(host, 443, "responses", flag, False, "422 did not match any variant", at or time.time())


def test_a_quirk_learned_by_one_instance_is_known_to_another(links) -> None:
    a, b = RedisQuirkStore(links(), max_age_s=DAY), RedisQuirkStore(links(), max_age_s=DAY)
    q = quirk()
    a.learn(q)
    assert a.quirks() == [q]  # at once on the instance that learned it
    assert until(lambda: b.quirks() == [q], 5.0)  # the other instance's copy is refreshed every second
    a.learn(quirk(at=q.learned_at + 1))  # the same flag again: replaced, not added
    a.link.flush()
    assert b.refresh() and [x.learned_at for x in b.quirks()] == [q.learned_at + 1]


def test_forget_is_fleet_wide(links) -> None:
    a, b = RedisQuirkStore(links(), max_age_s=DAY), RedisQuirkStore(links(), max_age_s=DAY)
    a.learn(quirk("one.example"))
    a.learn(quirk("two.example"))
    a.link.flush()
    assert b.forget("one.example") == 1
    assert a.refresh() and [q.host for q in a.quirks()] == ["two.example"]
    assert b.forget() == 1
    assert a.refresh() and a.quirks() == []


def test_quirks_older_than_the_memory_age_are_gone(links) -> None:
    a = RedisQuirkStore(links(), max_age_s=60)
    a.learn(quirk(at=time.time() - 120))
    a.link.flush()
    assert a.refresh() and a.quirks() == []


# -- failing open ----------------------------------------------------------------------------------


def test_redis_gone_costs_one_warning_and_sharing_resumes_by_itself(server: RedisServer, caplog) -> None:
    caplog.set_level(logging.INFO)
    link = RedisLink(server.url, timeout_s=1.0, probe_s=0.2)
    calls, media = RedisCallStore(link, max_age_s=DAY), RedisMediaStore(link)
    try:
        calls.remember([call("before")])
        link.flush()
        assert calls.lookup(["before"])
        server.kill()
        for _ in range(20):  # requests keep coming; none raises, each gets "no memory"
            assert calls.lookup(["before"]) == {}
            assert media.correlated(CALL, "f") is None
            calls.remember([call("while-down")])
        assert not link.up
        assert len(warnings(caplog, "unreachable")) == 1
        server.start()
        assert until(lambda: link.up, 10.0)  # reconnected by itself
        assert len(warnings(caplog, "is back")) == 1
        calls.remember([call("after")])
        link.flush()
        assert set(calls.lookup(["before", "while-down", "after"])) == {"after"}  # Redis restarted empty
        assert len(warnings(caplog, "unreachable")) == 1
    finally:
        link.close()


def test_a_hung_redis_is_bounded_by_the_timeout(server: RedisServer, caplog) -> None:
    link = RedisLink(server.url, timeout_s=0.5, probe_s=0.2)
    calls = RedisCallStore(link, max_age_s=DAY)
    try:
        assert calls.lookup(["x"]) == {}
        server.pause()
        assert calls.lookup(["x"]) == {}  # waits at most the timeout, then goes on without memory
        assert not link.up and calls.lookup(["x"]) == {}
        assert len(warnings(caplog, "unreachable")) == 1
        assert "timed out" in warnings(caplog, "unreachable")[0]
        server.resume()
        assert until(lambda: link.up, 10.0)
    finally:
        server.resume()
        link.close()


def test_a_foreign_media_value_is_ignored(links, server: RedisServer) -> None:
    with server.client() as c:
        c.hset(MEDIA_KEY, mapping={b"flow": b"other", b"token": b"t", b"data": b"{not json"})
        c.sadd(b"llmfix:media-ids", CALL.encode())
    b = RedisMediaStore(links())
    assert b.correlated(CALL, "gateway-flow") is None
    assert send(degraded(""), "gateway-flow", b).status == "untouched"


def test_the_index_forgets_expired_observations(links, server: RedisServer) -> None:
    a = ended(RedisMediaStore(links(), window_s=0.05))
    with server.client() as c:
        assert until(lambda: not c.exists(MEDIA_KEY), 5.0)
        assert c.sismember(b"llmfix:media-ids", CALL.encode())  # the index still names it
        assert a.sweep() == 1
        assert not c.sismember(b"llmfix:media-ids", CALL.encode())


def test_after_an_outage_an_instance_shares_again_what_it_wrote_a_moment_ago(server: RedisServer) -> None:
    from llmfix.memory.recall import Recall

    link = RedisLink(server.url, timeout_s=1.0, probe_s=0.2)
    recall = Recall(RedisCallStore(link, max_age_s=DAY))
    try:
        assert recall.remember([call("call_mock_b")]) == 1
        link.flush()
        assert recall.remember([call("call_mock_b")]) == 0  # written a moment ago: not again
        server.kill()
        assert recall.lookup(["call_mock_b"]) == {}
        server.start()  # back, empty
        assert until(lambda: link.up, 10.0)
        assert recall.remember([call("call_mock_b")]) == 1  # the outage may have lost it: written again
        link.flush()
        assert recall.lookup(["call_mock_b"]) == {"call_mock_b": call("call_mock_b")}
    finally:
        link.close()
