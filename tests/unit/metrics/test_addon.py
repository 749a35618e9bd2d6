"""The metrics addon in mitmproxy's test harness: the option's validation, the server's life, nothing when unset."""

from __future__ import annotations

import re
import socket
import threading

import httpx
import pytest
from mitmproxy import exceptions

from llmfix import events
from llmfix.metrics.addon import Metrics, parse_address
from tests.conftest import alone_in_context


@pytest.fixture
def addon():
    with alone_in_context(Metrics()) as pair:
        yield pair


def metrics_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "llmfix-metrics"]


@pytest.mark.parametrize(
    ("value", "address"),
    [("127.0.0.1:9464", ("127.0.0.1", 9464)), ("localhost:0", ("localhost", 0)), ("[::1]:9464", ("::1", 9464)),
     (" 127.0.0.1:1 ", ("127.0.0.1", 1)), ("0.0.0.0:65535", ("0.0.0.0", 65535))],
)
def test_parse_address(value, address) -> None:
    assert parse_address(value) == address


@pytest.mark.parametrize(
    ("value", "match"),
    [("9464", "must be HOST:PORT"), (":9464", "must be HOST:PORT"), ("127.0.0.1", "must be HOST:PORT"),
     ("127.0.0.1:", "port must be a number"), ("127.0.0.1:http", "port must be a number"),
     ("127.0.0.1:65536", "port must be a number"), ("127.0.0.1:-1", "port must be a number"),
     ("::1:9464", "IPv6 address in brackets"), ("[]:9464", "IPv6 address in its brackets"),
     ("[nope]:9464", "IPv6 address in its brackets"), ("http://127.0.0.1:9464", "not a URL"),
     ("my host:9464", "not a host name"), ("-x:1", "not a host name")],
)
def test_parse_address_refuses_what_is_not_host_and_port(value, match) -> None:
    with pytest.raises(ValueError, match=match) as e:
        parse_address(value)
    assert str(e.value).startswith("llmfix_metrics")


@pytest.mark.parametrize("value", ["9464", "127.0.0.1:99999", "[::1:9464", "localhost:port"])
def test_a_bad_value_stops_startup_naming_the_option(addon, value) -> None:
    a, tctx = addon
    with pytest.raises(exceptions.OptionsError, match="llmfix_metrics"):
        tctx.configure(a, llmfix_metrics=value)
    assert a.server is None and not metrics_threads()


def test_a_taken_port_stops_startup_naming_the_option(addon) -> None:
    a, tctx = addon
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said = re.escape(f"llmfix_metrics: cannot listen on 127.0.0.1:{port}")
        with pytest.raises(exceptions.OptionsError, match=said):
            tctx.configure(a, llmfix_metrics=f"127.0.0.1:{port}")
    assert a.server is None and not metrics_threads()


def test_a_host_that_does_not_resolve_stops_startup(addon) -> None:
    a, tctx = addon
    said = re.escape("llmfix_metrics: cannot listen on no-such-host.invalid:0")
    with pytest.raises(exceptions.OptionsError, match=said):
        tctx.configure(a, llmfix_metrics="no-such-host.invalid:0")


def test_unset_nothing_listens_and_nothing_is_counted(addon) -> None:
    a, tctx = addon
    tctx.configure(a, llmfix_metrics=None)
    tctx.configure(a, llmfix_metrics="")
    assert a.server is None and a.url is None and not metrics_threads()
    assert not events._listeners  # no listener: the hooks' calls return at once


def test_served_until_done_then_nothing_is_left(addon) -> None:
    a, tctx = addon
    tctx.configure(a, llmfix_metrics="127.0.0.1:0")
    url = a.url
    assert url is not None and len(metrics_threads()) == 1
    assert httpx.get(f"{url}/metrics", trust_env=False, timeout=10).status_code == 200
    assert len(events._listeners) == 1
    a.done()
    assert not metrics_threads() and not events._listeners and a.server is None
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/metrics", trust_env=False, timeout=10)


def test_the_next_addon_binds_the_same_port_at_once(addon) -> None:
    """As in a reload: the old addon's ``done``, then the new one's ``configure`` with every option."""
    a, tctx = addon
    tctx.configure(a, llmfix_metrics="127.0.0.1:0")
    port = int(str(a.url).rsplit(":", 1)[1])
    tctx.master.addons.remove(a)  # its done hook
    assert a.url is None
    tctx.options.update(llmfix_metrics=f"127.0.0.1:{port}")
    b = Metrics()
    b.configure({"llmfix_metrics"})
    try:
        assert b.url == f"http://127.0.0.1:{port}"
        assert httpx.get(f"{b.url}/metrics", trust_env=False, timeout=10).status_code == 200
    finally:
        b.done()


def test_a_new_value_moves_the_server_and_a_refused_one_keeps_it(addon) -> None:
    a, tctx = addon
    tctx.configure(a, llmfix_metrics="127.0.0.1:0")
    first = a.url
    tctx.configure(a, llmfix_metrics="localhost:0")
    second = a.url
    assert second != first and len(metrics_threads()) == 1
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{first}/metrics", trust_env=False, timeout=10)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(exceptions.OptionsError, match="cannot listen"):
            tctx.configure(a, llmfix_metrics=f"127.0.0.1:{taken.getsockname()[1]}")
    assert a.url == second  # still serving where it did
    assert httpx.get(f"{second}/metrics", trust_env=False, timeout=10).status_code == 200


def test_paths(addon) -> None:
    a, tctx = addon
    tctx.configure(a, llmfix_metrics="127.0.0.1:0")
    get = lambda path, **kw: httpx.request(kw.pop("method", "GET"), f"{a.url}{path}", trust_env=False, timeout=10)  # noqa: E731
    assert get("/metrics").headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "# TYPE llmfix_requests_total counter" in get("/metrics").text
    assert get("/").status_code == 200 and "/healthz" in get("/").text
    assert get("/other").status_code == 404
    assert get("/healthz", method="POST").status_code == 405
    status = get("/healthz")  # not running yet (mitmproxy's running hook not called): starting
    assert (status.status_code, status.json()["status"]) == (503, "starting")
    head = get("/healthz", method="HEAD")
    assert (head.status_code, head.content) == (503, b"")


def test_served_on_ipv6_loopback(addon) -> None:
    a, tctx = addon
    try:
        tctx.configure(a, llmfix_metrics="[::1]:0")
    except exceptions.OptionsError as e:
        pytest.skip(f"no IPv6 loopback here: {e}")
    assert str(a.url).startswith("http://[::1]:")
    assert httpx.get(f"{a.url}/metrics", trust_env=False, timeout=10).status_code == 200
