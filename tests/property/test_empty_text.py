"""drop-empty-text under generated Anthropic histories: valid ones untouched, broken ones lose nothing but blank text.

Histories are built the way agents send them — user text (string or blocks), assistant text, thinking, parallel
tool_use and their results, cache markers here and there, Claude Code's system messages — and then, for the broken
ones, blank text is put where interrupted streams, resumes and blank tool outputs leave it: empty or whitespace-only
text blocks (some carrying the marker), empty assistant turns, empty or whitespace string contents. For every
history:

- valid (no blank text, no empty message): unchanged, the very same body (byte-identical through the engine);
- never raises; idempotent; deterministic;
- nothing lost but blank text: every other block, every non-blank string content, every role in order, every
  message that had any non-blank content; no text invented; no cache marker added, each marker kept on its block or
  moved within its message (or gone with a blank block or message, as the change log says);
- the latest assistant message carrying thinking is left as it came;
- accepted by the strict Anthropic mock's blank-text rules, unless the only fault left is one nothing can fix (a
  last user message with nothing in it, blank text in the thinking turn Anthropic freezes);
- the certain check (``repairs/settled.py``), continued over any split of the history, is sure only when the repair
  changes nothing.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from llmfix import engine
from llmfix.body.conversation import loads, parse
from llmfix.dialects.registry import MESSAGES
from llmfix.profiles import ProfileTable
from llmfix.repairs import drop_empty_text
from llmfix.repairs.base import Context
from tests.property.budget import BUDGET
from tests.upstreams import empty_rules

CACHE = {"type": "ephemeral"}
BLANKS = ["", " ", "\n", "\t \n", "\u3000"]
ONLY = frozenset({drop_empty_text.NAME})


@st.composite
def histories(draw: st.DrawFn, broken: bool) -> list[dict[str, Any]]:
    counter = iter(range(10_000))

    def txt() -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": f"t{next(counter)}"}
        if draw(st.integers(0, 5)) == 0:
            block["cache_control"] = CACHE
        return block

    def blank() -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": draw(st.sampled_from(BLANKS))}
        if draw(st.booleans()):
            block["cache_control"] = CACHE
        return block

    def sprinkle(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if broken and draw(st.booleans()):
            for _ in range(draw(st.integers(1, 2))):
                blocks.insert(draw(st.integers(0, len(blocks))), blank())
        return blocks

    def empty_turn(role: str) -> dict[str, Any]:
        content = draw(st.sampled_from([[], "", " ", "\n"])) if draw(st.booleans()) else [blank()]
        return {"role": role, "content": content}

    messages: list[dict[str, Any]] = []
    first = txt()
    messages.append({"role": "user", "content": first["text"] if draw(st.booleans()) and "cache_control" not in first
                     else sprinkle([first])})
    for _ in range(draw(st.integers(0, 4))):
        if broken and draw(st.integers(0, 3)) == 0:
            messages.append(empty_turn(draw(st.sampled_from(["user", "assistant"]))))
        head = [{"type": "thinking", "thinking": f"th{next(counter)}", "signature": "sig"}] if draw(
            st.booleans()) else []
        if draw(st.booleans()):  # a tool round
            ids = [f"toolu_{next(counter)}" for _ in range(draw(st.integers(1, 3)))]
            uses = [{"type": "tool_use", "id": i, "name": "Read", "input": {"p": i}} for i in ids]
            messages.append({"role": "assistant", "content": head + sprinkle(
                ([txt()] if draw(st.booleans()) else []) + uses)})
            results = [{"type": "tool_result", "tool_use_id": i, "content": f"r{next(counter)}"} for i in ids]
            messages.append({"role": "user", "content": results + sprinkle([txt()] if draw(st.booleans()) else [])})
        else:
            messages.append({"role": "assistant", "content": head + sprinkle([txt()])})
            messages.append({"role": "user", "content": f"u{next(counter)}" if draw(st.booleans())
                             else sprinkle([txt()])})
        if draw(st.integers(0, 4)) == 0:  # Claude Code's mid-conversation system message: not this repair's
            messages.append({"role": "system", "content": f"s{next(counter)}"})
    if broken and draw(st.integers(0, 4)) == 0:
        messages.append(empty_turn("assistant"))  # an interrupted last turn
    return messages


def run(messages: list[dict[str, Any]]) -> engine.Outcome:
    raw = json.dumps({"model": "claude-opus-5-5", "max_tokens": 64, "messages": messages}).encode()
    out = engine.process(engine.Request(MESSAGES, "api.anthropic.com", 443, raw),
                         engine.Settings(enabled=ONLY))
    assert out.status in ("untouched", "repaired"), out.reason
    return out


def sent(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = run(messages)
    return messages if out.body is None else json.loads(out.body)["messages"]


def is_blank(b: Any) -> bool:
    return isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) and not b["text"].strip()


def bare(b: Any) -> str:
    return json.dumps({k: v for k, v in b.items() if k != "cache_control"}, sort_keys=True)


def kept_blocks(messages: list[dict[str, Any]]) -> Counter[str]:
    return Counter(bare(b) for m in messages if isinstance(m["content"], list) for b in m["content"] if not is_blank(b))


def substance(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Each message with anything but blank text: its role and what it holds, in order."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            if content.strip():
                out.append((m["role"], content))
        elif any(not is_blank(b) for b in content):
            out.append((m["role"], [bare(b) for b in content if not is_blank(b)]))
    return out


def frozen_turn(messages: list[dict[str, Any]]) -> int:
    """The latest assistant message that stays, when it carries thinking (else -1)."""
    n = len(messages)
    for i in range(n - 1, -1, -1):
        m = messages[i]
        if m["role"] == "assistant":
            hollow = not (m["content"].strip() if isinstance(m["content"], str)
                          else any(not is_blank(b) for b in m["content"]))
            if not hollow or i == n - 1:
                blocks = m["content"] if isinstance(m["content"], list) else []
                return i if any(b.get("type") == "thinking" for b in blocks) else -1
    return -1


@BUDGET
@given(messages=histories(broken=False))
def test_valid_histories_are_not_touched(messages: list[dict[str, Any]]) -> None:
    assert run(messages).status == "untouched"
    assert empty_rules.check({"messages": messages}) is None


@BUDGET
@given(messages=histories(broken=True))
def test_nothing_but_blank_text_is_lost(messages: list[dict[str, Any]]) -> None:
    out = run(messages)
    got = sent(messages)
    assert run(got).status == "untouched", "not idempotent"
    assert sent(messages) == got, "not deterministic"
    assert substance(got) == substance(messages)
    assert kept_blocks(got) == kept_blocks(messages)
    markers = lambda ms: sum(json.dumps(m).count('"cache_control"') for m in ms)  # noqa: E731
    gone = sum("cache_control went with it" in line for line in out.lines)
    dropped_with_message = sum(json.dumps(r["before"]).count('"cache_control"') for r in out.records
                               if "message dropped" in r["summary"])
    assert markers(got) == markers(messages) - gone - dropped_with_message
    frozen = frozen_turn(messages)
    if frozen >= 0:
        assert messages[frozen] in got
    last = got[-1] if got else None
    stuck = (last is not None and last["role"] == "user" and last == messages[-1]
             and not substance([last])) or (frozen >= 0 and any(is_blank(b) for b in messages[frozen]["content"]))
    if not stuck:
        assert empty_rules.check({"messages": got}) is None


@BUDGET
@given(messages=histories(broken=True), data=st.data())
def test_a_certain_chain_means_nothing_changes(messages: list[dict[str, Any]], data: st.DataObject) -> None:
    d = MESSAGES
    conv = parse(d, loads(json.dumps({"model": "m", "messages": messages}).encode()))
    assert conv is not None
    resolved = ProfileTable().resolve("api.anthropic.com", 443, "m", d)
    ctx = Context(d, resolved.profile, "m", resolved.modalities)
    items = conv.items
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(items)), max_size=4), label="cuts")) | {len(items)})
    state, start, sure = None, 0, True
    for end in cuts:
        state = drop_empty_text._extend(state, items[:end], start, ctx)
        if state is None:
            sure = False
            break
        assert not drop_empty_text.REPAIR.apply(items[:end], ctx)[1], f"sure of the first {end} messages, wrongly"
        start = end
    _out, changes = drop_empty_text.REPAIR.apply(items, ctx)
    if sure:
        assert not changes, [c.line() for c in changes]
