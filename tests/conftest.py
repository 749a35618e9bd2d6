"""Shared test helpers: the captured fixtures (copied from the real clients) and flow builders."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http
from mitmproxy.test import tflow, tutils

from tests.upstreams.mock import MockUpstream

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def fixture_json(name: str) -> Any:
    return json.loads(fixture_bytes(name))


def make_flow(
    body: bytes | dict[str, Any],
    *,
    host: str = "api.x.ai",
    path: str = "/v1/responses",
    method: str = "POST",
    headers: dict[str, str] | None = None,
    port: int = 443,
) -> http.HTTPFlow:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    hdrs = http.Headers(content_type="application/json", host=host, **(headers or {}))
    req = tutils.treq(
        method=method.encode(), host=host, port=port, scheme=b"https", path=path.encode(),
        authority=host.encode(), headers=hdrs, content=content,
    )
    return tflow.tflow(req=req)


@pytest.fixture(scope="module")
def upstream() -> Iterator[MockUpstream]:
    """A strict mock upstream answering each request by its original host's rules, one per test module
    (a module that needs other rules defines its own ``upstream``)."""
    with MockUpstream(rules="by-host") as up:
        yield up


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """mitmproxy's confdir defaults to ~/.mitmproxy (and llmfix's memory lives there): keep tests out of it."""
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


@contextlib.contextmanager
def alone_in_context(addon: Any) -> Iterator[tuple[Any, Any]]:
    """``addon`` alone in a mitmproxy test context, ``(addon, tctx)``; its ``done()`` when the context ends."""
    from mitmproxy.test import taddons

    with taddons.context(addon) as tctx:
        try:
            yield addon, tctx
        finally:
            addon.done()


@contextlib.contextmanager
def llmfix_with(*kinds: Callable[[Any], Any]) -> Iterator[tuple[Any, ...]]:
    """An LLMFix with a throw-away memory and the addons ``kinds(fix)`` next to it, in a mitmproxy test context:
    ``(fix, *those addons, tctx)``."""
    from mitmproxy.test import taddons

    from llmfix.proxy import LLMFix

    fix = LLMFix()
    others = [kind(fix) for kind in kinds]
    with taddons.context(fix, *others) as tctx:
        tctx.configure(fix, llmfix_memory=":memory:")
        yield (fix, *others, tctx)
