"""Responses reasoning items end to end: a real mitmdump with llmfix, the openai SDK, the strict mock that checks
reasoning items as OpenAI does (tests/upstreams/reasoning_items_rules.py), on Codex's captured turns.

Turn 1 is streamed through llmfix (Codex's capture, answered by a gpt-5.5-like reasoning item and the captured
``view_image`` call), so llmfix learns which item followed which reasoning item. Turn 2 is Codex's capture with
that reasoning item, replayed as a client loses or moves it: without llmfix the mock answers 400 with OpenAI's
text, with llmfix 200, and the mock received the client's body with only the repair's change. Then the same
after an llmfix restart (the memory file), and the encrypted and not-persisted cases, counting upstream
requests: two the first time (the rejection, the repaired resend), one the next. (Two instances sharing Redis:
tests/e2e/test_redis_fleet.py.)
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.harness import LOOPBACK_SCRIPT, REPO_ROOT, Mitmdump
from tests.e2e.test_retry import PROBE_SCRIPT, records
from tests.upstreams.captures import capture_json
from tests.upstreams.mock import ORIGINAL_HOST_HEADER, MockUpstream
from tests.upstreams.reasoned import codex_answer, codex_turn2, responses_sse
from tests.upstreams.reasoning_items_rules import organization_for

pytestmark = pytest.mark.timeout(180)
FIX_SCRIPT = REPO_ROOT / "addon" / "fix.py"
KEY_A = "sk-test-reasoning-account-a-41f2"
KEY_B = "sk-test-reasoning-account-b-93c7"


def start(upstream: MockUpstream, confdir: Path) -> Mitmdump:
    """llmfix with its memory in ``confdir`` (the SQLite file a restart finds again), and the probe that writes
    down what mitmweb would show of each flow (``confdir/probe.jsonl``)."""
    confdir.mkdir(parents=True, exist_ok=True)
    (confdir / "probe.py").write_text(PROBE_SCRIPT)
    return Mitmdump(scripts=[FIX_SCRIPT, LOOPBACK_SCRIPT, confdir / "probe.py"], confdir=confdir,
                    options={"loopback_upstream": upstream.address, "connection_strategy": "lazy"})


@pytest.fixture(scope="module")
def proxy(upstream: MockUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mitmdump]:
    with start(upstream, tmp_path_factory.mktemp("reasoning-confdir")) as p:
        yield p


def split(body: dict[str, Any]) -> dict[str, Any]:
    """The body as the SDK's keyword arguments; what it does not name goes in ``extra_body``."""
    names = set(inspect.signature(openai.OpenAI(api_key="x").responses.create).parameters)
    kwargs = {k: v for k, v in body.items() if k in names and k != "stream"}
    return {**kwargs, "extra_body": {k: v for k, v in body.items() if k not in names and k != "stream"}}


def sdk(http: httpx.Client, key: str, base_url: str = "https://api.openai.com/v1", **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=key, http_client=http, max_retries=0, **kw)


def through(p: Mitmdump) -> httpx.Client:
    return httpx.Client(proxy=p.url, verify=p.ssl_context(), trust_env=False, timeout=60)


def stream_turn1(p: Mitmdump, upstream: MockUpstream, tag: str, *, key: str = KEY_A, turn: int = 1,
                 **kw: Any) -> dict[str, Any]:
    """Codex's turn 1 streamed through llmfix, answered with a reasoning item and the captured call; the answer."""
    answer = codex_answer(turn, organization_for({"authorization": f"Bearer {key}"}), tag, **kw)
    upstream.queue_sse(responses_sse(answer), chunk_delay=0.002)
    body = capture_json("codex/turn1_request.json")
    with through(p) as http:
        events = list(sdk(http, key).responses.create(**split(body), stream=True))
    assert events[-1].type == "response.completed"
    assert [i.id for i in events[-1].response.output] == [i["id"] for i in answer["output"]]
    return answer


def send(http: httpx.Client, body: dict[str, Any], key: str, **kw: Any) -> Any:
    """``body`` sent with the openai SDK (not streamed): its answer, or its APIStatusError."""
    try:
        return sdk(http, key, **kw).responses.create(**split({**body, "stream": False}))
    except openai.APIStatusError as e:
        return e


def without_llmfix(upstream: MockUpstream, body: dict[str, Any], key: str = KEY_A) -> openai.APIStatusError:
    """What the strict upstream answers the client's own body (no proxy at all)."""
    with httpx.Client(trust_env=False, timeout=30) as http:
        got = send(http, body, key, base_url=f"{upstream.url}/v1", default_headers={ORIGINAL_HOST_HEADER:
                                                                                    "api.openai.com"})
    assert isinstance(got, openai.APIStatusError), got
    return got


def with_llmfix(p: Mitmdump, upstream: MockUpstream, body: dict[str, Any], key: str = KEY_A,
                requests: int = 1) -> dict[str, Any]:
    """``body`` through llmfix: the client gets 200 after exactly ``requests`` upstream requests; what the
    upstream accepted."""
    before = len(upstream.requests)
    with through(p) as http:
        got = send(http, body, key)
    assert not isinstance(got, openai.APIStatusError), got
    seen = upstream.requests[before:]
    assert len(seen) == requests and seen[-1].status == 200, [(r.status, r.reason) for r in seen]
    return seen[-1].json


def sent_as(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the SDK sends it for :func:`send` (not streamed: no ``stream`` field)."""
    return {k: copy.deepcopy(v) for k, v in body.items() if k != "stream"}


def lost(body: dict[str, Any]) -> dict[str, Any]:
    """The turn as Mastra, agency-swarm or Cline replay it: the reasoning item dropped, the call's fc_ id kept."""
    out = copy.deepcopy(body)
    assert out["input"][4]["type"] == "reasoning"
    del out["input"][4]
    return out


def moved(body: dict[str, Any]) -> dict[str, Any]:
    """The turn with the reasoning item re-sorted after the call's output (a client grouping items by type)."""
    out = copy.deepcopy(body)
    out["input"].append(out["input"].pop(4))
    return out


def test_codex_own_turn_passes_byte_for_byte(proxy: Mitmdump, upstream: MockUpstream) -> None:
    turn2 = codex_turn2(stream_turn1(proxy, upstream, "own"))
    raw = json.dumps(turn2, indent=1).encode()
    before = len(upstream.requests)
    with through(proxy) as http:
        response = http.post("https://api.openai.com/v1/responses", content=raw,
                             headers={"authorization": f"Bearer {KEY_A}", "content-type": "application/json"})
    assert response.status_code == 200, response.text
    [seen] = upstream.requests[before:]
    assert seen.body == raw and seen.status == 200


def test_a_lost_reasoning_item_400_without_llmfix_200_with_it(proxy: Mitmdump, upstream: MockUpstream) -> None:
    answer = stream_turn1(proxy, upstream, "lost")
    body = lost(codex_turn2(answer))
    call = answer["output"][1]
    error = without_llmfix(upstream, body)
    assert error.status_code == 400
    assert error.body["message"] == (f"Item '{call['id']}' of type 'function_call' was provided without its "
                                     f"required 'reasoning' item: '{answer['output'][0]['id']}'.")
    got = with_llmfix(proxy, upstream, body)
    expected = sent_as(body)
    del expected["input"][4]["id"]  # only that: call_id, name, arguments, the image output, every text kept
    assert got == expected
    proxy.wait_for_output(f"pair-reasoning-items: input[4].id: function_call {call['id']}: id removed")


def test_a_moved_reasoning_item_goes_back_byte_exact(proxy: Mitmdump, upstream: MockUpstream) -> None:
    answer = stream_turn1(proxy, upstream, "moved")
    valid = codex_turn2(answer)
    body = moved(valid)
    assert without_llmfix(upstream, body).body["message"] == (
        f"Item '{answer['output'][0]['id']}' of type 'reasoning' was provided without its required following item.")
    got = with_llmfix(proxy, upstream, body)
    assert got == sent_as(valid)  # the reasoning item, encrypted_content included, exactly where it was issued
    assert got["input"][4]["encrypted_content"] == answer["output"][0]["encrypted_content"]


def test_a_message_replayed_without_its_reasoning_item(proxy: Mitmdump, upstream: MockUpstream) -> None:
    """Turn 2's answer (the captured final message, after a reasoning item) comes back in turn 3 without it."""
    answer1 = stream_turn1(proxy, upstream, "msg")
    answer2 = stream_turn1(proxy, upstream, "msg", turn=2)  # another streamed answer: a reasoning item + a message
    message = answer2["output"][1]
    body = codex_turn2(answer1)
    body["input"] += [message, {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                                                 "text": "And the other one?"}]}]
    assert without_llmfix(upstream, body).body["message"] == (
        f"Item '{message['id']}' of type 'message' was provided without its required 'reasoning' item: "
        f"'{answer2['output'][0]['id']}'.")
    got = with_llmfix(proxy, upstream, body)
    assert got["input"][-2] == {k: v for k, v in message.items() if k != "id"}
    assert got["input"][:-2] == sent_as(body)["input"][:-2]


def test_after_a_restart_the_memory_file_still_knows(upstream: MockUpstream, tmp_path: Path) -> None:
    with start(upstream, tmp_path) as first:
        answer = stream_turn1(first, upstream, "restart")
    with start(upstream, tmp_path) as again:  # a new process: what it knows comes from the memory file
        got = with_llmfix(again, upstream, lost(codex_turn2(answer)))
    expected = sent_as(lost(codex_turn2(answer)))
    del expected["input"][4]["id"]
    assert got == expected


def test_encrypted_content_of_another_account_two_requests_then_one(proxy: Mitmdump, upstream: MockUpstream) -> None:
    """Codex after an account switch: turn 1 was answered for account A, turn 2 goes out with account B's key."""
    answer = stream_turn1(proxy, upstream, "switch", key=KEY_A)
    body = codex_turn2(answer)
    error = without_llmfix(upstream, body, KEY_B)
    assert (error.status_code, error.body["code"]) == (400, "invalid_encrypted_content")
    assert error.body["message"] == (f"The encrypted content for item {answer['output'][0]['id']} could not be "
                                     "verified. Reason: Encrypted content organization_id did not match the target "
                                     "organization.")
    got = with_llmfix(proxy, upstream, body, KEY_B, requests=2)
    expected = sent_as(body)
    del expected["input"][4]  # nothing left of it for account B: no summary, content it cannot read
    del expected["input"][4]["id"]  # and the call no longer asks for it
    assert got == expected
    proxy.wait_for_output("retry: 400 responses-encrypted-content")
    [shown] = [r for r in records(proxy.confdir / "probe.jsonl") if "retried after 400" in (r["comment"] or "")]
    assert shown["marked"] == ":wrench:" and "drop-unverifiable-reasoning" in shown["comment"]
    assert "# first attempt answered 400 (responses-encrypted-content)" in shown["diff"]
    assert "# learned responses.refused" in shown["diff"]
    assert answer["output"][0]["encrypted_content"] not in shown["diff"]  # shown as its size and hash only
    # turn 3: account B's own answer (a reasoning item and a message) follows; one request, B's reasoning kept
    answer_b = stream_turn1(proxy, upstream, "switch-b", key=KEY_B, turn=2)
    turn3 = copy.deepcopy(body)
    turn3["input"] += [{"type": "reasoning", "id": answer_b["output"][0]["id"], "summary": [],
                        "encrypted_content": answer_b["output"][0]["encrypted_content"]}, answer_b["output"][1]]
    got3 = with_llmfix(proxy, upstream, turn3, KEY_B, requests=1)
    assert got3["input"][: len(got["input"])] == got["input"]  # the repaired prefix, the same as last turn
    assert got3["input"][len(got["input"]):] == turn3["input"][len(body["input"]):]


def test_store_false_item_referenced_by_id_only_404_then_one(proxy: Mitmdump, upstream: MockUpstream) -> None:
    """oh-my-pi / opencode: with ``store: false`` the reasoning item is replayed by its id only."""
    answer = stream_turn1(proxy, upstream, "byid")
    body = codex_turn2(answer)
    del body["input"][4]["encrypted_content"]
    error = without_llmfix(upstream, body)
    assert error.status_code == 404 and error.body["message"].startswith(
        f"Item with id '{answer['output'][0]['id']}' not found. Items are not persisted when `store` is set to false.")
    got = with_llmfix(proxy, upstream, body, requests=2)
    assert [i["type"] for i in got["input"]][4:] == ["function_call", "function_call_output"]
    assert "id" not in got["input"][4]
    assert with_llmfix(proxy, upstream, body, requests=1) == got  # learned: up front from now on

