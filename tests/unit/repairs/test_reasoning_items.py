"""pair-reasoning-items and drop-unverifiable-reasoning on Codex's captured turns, through the engine: what the
memory learned from the streamed answer, or what the upstream's rejection taught, decides; the strict mock's
checks (tests/upstreams/reasoning_items_rules.py) judge the result; valid turns leave byte-identical."""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
import pytest

from llmfix import engine
from llmfix.body.conversation import loads, parse
from llmfix.dialects.registry import RESPONSES
from llmfix.dialects.responses import learn as lr
from llmfix.memory.learn import StreamLearner
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import Reasoning
from llmfix.profiles import ProfileTable
from llmfix.repairs import drop_unverifiable_reasoning, pair_reasoning_items, pipeline, settled
from llmfix.repairs.base import Context
from llmfix.retry import decide, rejections
from llmfix.retry.learned import LearnedQuirks
from tests.upstreams import codex_ws
from tests.upstreams.reasoned import codex_answer, codex_turn2, reasoning_item, responses_sse
from tests.upstreams.reasoning_items_rules import Ledger, Organization

HOST = "api.openai.com"
UP = "api.openai.com:443/responses"
A, B = Organization("org-a"), Organization("org-b")


def learned_store(*answers: dict[str, Any]) -> SqliteReasoningStore:
    """A memory that saw these answers streamed, as the proxy's learner sees them."""
    store = SqliteReasoningStore(":memory:")
    for answer in answers:
        learner = StreamLearner("responses", lambda _: None, on_reasoning=store.note, upstream=UP)
        learner.feed(responses_sse(answer).encode())
        learner.feed(b"")
    return store


def run(body: dict[str, Any], store: Any, *, prefix: bool = True) -> engine.Outcome:
    settings = engine.Settings(reasoning=store, prefix=engine.PrefixCache() if prefix else None)
    return engine.process(engine.Request(RESPONSES, HOST, 443, json.dumps(body).encode()), settings)


def sent(body: dict[str, Any], outcome: engine.Outcome) -> dict[str, Any]:
    return orjson.loads(outcome.body) if outcome.body is not None else body


@pytest.fixture
def turn1() -> dict[str, Any]:
    return codex_answer(1, A, "unit")


@pytest.fixture
def ledger(turn1: dict[str, Any]) -> Ledger:
    ledger = Ledger()
    ledger.issue(A, turn1)
    return ledger


def test_codex_own_turn_is_byte_identical(turn1: dict[str, Any], ledger: Ledger) -> None:
    body = codex_turn2(turn1)
    assert ledger.check(A, body) is None
    outcome = run(body, learned_store(turn1))
    assert outcome.status == "untouched"


def test_a_lost_reasoning_item_takes_the_call_id_with_it(turn1: dict[str, Any], ledger: Ledger) -> None:
    body = codex_turn2(turn1)
    del body["input"][4]
    assert ledger.check(A, body) is not None
    outcome = run(body, learned_store(turn1))
    assert outcome.repairs == ["pair-reasoning-items"]
    got = sent(body, outcome)
    assert ledger.check(A, got) is None
    expected = copy.deepcopy(body)
    del expected["input"][4]["id"]
    assert got == expected  # nothing else: call_id, name, arguments, status, every other item as sent
    assert outcome.lines == (f"pair-reasoning-items: input[4].id: function_call {turn1['output'][1]['id']}: id "
                             "removed, its reasoning item rs_unit_1 is not in the request (the item stays, with its "
                             "call_id, name, arguments and content)",)


def test_a_moved_reasoning_item_goes_back_before_the_call(turn1: dict[str, Any], ledger: Ledger) -> None:
    valid = codex_turn2(turn1)
    body = copy.deepcopy(valid)
    body["input"].append(body["input"].pop(4))  # after the call's output, where a client re-sorted it
    assert ledger.check(A, body) is not None
    got = sent(body, run(body, learned_store(turn1)))
    assert got == valid and ledger.check(A, got) is None


def test_a_call_put_between_the_reasoning_item_and_its_message_moves_back_after_it() -> None:
    answer = {"id": "resp_c", "output": [reasoning_item(A, "rs_c"), message("msg_c"), call("fc_c", "call_c")]}
    ledger = Ledger()
    ledger.issue(A, answer)
    r, m, c = answer["output"]
    body = {"model": "gpt-5", "input": [user("hi"), r, c, output("call_c"), m, user("next")]}  # Continue's order
    assert "following item" in ledger.check(A, body).message
    got = sent(body, run(body, learned_store(answer)))
    assert [i.get("id") for i in got["input"]] == [None, "rs_c", "msg_c", "fc_c", None, None]
    assert ledger.check(A, got) is None


def test_a_reasoning_item_whose_call_was_dropped_goes_and_so_do_the_ids_that_needed_it() -> None:
    answer = {"id": "resp_d", "output": [reasoning_item(A, "rs_d"), call("fc_d1", "call_d1"), call("fc_d2", "call_d2")]}
    ledger = Ledger()
    ledger.issue(A, answer)
    r, _dropped, c2 = answer["output"]
    body = {"model": "gpt-5", "input": [user("hi"), r, c2, output("call_d1"), output("call_d2")]}
    assert "following item" in ledger.check(A, body).message  # a client dropped fc_d1, the item rs_d led to
    got = sent(body, run(body, learned_store(answer)))
    assert "rs_d" not in json.dumps(got) and "fc_d2" not in json.dumps(got)
    assert {k: v for k, v in c2.items() if k != "id"} in got["input"]  # the call stays, without its id
    assert ledger.check(A, got) is None


def test_without_memory_or_with_server_state_nothing_is_guessed(turn1: dict[str, Any]) -> None:
    body = codex_turn2(turn1)
    del body["input"][4]
    assert run(body, SqliteReasoningStore(":memory:")).status == "untouched"
    assert run(body, None).status == "untouched"
    chained = {**body, "previous_response_id": turn1["id"], "input": body["input"][4:]}
    assert run(chained, learned_store(turn1)).status == "untouched"  # the reasoning item may be in the chain


def rejected(found_text: str, status: int = 400) -> rejections.Match:
    found = rejections.match("responses", status, json.dumps({"error": {"message": found_text}}).encode())
    assert found is not None
    return found


async def resend(body: dict[str, Any], found: rejections.Match, store: Any) -> decide.Decision:
    raw = json.dumps(body).encode()
    settings = engine.Settings(quirks=LearnedQuirks(None, 3600), reasoning=store)
    return await decide.decide(found, 400, engine.Request(RESPONSES, HOST, 443, raw), raw, settings)


async def test_the_rejection_naming_both_ids_is_enough_without_memory(turn1: dict[str, Any], ledger: Ledger) -> None:
    body = codex_turn2(turn1)
    del body["input"][4]
    store = SqliteReasoningStore(":memory:")
    d = await resend(body, rejected(ledger.check(A, body).message), store)
    assert d.outcome is not None
    got = orjson.loads(d.outcome.body)
    assert "id" not in got["input"][4] and ledger.check(A, got) is None
    decide.learn(d, engine.Settings(reasoning=store))
    assert sent(body, run(body, store)) == got  # the next request: repaired up front, one upstream request


async def test_a_reasoning_item_rejected_alone_without_memory_goes_with_its_run_ids(turn1: dict[str, Any],
                                                                                 ledger: Ledger) -> None:
    body = codex_turn2(turn1)
    body["input"].append(body["input"].pop(4))
    d = await resend(body, rejected(ledger.check(A, body).message), SqliteReasoningStore(":memory:"))
    got = orjson.loads(d.outcome.body)
    assert [i["type"] for i in got["input"]][4:] == ["function_call", "function_call_output"]
    assert ledger.check(A, got) is None


@pytest.mark.parametrize("summary", [None, "Looked at x.png."])
async def test_content_another_organization_sealed_goes_after_its_rejection(turn1: dict[str, Any], ledger: Ledger,
                                                                         summary: str | None) -> None:
    answer = codex_answer(1, A, f"enc{bool(summary)}", summary=summary)
    ledger.issue(A, answer)
    body = codex_turn2(answer)
    store = learned_store(answer)
    assert run(body, store).status == "untouched"  # valid for org A; org B says it cannot verify it
    text = Ledger().check(B, body).message
    assert "could not be verified" in text
    d = await resend(body, rejected(text), store)
    got = orjson.loads(d.outcome.body)
    if summary is None:  # nothing left of the reasoning item: dropped, and the call's id with it
        assert [i["type"] for i in got["input"]][4:] == ["function_call", "function_call_output"]
        assert "id" not in got["input"][4]
    else:  # its summary stays, without the content; the call keeps its id (its reasoning item is there)
        assert got["input"][4] == {k: v for k, v in body["input"][4].items() if k != "encrypted_content"}
        assert got["input"][5]["id"] == body["input"][5]["id"]
    assert Ledger().check(B, got) is None
    assert all("gAAAAB" not in json.dumps(r) for r in d.outcome.records)  # only "<encrypted … sha256:…>"
    decide.learn(d, engine.Settings(reasoning=store))
    later = copy.deepcopy(body)
    later["input"] += [message("msg_new"), user("and now?")]
    assert sent(later, run(later, store))["input"][: len(got["input"])] == got["input"]  # up front, and prefix-stable


async def test_not_persisted_items_are_dropped_or_lose_their_id(turn1: dict[str, Any], ledger: Ledger) -> None:
    body = codex_turn2(turn1)
    del body["input"][4]["encrypted_content"]  # referenced by id only, with store:false
    body["input"].insert(0, {"type": "item_reference", "id": "msg_old"})
    rejection = ledger.check(A, body)
    assert rejection.status == 404
    d = await resend(body, rejected(rejection.message, 404), learned_store(turn1))
    got = orjson.loads(d.outcome.body)
    assert ledger.check(A, got) is None
    assert "rs_unit_1" not in json.dumps(got) and "id" not in got["input"][4]
    assert got["input"][0]["type"] == "message"  # the item_reference went too: with store:false nothing is held


def test_changes_and_fast_path_agree_turn_after_turn(turn1: dict[str, Any]) -> None:
    """A valid session is settled from its new items each turn; a teaching makes the whole check run again."""
    store = learned_store(turn1)
    ctx = engine_context(store)
    body = codex_turn2(turn1)
    items = parse_items(body)
    repairs = [drop_unverifiable_reasoning.REPAIR, pair_reasoning_items.REPAIR]
    states, sure = settled.settle(repairs, None, items[:4], 0, ctx)
    assert sure == 2
    states, sure = settled.settle(repairs, states, items, 4, ctx)
    assert sure == 2 and states is not None
    store.note([lr.taught_order(body["input"][5]["id"], "rs_elsewhere", UP), Reasoning(lr.ORDER, lr.marker(UP),
                                                                                        "1 taught", UP)])
    assert settled.settle(repairs, states, items, len(items), ctx) == (None, 1)
    assert pipeline.run(items, ctx, repairs)[1]  # and the repair does act on it


def engine_context(store: Any) -> Context:
    resolved = ProfileTable().resolve(HOST, 443, "gpt-5.5", RESPONSES)
    return Context(RESPONSES, resolved.profile, "gpt-5.5", resolved.modalities, None, reasoning=store, upstream=UP,
                   server_state=False)


def parse_items(body: dict[str, Any]) -> list[Any]:
    conv = parse(RESPONSES, loads(json.dumps(body).encode()))
    assert conv is not None
    return conv.items


# -- small builders ----------------------------------------------------------------------------------------------


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def message(item_id: str) -> dict[str, Any]:
    return {"id": item_id, "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": f"text of {item_id}", "annotations": []}]}


def call(item_id: str, call_id: str) -> dict[str, Any]:
    return {"id": item_id, "type": "function_call", "status": "completed", "call_id": call_id, "name": "Read",
            "arguments": json.dumps({"path": f"{call_id}.png"})}


def output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": f"result of {call_id}"}


def test_codex_over_the_websocket_stays_byte_identical_and_a_resumed_history_is_judged_whole() -> None:
    """Codex 0.171's socket (tests/fixtures/codex-ws/): each ``response.create`` chains on the last
    response and carries only new items; answered by a reasoning model (a reasoning item before each answer's
    items), every server event fed to the learner one by one, as the WebSocket transport does. Each message
    leaves byte-identical. A resume sends the whole history on a fresh socket: as issued it is untouched too;
    without its reasoning item, the call loses its id."""
    exchange = {"client_messages": [{"message": m, "server_events": codex_ws.server_events(n)}
                                    for n, m in enumerate(codex_ws.messages())]}
    store = SqliteReasoningStore(":memory:")
    learner = StreamLearner("responses", lambda _: None, on_reasoning=store.note, upstream=UP)
    answered: list[list[dict[str, Any]]] = []
    for n, turn in enumerate(exchange["client_messages"]):
        message = turn["message"]
        assert run(message, store).status == "untouched", message.get("previous_response_id")
        [done] = [e["response"] for e in turn["server_events"] if e["type"] == "response.completed"]
        if done["output"]:
            done = {**done, "output": [reasoning_item(A, f"rs_ws_{n}"), *done["output"]]}
        for block in responses_sse(done).split("\n\n"):
            if block:
                learner.feed_event(block.split("data: ", 1)[1])
        answered.append(done["output"])
    learner.end()
    history: list[dict[str, Any]] = []
    for turn, output in zip(exchange["client_messages"], answered[:-1], strict=False):
        history += [*turn["message"]["input"], *output]  # the answer to each message, before the next one
    history += exchange["client_messages"][-1]["message"]["input"]
    resumed = {k: v for k, v in exchange["client_messages"][-1]["message"].items() if k != "previous_response_id"}
    resumed["input"] = history
    assert [i["type"] for i in history][-3:] == ["reasoning", "function_call", "function_call_output"]
    assert run(resumed, store).status == "untouched"
    lost = copy.deepcopy(resumed)
    del lost["input"][-3]
    outcome = run(lost, store)
    assert outcome.repairs == ["pair-reasoning-items"] and "id" not in sent(lost, outcome)["input"][-2]


async def test_the_older_text_naming_the_content_and_a_compaction_item() -> None:
    """``The encrypted content gAAA...DQ== could not be verified.`` names a few characters of a content, not an
    item: any reasoning item whose content fits is enough to know the body's encrypted reasoning is refused. A
    compaction item named instead (``cmp_…``) teaches nothing: its content is the compacted history itself."""
    answer = codex_answer(1, A, "old")
    body = codex_turn2(answer)
    del body["input"][4]["id"]  # Codex sends it without its id: the server names the content
    text = Ledger().check(B, body).message
    assert text == f"The encrypted content {text.split()[3]} could not be verified." and "..." in text
    d = await resend(body, rejected(text), learned_store(answer))
    assert d.outcome is not None
    assert [i["type"] for i in orjson.loads(d.outcome.body)["input"]][4:] == ["function_call", "function_call_output"]
    compacted = {**body, "input": [{"type": "compaction", "id": "cmp_1", "encrypted_content": B.seal("cmp_1")},
                                   *body["input"]]}
    named = "The encrypted content for item cmp_1 could not be verified. Reason: Encrypted content could not be " \
            "decrypted or parsed."
    d = await resend(compacted, rejected(named), learned_store(answer))
    assert d.outcome is None and d.why == "not resent: the rejection names nothing llmfix can repair"
