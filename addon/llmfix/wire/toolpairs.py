"""Tool calls and their results in a dialect-neutral form, and the edits pair-tool-calls makes, per dialect.

The pairing repair reasons once over :class:`Call` and :class:`Answer` (a declared tool call, a tool
result), each naming its call id and where it sits: ``index`` is the item (Chat / Anthropic message,
Responses input item), ``sub`` its place inside the item (Chat ``tool_calls[k]``, Anthropic
``content[k]``; None for a whole item). The dialects only map in (:func:`calls`, :func:`answers`,
:func:`groups`) and out (:func:`rename` and the small builders below), so each rule is written once:

- a *group* is what must be answered together, with the answers that count for it: Chat — one
  assistant message's ``tool_calls`` and the run of ``tool`` messages right after it; Responses — one
  call item and every output after it (OpenAI pairs by ``call_id`` anywhere later), its *run* being the
  consecutive call items from it on and the consecutive outputs right after them (a run never reaches
  into a later turn's calls, so where a missing output goes does not change when turns are appended);
  Anthropic — one assistant message's ``tool_use`` blocks
  and the ``tool_result`` blocks of the message right after it.
- server-side tool blocks (``server_tool_use``, ``web_search_tool_result``…) and ``item_reference``
  items are neither calls nor answers here: they pass untouched.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from llmfix.route import Dialect
from llmfix.wire import anthropic as an
from llmfix.wire import chat as ch
from llmfix.wire import responses as rs
from llmfix.wire.base import evolve

type Key = tuple[int, int | None]


@dataclass(frozen=True, slots=True)
class Call:
    call_id: str
    name: str
    index: int
    sub: int | None
    kind: str = "function"  # "function" | "custom"

    @property
    def key(self) -> Key:
        return (self.index, self.sub)


@dataclass(frozen=True, slots=True)
class Answer:
    call_id: str  # "" when the result carries none (Responses: missing or empty call_id)
    index: int
    sub: int | None

    @property
    def key(self) -> Key:
        return (self.index, self.sub)


@dataclass(frozen=True, slots=True)
class Group:
    """Calls that must be answered together, and the answers placed where they count for them."""

    anchor: int  # index of the declaring item (assistant message; Responses: the call item)
    calls: tuple[Call, ...]
    answers: tuple[Answer, ...]
    end: int  # index after which a missing answer goes (Chat: last tool message of the run; Responses: run end)


class Pairs:
    """The calls, answers and groups of one item list, each computed once, when first asked for."""

    def __init__(self, dialect: Dialect, items: list[Any]) -> None:
        self.dialect, self.items = dialect, items
        self._calls: list[Call] | None = None
        self._answers: list[Answer] | None = None
        self._groups: list[Group] | None = None

    @property
    def calls(self) -> list[Call]:
        if self._calls is None:
            self._calls = calls(self.dialect, self.items)
        return self._calls

    @property
    def answers(self) -> list[Answer]:
        if self._answers is None:
            self._answers = answers(self.dialect, self.items)
        return self._answers

    @property
    def groups(self) -> list[Group]:
        if self._groups is None:
            self._groups = groups(self.dialect, self.items, self.calls, self.answers)
        return self._groups

    def runs(self) -> list[tuple[list[Call], list[Answer]]]:
        return runs(self.dialect, self.items, self.calls, self.answers)


def _is_assistant_chat(m: Any) -> bool:
    return isinstance(m, ch.Message) and m.role == "assistant" and bool(m.tool_calls)


def is_tool_chat(m: Any) -> bool:
    return isinstance(m, ch.Message) and m.role == "tool" and m.tool_call_id is not None


def calls(dialect: Dialect, items: list[Any]) -> list[Call]:
    """Every declared tool call, in order."""
    out: list[Call] = []
    for i, m in enumerate(items):
        if dialect is Dialect.CHAT and _is_assistant_chat(m):
            for k, tc in enumerate(m.tool_calls or []):
                name = tc.function.name if tc.function is not None else str((tc.__pydantic_extra__ or {}).get(
                    "custom", {}).get("name", ""))
                out.append(Call(tc.id, name, i, k, "function" if tc.type == "function" else "custom"))
        elif dialect is Dialect.RESPONSES and isinstance(m, rs.TOOL_CALLS):
            out.append(Call(m.call_id, m.name, i, None, "custom" if isinstance(m, rs.CustomToolCall) else "function"))
        elif dialect is Dialect.MESSAGES and isinstance(m, an.Message) and m.role == "assistant" \
                and isinstance(m.content, list):
            out += [Call(b.id, b.name, i, k) for k, b in enumerate(m.content) if isinstance(b, an.ToolUse)]
    return out


def answers(dialect: Dialect, items: list[Any]) -> list[Answer]:
    """Every tool result, in order."""
    out: list[Answer] = []
    for i, m in enumerate(items):
        if dialect is Dialect.CHAT and is_tool_chat(m):
            out.append(Answer(m.tool_call_id or "", i, None))
        elif dialect is Dialect.RESPONSES and isinstance(m, rs.ToolOutput):
            out.append(Answer(m.call_id or "", i, None))
        elif dialect is Dialect.MESSAGES and isinstance(m, an.Message) and m.role == "user" \
                and isinstance(m.content, list):
            out += [Answer(b.tool_use_id, i, k) for k, b in enumerate(m.content) if isinstance(b, an.ToolResult)]
    return out


def groups(dialect: Dialect, items: list[Any], every: list[Call] | None = None,
           results: list[Answer] | None = None) -> list[Group]:
    """Each group of calls with the answers that count for it (see the module docstring). One pass each way;
    ``every`` / ``results``: :func:`calls` / :func:`answers` of ``items`` when the caller has them."""
    every = calls(dialect, items) if every is None else every
    results = answers(dialect, items) if results is None else results
    at: dict[int, list[Answer]] = {}
    by_id: dict[str, list[Answer]] = {}
    for a in results:
        at.setdefault(a.index, []).append(a)
        by_id.setdefault(a.call_id, []).append(a)
    by_index: dict[int, list[Call]] = {}
    for c in every:
        by_index.setdefault(c.index, []).append(c)
    out: list[Group] = []
    for anchor, cs in by_index.items():
        ids = {c.call_id for c in cs}
        if dialect is Dialect.CHAT:
            end = anchor
            while end + 1 < len(items) and is_tool_chat(items[end + 1]):
                end += 1
            zone = [a for i in range(anchor + 1, end + 1) for a in at.get(i, ())]
        elif dialect is Dialect.RESPONSES:
            end = anchor
            while end + 1 < len(items) and isinstance(items[end + 1], rs.TOOL_CALLS):
                end += 1
            while end + 1 < len(items) and isinstance(items[end + 1], rs.ToolOutput):
                end += 1
            zone = sorted((a for i in ids for a in by_id.get(i, ()) if a.index > anchor), key=lambda a: a.index)
        else:
            end = anchor + 1
            zone = list(at.get(anchor + 1, ()))
        out.append(Group(anchor, tuple(cs), tuple(a for a in zone if a.call_id in ids), end))
    return out


def runs(dialect: Dialect, items: list[Any], every: list[Call] | None = None,
         results: list[Answer] | None = None) -> list[tuple[list[Call], list[Answer]]]:
    """Each turn's calls with the answers sitting where that turn's answers belong, in order.

    Chat: an assistant message's calls and its run of tool messages; Anthropic: an assistant message's
    tool_use blocks and the tool_result blocks of the message right after it; Responses: a block of
    consecutive call items and the block of consecutive outputs right after it."""
    every = calls(dialect, items) if every is None else every
    results = answers(dialect, items) if results is None else results
    out: list[tuple[list[Call], list[Answer]]] = []
    if dialect is Dialect.RESPONSES:
        i = 0
        while i < len(items):
            if not isinstance(items[i], rs.TOOL_CALLS):
                i += 1
                continue
            start = i
            while i < len(items) and isinstance(items[i], rs.TOOL_CALLS):
                i += 1
            mid = i
            while i < len(items) and isinstance(items[i], rs.ToolOutput):
                i += 1
            out.append(([c for c in every if start <= c.index < mid], [a for a in results if mid <= a.index < i]))
        return out
    at: dict[int, list[Answer]] = {}
    for a in results:
        at.setdefault(a.index, []).append(a)
    for g in groups(dialect, items, every, results):
        last = g.end if dialect is Dialect.CHAT else g.anchor + 1
        out.append((list(g.calls), [a for i in range(g.anchor + 1, last + 1) for a in at.get(i, ())]))
    return out


# --- ids ---------------------------------------------------------------------------------------------------

_B62 = string.digits + string.ascii_letters


def _b62(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = []
    while n:
        n, r = divmod(n, 62)
        out.append(_B62[r])
    return "".join(out) or "0"


def fresh_id(old: str, k: int, taken: set[str], dialect: Dialect) -> str:
    """A new id for the ``k``-th use of ``old``, unused in ``taken``, deterministic, in ``old``'s format.

    Same length, and only the last (up to 4) letters and digits of ``old``'s final alphanumeric run
    replaced by others: 9 alphanumerics (Mistral's format) stay 9 alphanumerics, prefixes such as
    ``toolu_`` / ``call_`` stay, length limits (OpenAI: 40, Responses: 64) keep holding. Should that run
    be too short to find a free id, ``_`` and 6 characters are appended. An empty id becomes ``call_…``
    (``toolu_…`` for Anthropic)."""
    for attempt in range(64):
        digest = _b62(hashlib.sha256(f"{old}\0{k}\0{attempt}".encode()).digest())
        if not old:
            new = ("toolu_" if dialect is Dialect.MESSAGES else "call_") + digest[:24]
        elif attempt < 48 and (run := len(old) - len(old.rstrip(_B62))):
            cut = min(run, 4)
            new = old[: len(old) - cut] + digest[:cut]
        else:
            new = f"{old}_{digest[:6]}"
        if new not in taken:
            return new
    raise AssertionError("unreachable: 64 sha256 digests collided")


def rename(dialect: Dialect, items: list[Any], call_ids: Mapping[Key, str], answer_ids: Mapping[Key, str]) -> list[Any]:
    """``items`` with the calls and answers at these keys carrying their new ids; all else the same objects."""
    touched = {i for i, _ in call_ids} | {i for i, _ in answer_ids}
    out = list(items)
    for i in sorted(touched):
        m = items[i]
        if dialect is Dialect.CHAT:
            if (i, None) in answer_ids:
                m = evolve(m, tool_call_id=answer_ids[(i, None)])
            if m.tool_calls:
                tcs = [evolve(tc, id=call_ids[(i, k)]) if (i, k) in call_ids else tc
                       for k, tc in enumerate(m.tool_calls)]
                m = evolve(m, tool_calls=tcs)
        elif dialect is Dialect.RESPONSES:
            m = evolve(m, call_id=call_ids.get((i, None)) or answer_ids[(i, None)])
        else:
            blocks = []
            for k, b in enumerate(m.content):
                if (i, k) in call_ids:
                    b = evolve(b, id=call_ids[(i, k)])
                elif (i, k) in answer_ids:
                    b = evolve(b, tool_use_id=answer_ids[(i, k)])
                blocks.append(b)
            m = evolve(m, content=blocks)
        out[i] = m
    return out


# --- builders: what the repair inserts, in each dialect's own shape -----------------------------------------


def missing_result(dialect: Dialect, call: Call, text: str) -> Any:
    """A tool result for ``call`` saying ``text`` (an error result where the dialect has the notion)."""
    if dialect is Dialect.CHAT:
        return ch.Message(role="tool", tool_call_id=call.call_id, content=text)
    if dialect is Dialect.RESPONSES:
        kind = "custom_tool_call_output" if call.kind == "custom" else "function_call_output"
        return rs.ToolOutput(type=kind, call_id=call.call_id, output=text)
    return an.ToolResult(type="tool_result", tool_use_id=call.call_id, content=text, is_error=True)


def declaration(dialect: Dialect, remembered: Any, output_type: str | None = None) -> Any:
    """A remembered call (a `llmfix.memory.store.ToolCall`) as a declaration of ``dialect``."""
    if dialect is Dialect.RESPONSES:
        if output_type == "custom_tool_call_output":
            return rs.CustomToolCall(type="custom_tool_call", call_id=remembered.call_id, name=remembered.name,
                                     input=remembered.arguments)
        return rs.FunctionCall(type="function_call", call_id=remembered.call_id, name=remembered.name,
                               arguments=remembered.arguments)
    if dialect is Dialect.MESSAGES:
        try:
            value = json.loads(remembered.arguments) if remembered.arguments else {}
        except ValueError:
            value = {"input": remembered.arguments}
        if not isinstance(value, dict):
            value = {"input": value}
        return an.ToolUse(type="tool_use", id=remembered.call_id, name=remembered.name, input=value)
    return ch.ToolCall(id=remembered.call_id, type="function",
                       function=ch.Function(name=remembered.name, arguments=remembered.arguments))


def responses_output_as_user(output: rs.ToolOutput, label: str) -> rs.Message:
    """A Responses tool output nobody declared, as a user message that keeps all its content."""
    if isinstance(output.output, str):
        text = f"{label}\n{output.output}" if output.output else label
        return rs.Message(type="message", role="user", content=[rs.InputText(type="input_text", text=text)])
    parts = [rs.InputText(type="input_text", text=p.text) if isinstance(p, rs.OutputText) else p
             for p in output.output]
    return rs.Message(type="message", role="user", content=[rs.InputText(type="input_text", text=label), *parts])


def anthropic_result_as_blocks(result: an.ToolResult, label: str) -> list[Any]:
    """An Anthropic tool_result nobody declared, as user content blocks that keep all its content."""
    if result.content is None or isinstance(result.content, str):
        text = f"{label}\n{result.content}" if result.content else label
        return [an.TextBlock(type="text", text=text)]
    return [an.TextBlock(type="text", text=label), *result.content]


def ids(found: Iterable[Call | Answer]) -> str:
    return ", ".join(dict.fromkeys(x.call_id or "(empty)" for x in found))
