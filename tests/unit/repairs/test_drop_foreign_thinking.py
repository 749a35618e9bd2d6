"""drop-foreign-thinking on Claude Code's capture and on switched sessions, through `engine.process`, judged by
the strict mock's signature checks (tests/upstreams/thinking.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from llmfix import engine
from llmfix.body.conversation import loads, parse
from llmfix.dialects.messages.learn_thinking import FOREIGN, block_key, fact_key, marker_key
from llmfix.dialects.registry import MESSAGES
from llmfix.memory.sqlite_reasoning import SqliteReasoningStore
from llmfix.memory.store import Reasoning
from llmfix.profiles import ProfileTable
from llmfix.repairs import drop_foreign_thinking, settled
from llmfix.repairs.base import Context
from llmfix.retry import rejections
from tests.upstreams.reasoning_canned import anthropic_sse, issued_turn
from tests.upstreams.reasoning_sessions import claude_code, hear, sent
from tests.upstreams.reasoning_sessions import run as run_engine
from tests.upstreams.thinking import Ledger

ANTHROPIC = "api.anthropic.com:443/messages"
KIMI = "api.kimi.com:443/messages"
MODEL = "claude-sonnet-4-5-20250929"
UUID = "3f0c2a1e-9b8d-4c7e-a6f5-1d2e3c4b5a69"


def heard(store: SqliteReasoningStore, sse: str, upstream: str) -> None:
    hear(store, "messages", sse, upstream)


def run(body: dict[str, Any] | bytes, store: Any, host: str = "api.anthropic.com") -> engine.Outcome:
    return run_engine(MESSAGES, host, body, store)


class Switched:
    """A session that went elsewhere and came back: an older turn answered by another upstream (``older``), then
    a turn of this upstream's (the latest), which the client keeps exactly as it came."""

    def __init__(self, older: dict[str, Any]) -> None:
        self.ledger = Ledger()
        self.store = SqliteReasoningStore(":memory:")
        latest_tools = [("toolu_2", "Read", {"file_path": "/p/b.png"})]
        sse = anthropic_sse(self.ledger, MODEL, "Now b.png.", tool_uses=latest_tools)
        self.ledger.observe("anthropic", "messages", sse)
        heard(self.store, sse, ANTHROPIC)
        self.latest = issued_turn(self.ledger, "Now b.png.", tool_uses=latest_tools)
        self.body = {"model": MODEL, "max_tokens": 100, "messages": [
            {"role": "user", "content": "look at a.png, then b.png"}, older,
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "red"}]},
            self.latest,
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "blue"}]}]}

    def check(self, body: dict[str, Any]) -> Any:
        return self.ledger.check("anthropic", "messages", body)


def foreign(ledger: Ledger, **kw: Any) -> dict[str, Any]:
    return issued_turn(ledger, "Let me read a.png.", tool_uses=[("toolu_1", "Read", {"file_path": "/p/a.png"})], **kw)


def test_claude_code_replaying_its_own_thinking_is_left_byte_identical() -> None:
    ledger = Ledger()
    session = claude_code(ledger)
    store = SqliteReasoningStore(":memory:")
    heard(store, session.sse, ANTHROPIC)
    ledger.observe("anthropic", "messages", session.sse)
    raw = json.dumps(session.turn2).encode()
    assert ledger.check("anthropic", "messages", session.turn2) is None
    assert run(raw, store).status == "untouched"
    longer = copy.deepcopy(session.turn2)  # one more turn: the replayed one is now older, and still stays
    longer["messages"] += [issued_turn(ledger, "It is red.", text="A red square."), {"role": "user", "content": "ok"}]
    assert run(longer, store).status == "untouched"


@pytest.mark.parametrize(("form", "why"), [
    ({"signature": ""}, "its signature is empty"),
    ({"signature": UUID}, "its signature is a message UUID (DeepSeek's form), not this upstream's"),
    (None, "it has no signature"),
])
def test_an_older_block_whose_form_is_not_anthropic_s_goes_up_front(form: dict[str, Any] | None, why: str) -> None:
    ledger = Ledger()
    older = foreign(ledger)
    if form is None:
        del older["content"][0]["signature"]
    else:
        older["content"][0].update(form)
    s = Switched(older)
    assert s.check(s.body) is not None
    out = run(s.body, s.store)
    got = sent(out, s.body)
    assert [c.line() for c in out.changes] == [
        f"drop-foreign-thinking: messages[1].content[0]: thinking block (18 chars) dropped: {why}"]
    assert got["messages"][1]["content"] == older["content"][1:]  # the tool_use stays
    assert got["messages"][3] == s.latest and got["messages"][4] == s.body["messages"][4]
    assert s.check(got) is None
    assert run(out.body, s.store).status == "untouched"  # idempotent


def test_the_latest_turn_is_never_touched_even_when_it_is_unsigned() -> None:
    s = Switched(foreign(Ledger(), signer="kimi"))
    s.body["messages"][3]["content"][0]["signature"] = ""
    s.body["messages"][1] = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read",
                                                               "input": {}}]}
    assert run(s.body, s.store).status == "untouched"


def test_a_block_this_upstream_issued_stays_whatever_its_form() -> None:
    """DeepSeek's /anthropic signs with the message UUID; a profile that judges forms still keeps what memory saw
    this very upstream issue."""
    s = Switched(foreign(Ledger(), signature=UUID))
    heard(s.store, anthropic_sse(s.ledger, MODEL, "Let me read a.png.", signature=UUID,
                                 tool_uses=[("toolu_1", "Read", {"file_path": "/p/a.png"})]), ANTHROPIC)
    assert run(s.body, s.store).status == "untouched"


def test_upstreams_that_do_not_verify_signatures_keep_everything_without_a_rejection() -> None:
    s = Switched(foreign(Ledger(), signature=""))
    for host in ("api.deepseek.com", "api.kimi.com", "llm.internal.example"):
        assert run(s.body, s.store, host).status == "untouched"


def teach(store: SqliteReasoningStore, block: dict[str, Any], upstream: str = ANTHROPIC) -> None:
    """What the signature rejection naming ``block`` teaches (retry/rejections.py)."""
    key = block_key(block) or ""
    store.note([Reasoning(FOREIGN, fact_key(key, upstream), "test", upstream),
                Reasoning(FOREIGN, marker_key(upstream), "test", upstream)])


def test_a_rejected_block_goes_with_every_block_of_its_origin_and_this_upstream_s_stay() -> None:
    kimi = Ledger()
    older = foreign(kimi, signer="kimi")
    s = Switched(older)
    tools = [("toolu_1", "Read", {"file_path": "/p/a.png"})]
    heard(s.store, anthropic_sse(kimi, "kimi-k3", "Let me read a.png.", signer="kimi", tool_uses=tools), KIMI)
    second = issued_turn(kimi, "And c.png.", signer="kimi", text="Reading c.png next.")
    heard(s.store, anthropic_sse(kimi, "kimi-k3", "And c.png.", signer="kimi", text="Reading c.png next."), KIMI)
    unknown = issued_turn(kimi, "Unseen.", signer="minimax", text="Something else.")
    own = issued_turn(s.ledger, "Mine.", text="An answer of this upstream.")
    heard(s.store, anthropic_sse(s.ledger, MODEL, "Mine.", text="An answer of this upstream."), ANTHROPIC)
    s.body["messages"][3:3] = [second, {"role": "user", "content": "y"}, unknown, {"role": "user", "content": "z"},
                               own, {"role": "user", "content": "w"}]
    assert run(s.body, s.store).status == "untouched"  # nothing rejected yet: the form is fine
    teach(s.store, older["content"][0])
    got = sent(run(s.body, s.store), s.body)["messages"]
    assert got[1]["content"] == older["content"][1:]  # rejected
    assert got[3]["content"] == second["content"][1:]  # the same origin: kimi's
    assert got[5] == unknown and got[7] == own  # unknown origin, and this upstream's own, stay


def test_a_rejected_block_of_unknown_origin_takes_the_other_unknown_ones_along() -> None:
    s = Switched(foreign(Ledger(), signer="kimi"))
    unknown = issued_turn(Ledger(), "Unseen too.", signer="minimax", text="Another.")
    own = issued_turn(s.ledger, "Mine.", text="An answer of this upstream.")
    heard(s.store, anthropic_sse(s.ledger, MODEL, "Mine.", text="An answer of this upstream."), ANTHROPIC)
    s.body["messages"][3:3] = [unknown, {"role": "user", "content": "y"}, own, {"role": "user", "content": "w"}]
    teach(s.store, s.body["messages"][1]["content"][0])
    got = sent(run(s.body, s.store), s.body)
    assert [m["content"][0]["type"] for m in got["messages"][1:6:2]] == ["tool_use", "text", "thinking"]
    assert s.check(got) is None


def test_a_message_left_empty_is_dropped_and_a_kept_block_never_follows_visible_content() -> None:
    kimi = Ledger()
    s = Switched(foreign(kimi, signer="kimi"))
    only = {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": ""}]}
    mixed = {"role": "assistant", "content": [{"type": "thinking", "thinking": "a", "signature": ""},
                                              {"type": "text", "text": "Visible."},
                                              issued_turn(s.ledger, "b")["content"][0]]}
    s.body["messages"][0:0] = [{"role": "user", "content": "before"}, only, {"role": "user", "content": "then"},
                               mixed]
    out = run(s.body, s.store)
    got = sent(out, s.body)["messages"]
    assert got[1] == {"role": "user", "content": "then"}  # the thinking-only message is gone
    assert got[2]["content"] == [{"type": "text", "text": "Visible."}]
    assert any("held only the thinking dropped above" in line for line in out.lines)
    assert any("would no longer be first in its message" in line for line in out.lines)


def test_the_change_log_shows_no_thinking_text_or_signature() -> None:
    secret = "a private chain of thought"
    s = Switched(issued_turn(Ledger(), secret, signature="", text="Visible answer."))
    out = run(s.body, s.store)
    assert out.status == "repaired"
    dump = json.dumps(out.records) + "".join(out.lines)
    assert secret not in dump


def test_the_certain_check_asks_again_once_the_upstream_rejected_a_block() -> None:
    s = Switched(foreign(Ledger(), signer="kimi"))
    conv = parse(MESSAGES, loads(json.dumps(s.body).encode()))
    resolved = ProfileTable().resolve("api.anthropic.com", 443, MODEL, MESSAGES)
    ctx = Context(MESSAGES, resolved.profile, MODEL, None, None, reasoning=s.store, upstream=ANTHROPIC)
    repair = drop_foreign_thinking.REPAIR
    state, n = settled.settle([repair], None, conv.items, 0, ctx)
    assert state is not None and n == 1
    teach(s.store, s.body["messages"][1]["content"][0])
    assert settled.settle([repair], state, conv.items, len(conv.items), ctx) == (None, 0)
    other = Context(MESSAGES, resolved.profile, MODEL, None, None, reasoning=s.store,
                    upstream="gateway.test:443/messages")
    assert settled.settle([repair], state, conv.items, len(conv.items), other)[0] is not None  # not its rejection


def rejected(store: SqliteReasoningStore, block: dict[str, Any], upstream: str = ANTHROPIC) -> list[Reasoning]:
    """Anthropic's 400 naming ``block`` (an older turn's) as retry/rejections.py reads it, noted in memory."""
    body = {"model": MODEL, "messages": [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": [block, {"type": "text", "text": "a"}]},
        {"role": "user", "content": "q2"}, {"role": "assistant", "content": [{"type": "text", "text": "b"}]}]}
    error = json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message":
                        "messages.1.content.0: Invalid `signature` in `thinking` block"}}).encode()
    found = rejections.match("messages", 400, error)
    assert found is not None and found.rule.facts is not None
    facts = found.rule.facts(found, body, upstream)
    store.note(facts)
    return facts


def test_a_block_taught_again_after_another_still_has_the_older_blocks_judged_again() -> None:
    """Lessons X, Z, X: the marker changes with each, so a session settled after the first X judges its older
    blocks again and finds Z, its own, rejected (a marker naming the last block taught would be X again)."""
    s = Switched(foreign(Ledger(), signer="kimi"))
    z = s.body["messages"][1]["content"][0]
    x = {"type": "thinking", "thinking": "another session's", "signature": "x" * 40}
    conv = parse(MESSAGES, loads(json.dumps(s.body).encode()))
    resolved = ProfileTable().resolve("api.anthropic.com", 443, MODEL, MESSAGES)
    ctx = Context(MESSAGES, resolved.profile, MODEL, None, None, reasoning=s.store, upstream=ANTHROPIC)
    repair = drop_foreign_thinking.REPAIR
    first = rejected(s.store, x)
    state, n = settled.settle([repair], None, conv.items, 0, ctx)
    assert state is not None and n == 1  # X is not this session's: nothing goes
    again = [*rejected(s.store, z), *rejected(s.store, x)]
    markers = [r.value for r in first + again if r.key == marker_key(ANTHROPIC)]
    assert len(set(markers)) == 3  # one per lesson, the same block taught twice included
    assert settled.settle([repair], state, conv.items, len(conv.items), ctx) == (None, 0)
    assert run(s.body, s.store).changes[0].line().startswith("drop-foreign-thinking: messages[1]")


def test_a_long_session_asks_one_key_and_its_new_blocks_once_a_rejection_is_known() -> None:
    """After a rejection (of another session's block) the marker stays; a continued session asks it, and only its
    blocks that just turned older are judged: the cost does not grow with the session."""
    from tests.unit.repairs.test_restore_reasoning_content import Counting

    ledger = Ledger()
    store = Counting(":memory:")

    def items(n: int) -> list[Any]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        for k in range(n):
            messages += [issued_turn(ledger, f"t{k}", text=f"answer {k}"), {"role": "user", "content": f"q{k}"}]
        return parse(MESSAGES, loads(json.dumps({"model": MODEL, "messages": messages}).encode())).items

    teach(store, {"type": "thinking", "thinking": "elsewhere", "signature": "x"})
    resolved = ProfileTable().resolve("api.anthropic.com", 443, MODEL, MESSAGES)
    ctx = Context(MESSAGES, resolved.profile, MODEL, None, None, reasoning=store, upstream=ANTHROPIC)
    repair = drop_foreign_thinking.REPAIR
    first = items(100)
    state, _ = settled.settle([repair], None, first, 0, ctx)
    assert state is not None
    store.asked = 0
    assert settled.settle([repair], state, items(101), len(first), ctx)[0] is not None
    assert store.asked == 2  # the marker, and the one block that turned older
