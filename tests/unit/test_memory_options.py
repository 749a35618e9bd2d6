"""``llmfix_memory`` in mitmproxy's test harness: a URL selects Redis, never a file; bad locations stop startup."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mitmproxy import exceptions

from llmfix.memory.media_window import MediaWindow
from llmfix.memory.redis_media import RedisMediaStore
from llmfix.memory.redis_store import RedisCallStore
from llmfix.memory.sqlite import SqliteStore
from llmfix.proxy import LLMFix
from tests.conftest import alone_in_context
from tests.redis_server import RedisServer, needs_redis


@pytest.fixture
def addon():
    with alone_in_context(LLMFix()) as pair:
        yield pair


@needs_redis
def test_a_redis_url_selects_the_shared_memory_and_creates_no_file(addon, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    a, tctx = addon
    with RedisServer() as server:
        tctx.configure(a, llmfix_memory=server.url)
        assert isinstance(a.recall.memory, RedisCallStore)
        assert isinstance(a.window, RedisMediaStore) and a.settings.window is a.window
        assert a.offload and a.quirks is not None
        tctx.configure(a, llmfix_memory=":memory:")  # and back to an embedded store
        assert isinstance(a.recall.memory, SqliteStore) and isinstance(a.window, MediaWindow) and not a.offload
    assert os.listdir(tmp_path) == []  # no file named "redis:" (or anything else) in the working directory


def test_an_unreachable_redis_does_not_stop_startup(addon, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    a, tctx = addon
    tctx.configure(a, llmfix_memory="redis://127.0.0.1:1/0", llmfix_memory_timeout="1s")  # nothing listens on 1
    assert a.recall.lookup(["call_x"]) == {}
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(("opts", "match"), [
    ({"llmfix_memory": "redis:"}, "names no host"),
    ({"llmfix_memory": "http://127.0.0.1:6379/0"}, "not supported"),
    ({"llmfix_memory": "redis://:s3cret@127.0.0.1:6379/zero"}, "must be a number"),
    ({"llmfix_memory_timeout": "30s"}, "at most 10s"),
    ({"llmfix_memory_timeout": "0s"}, "more than 0"),
])
def test_bad_memory_options_stop_startup_with_the_reason(addon, opts, match) -> None:
    a, tctx = addon
    with pytest.raises(exceptions.OptionsError, match=match) as e:
        tctx.configure(a, **opts)
    assert "s3cret" not in str(e.value)


def test_a_path_whose_directory_does_not_exist_stops_startup(addon, tmp_path: Path) -> None:
    a, tctx = addon
    with pytest.raises(exceptions.OptionsError, match="does not exist"):
        tctx.configure(a, llmfix_memory=str(tmp_path / "missing" / "memory.sqlite3"))
    assert not (tmp_path / "missing").exists()
