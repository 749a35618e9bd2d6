"""Gemini's OpenAI-compatible door through a real mitmdump WITH llmfix, against the strict door mock
(tests/upstreams/gemini_door.py; the bare-proxy controls are tests/e2e/test_gemini_door_clients.py).

The ``openai`` SDK at ``https://generativelanguage.googleapis.com/v1beta/openai/``: turn 1 streamed through llmfix
(the signature on a trailing index-less delta), turn 2 replayed without ``extra_content`` — the missing-signature
400 through a bare proxy, 200 through llmfix with the very signature the door issued; the same after an llmfix
restart (memory: the sqlite file in its confdir) and across two llmfix instances sharing one real redis-server; a
session llmfix never heard gets Google's dummy; an MCP-style tool schema is fitted. Nothing of a signature or of the
key reaches llmfix's log. Every proxy, mock and client is on loopback and bounded in time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.e2e import door_cli
from tests.e2e.codex_cli import changes
from tests.e2e.gemini_cli import start_proxy
from tests.e2e.harness import Mitmdump
from tests.redis_server import RedisServer, needs_redis, until
from tests.upstreams.gemini_canned import function_calls, text_answer
from tests.upstreams.mock import MockUpstream

pytestmark = pytest.mark.timeout(240)
DOOR = "/v1beta/openai/chat/completions"
DUMMY = "skip_thought_signature_validator"
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
PROMPT = [{"role": "user", "content": "Read a.md and b.md."}]
DONE = "alpha and beta"


@pytest.fixture
def upstream() -> Iterator[MockUpstream]:
    with MockUpstream(rules="by-host") as up:
        yield up


def memory_file(confdir: Path) -> dict[str, str]:
    """llmfix's memory as a user has it: a sqlite file in its confdir (start_proxy's default is ``:memory:``)."""
    return {"llmfix_memory": str(confdir / "llmfix-memory.sqlite3")}


def turn1(upstream: MockUpstream, proxy: Mitmdump) -> list[dict[str, Any]]:
    """Turn 1 streamed through ``proxy``: two parallel calls, the first signed; the calls as a careful client keeps
    them (``extra_content`` included)."""
    upstream.gemini.queue(function_calls(("read_file", {"path": "a.md"}), ("read_file", {"path": "b.md"})))
    calls = door_cli.stream_calls(door_cli.openai_client(proxy), model=door_cli.MODEL, messages=PROMPT, tools=TOOLS)
    issued = upstream.gemini.sent[-1].issued
    assert [c["id"] for c in calls] == [c["id"] for c in issued] and calls[0]["extra_content"] == issued[0][
        "extra_content"]
    return calls


def turn2(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*PROMPT, {"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": c["id"], "content": f"text of {n}"} for n, c in enumerate(calls))]


def signature(call: dict[str, Any]) -> str:
    return call["extra_content"]["google"]["thought_signature"]


def replay(upstream: MockUpstream, proxy: Mitmdump, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Turn 2 without ``extra_content`` through ``proxy``: answered, and the body the door got."""
    upstream.gemini.queue(text_answer(DONE))
    before = len(upstream.requests)
    answer = door_cli.openai_client(proxy).chat.completions.create(
        model=door_cli.MODEL, messages=turn2(door_cli.without_extra_content(calls)), tools=TOOLS)
    assert answer.choices[0].message.content == DONE
    [seen] = upstream.requests[before:]
    assert (seen.path, seen.status) == (DOOR, 200)
    return seen.json


def restored(seen: dict[str, Any], calls: list[dict[str, Any]], proxy: Mitmdump) -> None:
    """The door got the very signature it issued, on its call, and nothing else changed; llmfix logged it without
    its value."""
    [assistant] = [m for m in seen["messages"] if m["role"] == "assistant"]
    assert signature(assistant["tool_calls"][0]) == signature(calls[0])  # byte for byte
    assert assistant["tool_calls"] == [calls[0], door_cli.without_extra_content(calls)[1]]
    assert seen["messages"] == turn2([calls[0], *door_cli.without_extra_content(calls)[1:]])
    record = next(c for c in changes(proxy) if c["repair"] == "restore-tool-call-signatures")
    assert record["location"] == "messages[1].tool_calls[0].extra_content.google.thought_signature"
    assert "from memory" in record["summary"]
    for text in (json.dumps(changes(proxy)), proxy.output()):
        assert signature(calls[0]) not in text and door_cli.KEY not in text


def test_turn2_without_extra_content_is_refused_bare_and_answered_through_llmfix(upstream, tmp_path) -> None:
    conf = tmp_path / "conf"
    with start_proxy(upstream, conf, llmfix=True, **memory_file(conf)) as proxy:
        calls = turn1(upstream, proxy)
        with start_proxy(upstream, tmp_path / "bare") as bare, pytest.raises(openai.BadRequestError) as refused:
            door_cli.openai_client(bare).chat.completions.create(  # the control: no llmfix
                model=door_cli.MODEL, messages=turn2(door_cli.without_extra_content(calls)), tools=TOOLS)
        assert refused.value.status_code == 400 and isinstance(refused.value.body, list)  # Google's list
        assert "missing a thought_signature" in json.dumps(refused.value.body)
        seen = replay(upstream, proxy, calls)
        restored(seen, calls, proxy)
        # the client that kept extra_content: its turn 2 leaves byte for byte
        upstream.gemini.queue(text_answer(DONE))
        before = len(upstream.requests)
        door_cli.openai_client(proxy).chat.completions.create(model=door_cli.MODEL, messages=turn2(calls),
                                                              tools=TOOLS)
        [kept] = upstream.requests[before:]
        assert kept.status == 200 and kept.json["messages"] == turn2(calls)
    assert [c["repair"] for c in changes(proxy)] == ["restore-tool-call-signatures"]  # once, for the lost one


def test_after_an_llmfix_restart_the_signature_comes_from_its_memory_file(upstream, tmp_path) -> None:
    conf = tmp_path / "conf"
    with start_proxy(upstream, conf, llmfix=True, **memory_file(conf)) as first:
        calls = turn1(upstream, first)
    assert not first.running
    with start_proxy(upstream, conf, llmfix=True, **memory_file(conf)) as second:
        seen = replay(upstream, second, calls)
        restored(seen, calls, second)


@needs_redis
def test_two_llmfix_instances_share_the_signature_through_redis(upstream, tmp_path,
                                                                 redis_server: RedisServer) -> None:
    shared = {"llmfix_memory": redis_server.url, "llmfix_memory_timeout": "2s"}

    def heard() -> bool:
        with redis_server.client() as c:
            return bool(list(c.scan_iter(match=b"llmfix:reasoning-key:chat.thought_signature:sig *")))

    with start_proxy(upstream, tmp_path / "a", llmfix=True, **shared) as a, \
            start_proxy(upstream, tmp_path / "b", llmfix=True, **shared) as b:
        calls = turn1(upstream, a)
        assert until(heard, 10.0)
        seen = replay(upstream, b, calls)
        restored(seen, calls, b)
    for key, value in redis_server.dump().items():
        assert door_cli.KEY.encode() not in key + value


def test_a_session_llmfix_never_heard_gets_googles_dummy(upstream, tmp_path) -> None:
    with start_proxy(upstream, tmp_path / "bare") as bare:
        calls = turn1(upstream, bare)  # turn 1 went past another proxy
    conf = tmp_path / "conf"
    with start_proxy(upstream, conf, llmfix=True, **memory_file(conf)) as proxy:
        seen = replay(upstream, proxy, calls)
    [assistant] = [m for m in seen["messages"] if m["role"] == "assistant"]
    assert assistant["tool_calls"] == [{**door_cli.without_extra_content(calls)[0], "extra_content": {
        "google": {"thought_signature": DUMMY}}}, door_cli.without_extra_content(calls)[1]]
    [record] = changes(proxy)
    assert record["repair"] == "restore-tool-call-signatures" and record["after"] == DUMMY
    assert "Google's stand-in" in record["summary"]


MCP_TOOL = {"type": "function", "function": {"name": "search_files", "description": "Search files (an MCP tool)",
                                             "parameters": {
    "$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": False,
    "properties": {"pattern": {"type": "string", "description": "a glob"},
                   "limit": {"type": ["integer", "null"], "exclusiveMinimum": 0}},
    "required": ["pattern"]}}}


def test_an_mcp_style_tool_schema_is_fitted_and_answered(upstream, tmp_path) -> None:
    messages = [{"role": "user", "content": "find the notes"}]
    with start_proxy(upstream, tmp_path / "bare") as bare, pytest.raises(openai.BadRequestError) as refused:
        door_cli.openai_client(bare).chat.completions.create(model=door_cli.MODEL, messages=messages,
                                                             tools=[MCP_TOOL])
    assert 'Unknown name \\"$schema\\"' in json.dumps(refused.value.body)
    upstream.gemini.queue(text_answer(DONE))
    with start_proxy(upstream, tmp_path / "conf", llmfix=True) as proxy:
        answer = door_cli.openai_client(proxy).chat.completions.create(model=door_cli.MODEL, messages=messages,
                                                                       tools=[MCP_TOOL])
    assert answer.choices[0].message.content == DONE
    fitted = upstream.requests[-1].json["tools"][0]["function"]
    assert fitted["name"] == "search_files" and set(fitted["parameters"]["properties"]) == {"pattern", "limit"}
    assert "$schema" not in json.dumps(fitted) and upstream.requests[-1].status == 200


def test_a_signature_the_door_refuses_is_repaired_and_resent_once(upstream, tmp_path) -> None:
    """A signature from another account (a key switched mid-session): ``Corrupted thought signature.``; llmfix
    learns that it is refused and resends with the one the door issued with that call (heard in turn 1), and the next
    turn is repaired before it leaves."""
    conf = tmp_path / "conf"
    with start_proxy(upstream, conf, llmfix=True, **memory_file(conf)) as proxy:
        calls = turn1(upstream, proxy)
        foreign = upstream.gemini.ledger.sign_call("read_file", {"path": "a.md"}, signer="another-account")
        replayed = [{**calls[0], "extra_content": {"google": {"thought_signature": foreign}}}, calls[1]]
        client = door_cli.openai_client(proxy)
        upstream.gemini.queue(text_answer(DONE))
        before = len(upstream.requests)
        answer = client.chat.completions.create(model=door_cli.MODEL, messages=turn2(replayed), tools=TOOLS)
        assert answer.choices[0].message.content == DONE
        refused, resent = upstream.requests[before:]
        assert (refused.status, refused.reason, resent.status) == (400, "signature-invalid", 200)
        assert signature(resent.json["messages"][1]["tool_calls"][0]) == signature(calls[0])
        later = [*turn2(replayed), {"role": "assistant", "content": DONE}, {"role": "user", "content": "again"}]
        upstream.gemini.queue(text_answer(DONE))
        before = len(upstream.requests)
        client.chat.completions.create(model=door_cli.MODEL, messages=later, tools=TOOLS)
        [seen] = upstream.requests[before:]  # repaired up front: one request
        assert seen.status == 200 and foreign not in seen.body.decode()
        assert seen.json["messages"][1]["tool_calls"] == door_cli.without_extra_content(calls)  # an older turn's
        # refused signature is taken out (the door checks none there); nothing else changed
        assert seen.json["messages"][2:] == later[2:]
        assert foreign not in proxy.output() + json.dumps(changes(proxy))
