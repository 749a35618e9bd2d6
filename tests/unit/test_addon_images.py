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
from llmfix.dialects.registry import RESPONSES
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


def svg_body(k: int) -> bytes:
    """A Codex request whose one image is an SVG of its own (distinct by ``k``: each one is new work)."""
    body = fixture_json("codex/turn2_request.json")
    svg = SVG.replace(b'r="200"', f'r="{100 + k}"'.encode())
    body["input"][5]["output"][0]["image_url"] = f"data:image/svg+xml;base64,{b64(svg)}"
    return json.dumps(body).encode()


async def test_a_plain_request_never_waits_behind_images_being_converted(addon, monkeypatch) -> None:
    """Every request in a worker thread (as with a Redis memory), a shared pool of 4 threads, 8 new images whose
    conversions are held until the plain request is done: it is served meanwhile (they used to hold every thread
    of the pool, waiting for their turn to decode, and it waited for all of them)."""
    from concurrent.futures import ThreadPoolExecutor

    from llmfix import engine

    pool = ThreadPoolExecutor(max_workers=4)
    asyncio.get_running_loop().set_default_executor(pool)
    addon.offload = True
    release, started = threading.Event(), threading.Semaphore(0)
    compute = images._compute

    def held(*args):
        started.release()
        release.wait(60)
        return compute(*args)

    monkeypatch.setattr(images, "_compute", held)
    request = lambda raw: engine.Request(RESPONSES, "api.openai.com", 443, raw)  # noqa: E731
    try:
        converting = [asyncio.create_task(addon.run(request(svg_body(k)), addon.settings)) for k in range(8)]
        assert await asyncio.to_thread(started.acquire, True, 30)  # a conversion is under way, held
        plain = json.dumps({"model": "gpt-5", "input": [{"role": "user", "content": "hi"}]}).encode()
        outcome = await asyncio.wait_for(addon.run(request(plain), addon.settings), 30)
        assert outcome.status == "untouched" and not any(t.done() for t in converting)
    finally:
        release.set()
    assert [o.status for o in await asyncio.wait_for(asyncio.gather(*converting), 60)] == ["repaired"] * 8
    pool.shutdown(wait=False)


def test_the_collector_is_paused_for_the_request_and_on_for_image_work(monkeypatch) -> None:
    """The collector is off while a body is parsed, typed and checked (what the pause was measured for), and on
    while an image is converted (hundreds of ms; with image traffic it might otherwise never run)."""
    import gc

    from llmfix import engine
    from llmfix.repairs import settled

    seen: dict[str, bool] = {}
    compute, loads = images._compute, engine.loads

    def converting(*args):
        seen["converting"] = gc.isenabled()
        return compute(*args)

    def parsing(*args):
        seen["parsing"] = gc.isenabled()
        return loads(*args)

    advance = settled.advance

    def checking(*args):
        seen["checking"] = gc.isenabled()
        return advance(*args)

    monkeypatch.setattr(images, "_compute", converting)
    monkeypatch.setattr(engine, "loads", parsing)
    monkeypatch.setattr(settled, "advance", checking)
    images.CACHE.clear()
    assert gc.isenabled()
    outcome = engine.process(engine.Request(RESPONSES, "api.openai.com", 443, svg_body(99)),
                             engine.Settings(prefix=None))
    assert outcome.status == "repaired" and seen == {"parsing": False, "checking": False, "converting": True}
    assert gc.isenabled()
