"""The strict mock's reasoning-item checks (tests/upstreams/reasoning_items_rules.py): what it issued, per organization,
decides what it rejects, with OpenAI's texts, statuses and error shape; the mock server applies them to the
items it streamed itself."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from tests.upstreams.mock import MockUpstream
from tests.upstreams.reasoned import codex_answer, codex_turn2, responses_sse
from tests.upstreams.reasoning_items_rules import Ledger, Organization, organization_for

A = organization_for({"authorization": "Bearer sk-test-a"})
B = organization_for({"authorization": "Bearer sk-test-b"})


def issued(org: Organization = A, tag: str = "r") -> tuple[Ledger, dict[str, Any]]:
    ledger = Ledger()
    answer = codex_answer(1, org, tag)
    ledger.issue(org, answer)
    return ledger, codex_turn2(answer)


def error(ledger: Ledger, org: Organization, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    rejection = ledger.check(org, body)
    return None if rejection is None else (rejection.status, rejection.body["error"])


def test_codex_replaying_what_was_issued_is_accepted() -> None:
    ledger, turn2 = issued()
    assert ledger.check(A, turn2) is None
    assert turn2["store"] is False and turn2["input"][4]["type"] == "reasoning"


def test_a_call_replayed_with_its_id_but_without_its_reasoning_item() -> None:
    ledger, turn2 = issued()
    del turn2["input"][4]
    assert error(ledger, A, turn2) == (400, {
        "message": "Item 'fc_mock883ae17f536f41f8a10f_0_r' of type 'function_call' was provided without its "
                   "required 'reasoning' item: 'rs_r_1'.",
        "type": "invalid_request_error", "param": "input", "code": None})
    without_id = copy.deepcopy(turn2)
    del without_id["input"][4]["id"]
    assert ledger.check(A, without_id) is None  # pairing goes by call_id: an item without id needs nothing


def test_a_reasoning_item_not_directly_before_what_it_produced() -> None:
    ledger, turn2 = issued()
    moved = copy.deepcopy(turn2)
    moved["input"].append(moved["input"].pop(4))
    expected = (400, {"message": "Item 'rs_r_1' of type 'reasoning' was provided without its required following item.",
                      "type": "invalid_request_error", "param": "input", "code": None})
    assert error(ledger, A, moved) == expected
    no_id = copy.deepcopy(turn2)
    del no_id["input"][5]["id"]  # the following item is there, but without the id it was issued with
    assert error(ledger, A, no_id) == expected


def test_a_message_replayed_without_its_reasoning_item() -> None:
    ledger = Ledger()
    answer = codex_answer(2, A, "m")
    ledger.issue(A, answer)
    message = answer["output"][1]
    body = {"model": "gpt-5.5", "input": [{"role": "user", "content": "hi"}, message], "store": False}
    assert error(ledger, A, body)[1]["message"] == (
        "Item 'msg_mock0089f5a8a9324f2c8a64_m' of type 'message' was provided without its required 'reasoning' "
        "item: 'rs_m_2'.")


def test_encrypted_content_is_bound_to_the_organization_that_sealed_it() -> None:
    ledger, turn2 = issued(A)
    assert error(ledger, B, turn2) == (400, {
        "message": "The encrypted content for item rs_r_1 could not be verified. Reason: Encrypted content "
                   "organization_id did not match the target organization.",
        "type": "invalid_request_error", "param": None, "code": "invalid_encrypted_content"})
    tampered = copy.deepcopy(turn2)
    tampered["input"][4]["encrypted_content"] = A.seal("rs_other")
    assert "item_id did not match the target item id" in error(ledger, A, tampered)[1]["message"]
    garbage = copy.deepcopy(turn2)
    garbage["input"][4]["encrypted_content"] = "gAAAABnot-a-token"
    assert "could not be decrypted or parsed" in error(ledger, A, garbage)[1]["message"]
    unnamed = copy.deepcopy(turn2)
    del unnamed["input"][4]["id"]
    content = turn2["input"][4]["encrypted_content"]
    assert error(ledger, B, unnamed)[1]["message"] == (
        f"The encrypted content {content[:4]}...{content[-4:]} could not be verified.")
    assert ledger.check(A, unnamed) is None  # the content names its item: Codex may send it without the id


def test_with_store_false_an_item_the_server_would_look_up_is_not_found() -> None:
    ledger, turn2 = issued()
    by_id = copy.deepcopy(turn2)
    del by_id["input"][4]["encrypted_content"]
    text = ("Item with id 'rs_r_1' not found. Items are not persisted when `store` is set to false. Try again with "
            "`store` set to true, or remove this item from your input.")
    assert error(ledger, A, by_id) == (404, {"message": text, "type": "invalid_request_error", "param": "input",
                                             "code": None})
    reference = {"model": "m", "store": False, "input": [{"type": "item_reference", "id": "msg_9"}]}
    assert error(ledger, A, reference)[0] == 404
    assert ledger.check(A, {**reference, "store": True}) is None
    with_summary = copy.deepcopy(by_id)
    with_summary["input"][4]["summary"] = [{"type": "summary_text", "text": "I looked at it."}]
    assert ledger.check(A, with_summary) is None


def test_ids_the_organization_did_not_issue_need_nothing() -> None:
    ledger, turn2 = issued(A)
    other = Ledger()
    del turn2["input"][4]  # fc_… without its reasoning item: unknown to an organization that never issued it
    assert other.check(A, turn2) is None
    assert ledger.check(B, turn2) is None


def test_previous_response_id_holds_the_chain() -> None:
    ledger = Ledger()
    answer = codex_answer(1, A, "chain")
    ledger.issue(A, answer)
    call = answer["output"][1]
    body = {"model": "m", "previous_response_id": answer["id"], "input": [call], "store": False}
    assert ledger.check(A, body) is None  # its reasoning item is in the referenced response
    assert ledger.check(A, {**body, "previous_response_id": "resp_unknown"}) is not None


@pytest.fixture
def up() -> Any:
    with MockUpstream(rules="openai") as mock:
        yield mock


def test_the_mock_remembers_what_it_streamed_and_checks_the_next_request(up: MockUpstream) -> None:
    answer = codex_answer(1, A, "srv")
    up.queue_sse(responses_sse(answer))
    headers = {"authorization": "Bearer sk-test-a"}
    turn1 = {"model": "gpt-5.5", "stream": True, "input": [{"role": "user", "content": "hi"}]}
    with httpx.Client(timeout=10) as http:
        assert http.post(f"{up.url}/v1/responses", json=turn1, headers=headers).status_code == 200
        turn2 = codex_turn2(answer)
        assert http.post(f"{up.url}/v1/responses", json=turn2, headers=headers).status_code == 200
        del turn2["input"][4]
        lost = http.post(f"{up.url}/v1/responses", json=turn2, headers=headers)
        assert lost.status_code == 400 and "required 'reasoning' item" in lost.json()["error"]["message"]
        assert up.requests[-1].reason == "reasoning-missing"
        other = http.post(f"{up.url}/v1/responses", json=codex_turn2(answer), headers={"authorization": "Bearer sk-b"})
        assert other.json()["error"]["code"] == "invalid_encrypted_content"
    assert json.loads(up.requests[0].body)["input"] == turn1["input"]
