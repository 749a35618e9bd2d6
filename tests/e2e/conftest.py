"""Fixtures for end-to-end tests: a shared mitmproxy confdir, mock upstreams and mitmdump processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from tests.e2e.harness import Mitmdump
from tests.redis_server import RedisServer
from tests.upstreams.mock import MockUpstream


@pytest.fixture(scope="session")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One confdir per test session, so mitmproxy generates its CA only once."""
    return tmp_path_factory.mktemp("mitmproxy-confdir")


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server on a free loopback port, for the tests of one module (a fleet's shared memory)."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module")
def upstream() -> Iterator[MockUpstream]:
    """A strict mock upstream answering as each real host would (``by-host``), for the tests of one module."""
    with MockUpstream(rules="by-host") as up:
        yield up


@pytest.fixture
def mock_upstream() -> Iterator[Callable[..., MockUpstream]]:
    """Factory: ``mock_upstream(rules="by-host")`` starts a mock; all are stopped after the test."""
    started: list[MockUpstream] = []

    def make(rules: str = "by-host") -> MockUpstream:
        upstream = MockUpstream(rules).start()
        started.append(upstream)
        return upstream

    yield make
    for upstream in started:
        upstream.stop()


@pytest.fixture
def mitmdump(confdir: Path) -> Iterator[Callable[..., Mitmdump]]:
    """Factory: ``mitmdump(scripts=[...], options={...})`` starts mitmdump; all are stopped after the test."""
    started: list[Mitmdump] = []

    def make(*, scripts: Sequence[Path], options: Mapping[str, str] | None = None, args: Sequence[str] = (),
             mode: str | None = None) -> Mitmdump:
        proxy = Mitmdump(scripts=scripts, options=options, args=args, confdir=confdir, mode=mode)
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        proxy.stop()
