"""Image work never runs on the event loop, whatever the body's size: the addon's request hook, in mitmproxy's
test harness, on a 40 KB Codex request whose one image is an SVG (bodies this small run on the loop otherwise)."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from mitmproxy.test import taddons

from llmfix import images, proxy
from llmfix.proxy import LLMFix
from tests.conftest import fixture_json, make_flow
from tests.images import b64

SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="640" height="480"><circle cx="320" cy="240" r="200"/></svg>'


@pytest.fixture
def addon():
    images.CACHE.clear()
    a = LLMFix()
    with taddons.context(a):
        yield a


def codex_svg() -> bytes:
    body = fixture_json("codex/turn2_request.json")
    body["input"][5]["output"][0]["image_url"] = f"data:image/svg+xml;base64,{b64(SVG)}"
    raw = json.dumps(body).encode()
    assert len(raw) < proxy.OFFLOAD_BYTES
    return raw


async def test_an_svg_in_a_small_body_is_rasterized_in_a_worker_thread(addon, monkeypatch) -> None:
    ran_in: list[threading.Thread] = []
    compute = images._compute

    def spy(*args):
        ran_in.append(threading.current_thread())
        return compute(*args)

    monkeypatch.setattr(images, "_compute", spy)
    f = make_flow(codex_svg(), host="api.openai.com", path="/v1/responses")
    await addon.request(f)
    assert ran_in and threading.current_thread() not in ran_in  # the loop's thread never decoded it
    got = json.loads(f.request.content)["input"][5]["output"][0]["image_url"]
    assert got.startswith("data:image/png;base64,") and f.marked == ":wrench:"


async def test_other_flows_keep_being_served_while_an_image_is_converted(addon, monkeypatch) -> None:
    """A conversion held for 0.5 s: the loop's ticks go on meanwhile (a generous bound on the longest gap)."""
    compute = images._compute

    def slow(*args):
        time.sleep(0.5)
        return compute(*args)

    monkeypatch.setattr(images, "_compute", slow)
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await addon.request(make_flow(codex_svg(), host="api.openai.com", path="/v1/responses"))
    done.set()
    await tick
    assert len(gaps) > 10 and max(gaps) < 0.4
