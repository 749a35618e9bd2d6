"""Reasoning state across a fleet: two real mitmdump instances with llmfix share one real redis-server.

- Droid → DeepSeek: turn 1 streams through instance A, turn 2 reaches B: B gives the reasoning A heard back.
- A session back from Kimi: B is rejected once for Kimi's block and resends without it (two upstream requests);
  the next turn reaches A, which drops it up front (one request): what B's rejection taught is shared.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e import test_redis_fleet
from tests.e2e.reasoning_client import KEY, post, since
from tests.e2e.test_reasoning_content import turn1, with_reasoning
from tests.e2e.test_thinking_signatures import answer_b, next_turn, switched, without_foreign_thinking
from tests.redis_server import RedisServer, needs_redis, until
from tests.upstreams.reasoning_canned import anthropic_sse
from tests.upstreams.reasoning_sessions import droid

pytestmark = [needs_redis, pytest.mark.timeout(240)]
ANTHROPIC = "https://api.anthropic.com/v1/messages"
# the same fleet as the Redis fleet tests (two instances, one Redis: conftest's, a mock by host), this module's own
fleet = test_redis_fleet.fleet


def shared(server: RedisServer, pattern: bytes) -> Callable[[], bool]:
    def check() -> bool:
        with server.client() as c:
            return bool(list(c.scan_iter(match=b"llmfix:reasoning-key:" + pattern)))
    return check


def test_droid_turn2_on_b_gets_the_reasoning_streamed_through_a(fleet, upstream, redis_server) -> None:
    a, b = fleet
    session = droid()
    turn1(a, upstream, "api.deepseek.com", session)
    assert until(shared(redis_server, b"chat.reasoning_content:call *"), 5.0)  # by upstream and call, hashed
    before = len(upstream.requests)
    response = post(b, "https://api.deepseek.com/v1/chat/completions", session.turn2)
    assert response.status_code == 200, response.text
    [seen] = since(upstream, before)
    assert seen.json == with_reasoning(session.turn2, session.at)
    b.wait_for_output("restore-reasoning-content")


def test_what_b_s_rejection_taught_reaches_a(fleet, upstream, redis_server) -> None:
    a, b = fleet
    body = switched(a, upstream, "https://api.kimi.com/coding", "kimi-k3", signer="kimi")
    answer = answer_b(upstream)
    before = len(upstream.requests)
    assert post(b, ANTHROPIC, body).status_code == 200
    assert [r.status for r in since(upstream, before)] == [400, 200]
    assert until(shared(redis_server, b"messages.foreign_thinking:@*"), 5.0)
    later = next_turn(body, answer)
    upstream.queue_sse(anthropic_sse(upstream.ledger, "claude-opus-5-5", "Both read.", text="Red and blue."))
    before = len(upstream.requests)
    assert post(a, ANTHROPIC, later).status_code == 200
    [seen] = since(upstream, before)
    assert seen.json == without_foreign_thinking(later)


def test_no_key_in_redis_or_output(fleet, redis_server) -> None:
    for key, value in redis_server.dump().items():
        assert key.startswith(b"llmfix:") and KEY.encode() not in key + value
    for p in fleet:
        assert KEY not in p.output()
