"""fold-system-messages under generated Claude Code conversations (DESIGN §4), per folding vendor.

Conversations are built turn by turn the way Claude Code sends them: user text (string or blocks, some
with ``cache_control``), ``role:"system"`` runs after user turns, after tool results, at the start, after
an assistant's text or between a tool_use and its results; assistant text or parallel tool_use; results
with text or images. Each turn is resent with the whole history, and for every turn:

- it never fails; the strict vendor mock (its role rule and Anthropic's pairing rules) accepts it;
- every system text reaches the upstream exactly once, wrapped, in conversation order; every other text
  and every image exactly as often as sent; assistant messages unchanged; cache markers neither added nor lost;
- idempotent, deterministic, and turn N's repaired messages a byte-exact prefix of turn N+1's;
- ``api.anthropic.com`` (which takes system messages) gets every turn byte-identical — unless a system
  message sits between a tool_use and its results: Anthropic rejects that placement ("never between a
  ``tool_use`` and its ``tool_result`` … Placing it elsewhere returns a 400 error", session-killers.md §2.4,
  [181] platform.claude.com mid-conversation-system-messages), so pair-tool-calls moves the results (and
  only pair-tool-calls changes anything) and the strict Anthropic mock accepts the result.
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from llmfix import engine
from llmfix.dialects.registry import MESSAGES
from tests.images import png_b64
from tests.property.budget import BUDGET
from tests.upstreams.rules import check

VENDORS = {"api.deepseek.com": "deepseek", "open.bigmodel.cn": "glm", "api.minimax.io": "minimax"}
CC = {"type": "ephemeral"}
IMG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png_b64(0)}}


@st.composite
def conversations(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """The messages of each turn (each a prefix of the next), with unique texts ``<kind><n>``."""
    counter = iter(range(10_000))
    markers = [0]

    def txt(kind: str) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": f"{kind}{next(counter)}"}
        if markers[0] < 4 and draw(st.booleans()) and draw(st.booleans()):
            markers[0] += 1
            block["cache_control"] = CC
        return block

    def system() -> dict[str, Any]:
        if draw(st.booleans()):
            return {"role": "system", "content": f"sys{next(counter)}"}
        extra = {"output_config": {"effort": "high"}} if draw(st.booleans()) else {}
        return {"role": "system", "content": [txt("sys") for _ in range(draw(st.integers(0, 2)))], **extra}

    def systems(allowed: bool = True) -> list[dict[str, Any]]:
        return [system() for _ in range(draw(st.integers(0, 2)))] if allowed else []

    messages: list[dict[str, Any]] = systems(draw(st.booleans()))
    first = txt("user")
    messages.append({"role": "user", "content": first["text"]} if draw(st.booleans()) and "cache_control" not in first
                    else {"role": "user", "content": [first]})
    messages += systems()
    turns = [list(messages)]
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):  # a tool round
            ids = [f"toolu_{next(counter)}" for _ in range(draw(st.integers(1, 3)))]
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": i, "name": "Read", "input": {"p": i}} for i in ids]})
            messages += systems(draw(st.booleans()))  # between the tool_use and its results (Claude Code: rare)
            results = [{"type": "tool_result", "tool_use_id": i,
                        "content": [IMG] if draw(st.booleans()) else [txt("result")]} for i in ids]
            tail = [txt("user")] if draw(st.booleans()) else []
            messages.append({"role": "user", "content": results + tail})
            messages += systems()
        else:  # a text answer, then the user
            messages.append({"role": "assistant", "content": [txt("answer")]})
            messages += systems(draw(st.booleans()))
            messages.append({"role": "user", "content": [txt("user")]})
            messages += systems()
        turns.append(list(messages))
    return turns


def run(host: str, messages: list[dict[str, Any]]) -> tuple[engine.Outcome, bytes, dict[str, Any]]:
    raw = orjson.dumps({"model": "claude-opus-5-5", "max_tokens": 64, "stream": True,
                        "system": [{"type": "text", "text": "top"}], "messages": messages})
    out = engine.process(engine.Request(MESSAGES, host, 443, raw), engine.Settings())
    assert out.status != "failed", out.reason
    sent = out.body if out.status == "repaired" else raw
    assert sent is not None
    return out, sent, orjson.loads(sent)


def splits_a_tool_turn(messages: list[dict[str, Any]]) -> bool:
    """A system message right after an assistant's tool_use, i.e. between the tool_use and its results."""
    return any(m["role"] == "assistant" and any(b.get("type") == "tool_use" for b in m["content"])
               and n["role"] == "system" for m, n in pairwise(messages))


def texts(messages: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for m in messages:
        content = m["content"]
        for b in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if b.get("type") == "text":
                found.append(b["text"])
            elif b.get("type") == "tool_result":
                found += [c["text"] for c in b["content"] if c.get("type") == "text"]
    return found


def images(messages: list[dict[str, Any]]) -> int:
    return json.dumps(messages).count('"type": "image"')


@given(turns=conversations(), host=st.sampled_from(sorted(VENDORS)))
@BUDGET
def test_fold_promises(turns: list[list[dict[str, Any]]], host: str) -> None:
    previous: bytes | None = None
    for messages in turns:
        out, sent, got = run(host, messages)
        assert check(VENDORS[host], "/anthropic/v1/messages", got) is None
        assert {m["role"] for m in got["messages"]} <= {"user", "assistant"}
        system_texts = texts([m for m in messages if m["role"] == "system"])
        other_texts = texts([m for m in messages if m["role"] != "system"])
        got_texts = texts(got["messages"])
        wrapped = [f"<system-reminder>\n{t}\n</system-reminder>" for t in system_texts if t]
        assert [t for t in got_texts if t.startswith("<system-reminder>")] == wrapped  # once each, in order
        assert [t for t in got_texts if not t.startswith("<system-reminder>")] == other_texts
        assert [m for m in got["messages"] if m["role"] == "assistant"] == [
            m for m in messages if m["role"] == "assistant"]
        assert images(got["messages"]) == images(messages)
        assert json.dumps(got).count("cache_control") == json.dumps(messages).count("cache_control")
        again = engine.process(engine.Request(MESSAGES, host, 443, sent), engine.Settings())
        assert again.status == "untouched"  # idempotent
        assert run(host, messages)[1] == sent  # deterministic
        items = orjson.dumps(got["messages"])[:-1]
        if previous is not None:
            assert items.startswith(previous)  # prefix-stable
        previous = items
        assert bool(out.changes) == any(m["role"] == "system" for m in messages)
        raw_out, _, anthropic_got = run("api.anthropic.com", messages)
        if splits_a_tool_turn(messages):  # Anthropic rejects this placement (session-killers.md §2.4 [181])
            assert raw_out.status == "repaired"
            assert {c.repair for c in raw_out.changes} == {"pair-tool-calls"}
            assert check("anthropic", "/v1/messages", anthropic_got) is None
            assert sorted(texts(anthropic_got["messages"])) == sorted(texts(messages))  # moved, none invented/lost
        else:
            assert raw_out.status == "untouched"
