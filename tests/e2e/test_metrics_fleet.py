"""End to end: two llmfix instances sharing one real redis-server, each with its own metrics and health endpoint.

Each instance counts only its own requests. Redis killed: requests are still answered by both, and each says so
where an operator and a load balancer look — ``llmfix_memory_up{backend="redis"}`` drops to 0, memory operations
that went on without Redis are counted, ``/healthz`` still answers 200 (llmfix fails open) with ``"up": false``.
Redis back on the same port: both say it is up again, without a restart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.harness import Mitmdump, loopback_proxy
from tests.e2e.scrape import health, metrics_url, scrape
from tests.redis_server import BACK, UNREACHABLE, RedisServer, needs_redis
from tests.upstreams.mock import MockUpstream

pytestmark = [needs_redis, pytest.mark.timeout(180)]
HELLO = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}).encode()
CHAT = "https://api.openai.com/v1/chat/completions"
TIMEOUT_S = 2  # llmfix_memory_timeout


@pytest.fixture(scope="module")
def fleet(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[tuple[Mitmdump, str], tuple[Mitmdump, str]]]:
    options = {"llmfix_memory": redis_server.url, "llmfix_memory_timeout": f"{TIMEOUT_S}s",
               "llmfix_metrics": "127.0.0.1:0"}
    with MockUpstream(rules="by-host") as up, \
            loopback_proxy(up, tmp_path_factory.mktemp("conf-a"), **options) as a, \
            loopback_proxy(up, tmp_path_factory.mktemp("conf-b"), **options) as b:
        for p in (a, b):
            p.wait_for_output("shared through redis://127.0.0.1:")  # each reached Redis once
        yield (a, metrics_url(a)), (b, metrics_url(b))


def post(p: Mitmdump) -> int:
    with httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=60) as c:
        return c.post(CHAT, content=HELLO, headers={"content-type": "application/json"}).status_code


def test_each_instance_exposes_its_own_metrics(fleet) -> None:
    (a, url_a), (b, url_b) = fleet
    assert url_a != url_b
    assert post(a) == 200
    assert [post(b), post(b)] == [200, 200]
    for url, n in ((url_a, 1), (url_b, 2)):
        m = scrape(url)
        assert m.value("llmfix_requests_total") == n
        assert m.value("llmfix_request_seconds_count") == n
        assert m.value("llmfix_memory_up", backend="redis") == 1
        assert m.value("llmfix_memory_up", backend="sqlite") == 0 and "sqlite" not in m.values_of("backend")
        assert m.value("llmfix_memory_fail_open_total") == 0
        assert health(url) == (200, {"status": "ok", "memory": {"backend": "redis", "up": True}})


def test_redis_killed_both_say_so_and_answer_then_redis_back(fleet, redis_server: RedisServer) -> None:
    (a, url_a), (b, url_b) = fleet
    before = {url: scrape(url).value("llmfix_requests_total") for url in (url_a, url_b)}
    redis_server.kill()
    for p in (a, b, a, b):
        assert post(p) == 200  # answered without shared memory
    for p, url in ((a, url_a), (b, url_b)):
        p.wait_for_output(UNREACHABLE, timeout=TIMEOUT_S * 5)  # logged after the state changed
        m = scrape(url)
        assert m.value("llmfix_memory_up", backend="redis") == 0
        assert m.value("llmfix_memory_fail_open_total", backend="redis") >= 1
        assert m.values_of("reason") <= {"down", "timeout", "error"}
        assert m.value("llmfix_requests_total") == before[url] + 2
        assert health(url) == (200, {"status": "ok", "memory": {"backend": "redis", "up": False}})
    redis_server.start()  # same port, empty
    for p, url in ((a, url_a), (b, url_b)):
        p.wait_for_output(BACK, timeout=TIMEOUT_S * 5)  # said after the state changed back
        assert scrape(url).value("llmfix_memory_up", backend="redis") == 1
        assert health(url) == (200, {"status": "ok", "memory": {"backend": "redis", "up": True}})
        assert p.output().count(UNREACHABLE) == 1 and p.output().count(BACK) == 1
