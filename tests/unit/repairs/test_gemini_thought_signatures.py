"""restore-thought-signatures through ``engine.process`` on Gemini CLI's captured turns, judged by the strict mock's
signature checks (tests/upstreams/gemini_signatures.py): Gemini CLI's own turns pass byte for byte; a stripped
signature comes back byte-exact from the answer llmfix heard; with nothing heard, Google's dummy goes on the first
``functionCall`` of each model content of the current turn only — never on a sibling call, never in an older turn;
a signature the upstream refused is taken away wherever it is, on a text part too, in the resend and up front after.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.dialects.registry import GEMINI
from llmfix.retry import decide, rejections
from llmfix.retry.learned import LearnedQuirks
from tests.unit.dialects.gemini_session import (
    CA_STREAM,
    CODE_ASSIST,
    COUNT,
    DUMMY,
    HOST,
    MODEL,
    STREAM,
    capture,
    hear_sse,
    issued,
    raw,
    response,
    run,
    sent,
    snake,
    sse,
    store,
    taken,
    without_signatures,
)
from tests.upstreams.gemini_errors import CORRUPTED
from tests.upstreams.gemini_signatures import SignatureLedger

NAME = "restore-thought-signatures"


def signature(part: dict[str, Any]) -> str | None:
    return part.get("thoughtSignature", part.get("thought_signature"))


def ledger() -> SignatureLedger:
    """The strict mock's signatures, trusting the ones the capturing mock issued for turn 1."""
    out = SignatureLedger()
    out.trust(*(p["thoughtSignature"] for p in issued()))
    return out


def heard_turn1() -> Any:
    """A memory that heard the Gemini API stream turn 1's answer (its two calls, each event one part)."""
    memory = store()
    hear_sse(memory, sse([response([p]) for p in issued()]))
    return memory


@pytest.mark.parametrize("name, path", [("turn1", STREAM), ("turn2", STREAM), ("count_tokens", COUNT)])
def test_gemini_cli_s_turns_pass_byte_identical(name: str, path: str) -> None:
    body = capture(name)
    for memory in (None, heard_turn1()):
        outcome = run(body, path=path, store=memory)
        assert outcome.status == "untouched", outcome.changes
        assert outcome.body is None


def test_a_stripped_signature_comes_back_byte_exact_from_the_answer_llmfix_heard() -> None:
    body = without_signatures(capture("turn2"), 1)
    assert ledger().check(body["contents"], backend="gemini", model=MODEL) is not None  # refused as it is
    outcome = run(body, store=heard_turn1())
    assert outcome.repairs == [NAME]
    out = sent(outcome, body)
    parts = out["contents"][1]["parts"]
    assert signature(parts[0]) == issued()[0]["thoughtSignature"]
    assert signature(parts[1]) is None  # a sibling call: Gemini signs only the first, and needs only that one
    assert ledger().check(out["contents"], backend="gemini", model=MODEL) is None
    taken(out)
    assert {k: v for k, v in out.items() if k != "contents"} == {k: v for k, v in body.items() if k != "contents"}
    assert out["contents"][0] == body["contents"][0] and out["contents"][2] == body["contents"][2]
    shown = json.dumps([outcome.lines, outcome.records, outcome.before, outcome.after])
    assert issued()[0]["thoughtSignature"] not in shown  # the log shows a digest, never the value


def test_in_snake_case_too() -> None:
    body = snake(without_signatures(capture("turn2"), 1))
    out = sent(run(body, store=heard_turn1()), body)
    parts = out["contents"][1]["parts"]
    assert signature(parts[0]) == issued()[0]["thoughtSignature"] and signature(parts[1]) is None
    assert "function_call" in parts[0] and "functionCall" not in parts[0]  # the client's spelling stays


def test_inside_code_assist_s_envelope_the_wrapper_is_kept_byte_for_byte() -> None:
    memory = store()
    hear_sse(memory, sse([{"response": response([p])} for p in issued()]), f"{CODE_ASSIST}:443/gemini")
    inner = without_signatures(capture("turn2"), 1)
    envelope = {"model": MODEL, "project": "my-project-123", "request": inner, "user_prompt_id": "abc-1"}
    data = json.dumps(envelope, separators=(",", ":")).encode()
    outcome = run(data, host=CODE_ASSIST, path=CA_STREAM, store=memory)
    assert outcome.repairs == [NAME] and outcome.body is not None
    head, tail = data[:data.index(b'"request"')], data[data.rindex(b',"user_prompt_id"'):]
    assert outcome.body.startswith(head) and outcome.body.endswith(tail)
    out = json.loads(outcome.body)
    assert signature(out["request"]["contents"][1]["parts"][0]) == issued()[0]["thoughtSignature"]
    taken(out["request"], backend="code-assist", prefix="request.")


def call(name: str, path: str, sig: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"name": name, "args": {"file_path": path}}}
    return {**part, "thoughtSignature": sig} if sig else part


def answer(*paths: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"output": p}}}
                                      for p in paths]}


def test_with_nothing_heard_the_dummy_goes_on_the_first_call_of_each_step_of_the_current_turn_only() -> None:
    older = ledger().sign_call("read_file", {"file_path": "old.md"})
    contents = [
        {"role": "user", "parts": [{"text": "read old.md"}]},
        {"role": "model", "parts": [call("read_file", "old.md")]},  # an older turn: unsigned, and it may stay so
        answer("old.md"),
        {"role": "model", "parts": [{"text": "done"}]},
        {"role": "user", "parts": [{"text": "now a.md and b.md, then c.md"}]},  # the current turn begins
        {"role": "model", "parts": [call("read_file", "a.md"), call("read_file", "b.md")]},
        answer("a.md", "b.md"),
        {"role": "model", "parts": [call("read_file", "c.md")]},
        answer("c.md"),
    ]
    body = {"contents": contents}
    outcome = run(body)
    out = sent(outcome, body)["contents"]
    assert [c.location for c in outcome.changes] == ["contents[5].parts[0].thoughtSignature",
                                                     "contents[7].parts[0].thoughtSignature"]
    assert signature(out[5]["parts"][0]) == DUMMY and signature(out[7]["parts"][0]) == DUMMY
    assert signature(out[5]["parts"][1]) is None  # never a sibling
    assert out[:5] == contents[:5]  # never an older turn
    assert ledger().check(out, backend="gemini", model=MODEL) is None
    taken(sent(outcome, body))
    # a signature the client kept is never replaced
    contents[1]["parts"][0]["thoughtSignature"] = older
    kept = ledger().sign_call("read_file", {"file_path": "a.md"})
    contents[5]["parts"][0]["thoughtSignature"] = kept
    out = sent(run(body), body)["contents"]
    assert signature(out[1]["parts"][0]) == older and signature(out[5]["parts"][0]) == kept
    assert signature(out[7]["parts"][0]) == DUMMY


def test_a_model_before_gemini_3_is_left_alone() -> None:
    body = without_signatures(capture("turn2"), 1)
    assert run(body, path="/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse").status == "untouched"


def settings(memory: Any) -> engine.Settings:
    return engine.Settings(quirks=LearnedQuirks(None, 3600), reasoning=memory)


async def refused_then_resent(body: dict[str, Any], book: SignatureLedger) -> tuple[dict[str, Any], Any]:
    """The strict mock refuses ``body`` as a foreign signature; what llmfix resends (taken by the mock), and the
    memory that learned the refusal."""
    memory = store()
    rejection = book.check(body["contents"], backend="gemini", model=MODEL)
    assert rejection is not None and rejection.message == CORRUPTED
    found = rejections.match("gemini", 400, json.dumps(rejection.body("gemini")).encode())
    assert found is not None and found.rule.name == "gemini-signature-refused"
    req = engine.request(GEMINI, HOST, 443, STREAM, raw(body), None, None)
    d = await decide.decide(found, 400, req, raw(body), settings(memory))
    assert d.outcome is not None and d.outcome.body is not None, d.why
    resent = json.loads(d.outcome.body)
    assert book.check(resent["contents"], backend="gemini", model=MODEL) is None
    taken(resent)
    decide.learn(d, settings(memory))
    return resent, memory


async def test_a_refused_signature_on_a_text_part_is_taken_away() -> None:
    book = ledger()
    foreign = book.sign_text(signer="another-account")  # after a switch from Google login to an API key
    contents = [{"role": "user", "parts": [{"text": "hi"}]},
                {"role": "model", "parts": [{"text": "Hello! What shall we do?", "thoughtSignature": foreign}]},
                {"role": "user", "parts": [{"text": "read a.md"}]}]
    body = {"contents": contents}
    resent, memory = await refused_then_resent(body, book)
    assert resent["contents"][1]["parts"] == [{"text": "Hello! What shall we do?"}]
    assert resent["contents"][0] == contents[0] and resent["contents"][2] == contents[2]
    # the next request of that conversation is repaired before it leaves
    later = {"contents": [*contents, {"role": "model", "parts": [{"text": "Sure."}]},
                          {"role": "user", "parts": [{"text": "thanks"}]}]}
    out = sent(run(later, store=memory), later)
    assert book.check(out["contents"], backend="gemini", model=MODEL) is None
    assert "thoughtSignature" not in out["contents"][1]["parts"][0]


async def test_a_refused_signature_on_a_text_part_of_the_current_turn_goes_and_the_call_gets_the_dummy() -> None:
    book = ledger()
    foreign_text = book.sign_text(signer="another-account")
    foreign_call = book.sign_call("read_file", {"file_path": "a.md"}, signer="another-account")
    contents = [{"role": "user", "parts": [{"text": "read a.md"}]},
                {"role": "model", "parts": [{"text": "Reading it.", "thoughtSignature": foreign_text},
                                            call("read_file", "a.md", foreign_call)]},
                answer("a.md")]
    resent, _ = await refused_then_resent({"contents": contents}, book)
    parts = resent["contents"][1]["parts"]
    assert parts[0] == {"text": "Reading it."}
    assert signature(parts[1]) == DUMMY and parts[1]["functionCall"] == contents[1]["parts"][1]["functionCall"]



def test_a_conversation_llmfix_settled_before_the_refusal_is_looked_at_again_after_it() -> None:
    """The engine's prefix cache settled turn 1 while nothing was refused; once the upstream refused its text
    part's signature, the next turn, extending it, loses that signature."""
    book = ledger()
    foreign = book.sign_text(signer="another-account")
    contents = [{"role": "user", "parts": [{"text": "hi"}]},
                {"role": "model", "parts": [{"text": "Hello!", "thoughtSignature": foreign}]},
                {"role": "user", "parts": [{"text": "again"}]}]
    memory = store()
    shared = settings(memory)  # one prefix cache for both turns, as in the proxy
    first = {"contents": contents}
    assert engine.process(engine.request(GEMINI, HOST, 443, STREAM, raw(first), None, None), shared).status == \
        "untouched"
    found = rejections.match("gemini", 400, json.dumps({"error": {"code": 400, "message": CORRUPTED}}).encode())
    assert found is not None and found.rule.facts is not None
    memory.note(found.rule.facts(found, first, f"{HOST}:443/gemini"))
    later = {"contents": [*contents, {"role": "model", "parts": [{"text": "Hi again."}]},
                          {"role": "user", "parts": [{"text": "bye"}]}]}
    outcome = engine.process(engine.request(GEMINI, HOST, 443, STREAM, raw(later), None, None), shared)
    out = sent(outcome, later)
    assert out["contents"][1]["parts"] == [{"text": "Hello!"}]
    assert book.check(out["contents"], backend="gemini", model=MODEL) is None
