"""Gemini's function calls and responses: the ``functionCall`` parts of a model content, answered by as many
``functionResponse`` parts in the one user content right after it, in call order (``Please ensure that the number of
function response parts is equal to the number of function call parts of the function call turn.``,
google-gemini/gemini-cli #6379, #16543, #21830).

Ids are optional on this API (https://ai.google.dev/api/caching#FunctionCall): Gemini CLI makes its own, the model
may give none, a client may send none. Calls and responses are paired as Gemini pairs them: by id where both have
one, else by count and place — the n-th response named N in the content after a call turn answers the n-th call named
N there. A call with no id is known by its place (:data:`PLACE` and the content and part numbers): a key that never
leaves llmfix (a result added for it, or a call renamed, carries no id it did not have).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from llmfix.dialects.base import Answer, Call, Key, Pairing
from llmfix.dialects.gemini import wire as gw
from llmfix.wire.base import evolve

PAIRING = Pairing.NEXT_TURN
DECLARES = (b"functionCall", b"function_call")
ANSWERS = (b"functionResponse", b"function_response")
PAIRS = (b"functionCall", b"function_call", b"functionResponse", b"function_response")
FRESH_PREFIX = "call_"
PLACE = "@place "
"""How a call with no id is known while llmfix pairs it (never sent)."""


def _model(m: Any) -> bool:
    return isinstance(m, gw.Content) and m.role == "model"


def _user(m: Any) -> bool:
    return isinstance(m, gw.Content) and m.role in (None, "user")


def call_id(i: int, k: int, part: gw.CallPart) -> str:
    """The call's id, or the key of its place."""
    return part.call_id() or f"{PLACE}{i}.{k}"


def calls(items: list[Any]) -> list[Call]:
    return [Call(call_id(i, k, p), p.name(), i, k) for i, m in enumerate(items) if _model(m) for k, p in m.calls()]


def answer_ids(items: list[Any], i: int) -> list[tuple[int, str]]:
    """(part index, the id of the call it answers, or "" when none) of the responses of the user content ``i``: by
    its own id, else the n-th response named N without one answers the n-th call named N of the call turn before,
    among those no response answers by id. Responses split over several user contents after one call turn (each
    holding responses) are counted together, in order: the call turn is the one before the first of them."""
    first = i
    while first > 0 and _user(items[first - 1]) and items[first - 1].responses():
        first -= 1
    before = items[first - 1] if first > 0 else None
    run = range(first, i + 1)
    given = {rid for j in run for _, r in items[j].responses() if (rid := r.result_id()) is not None}
    named: dict[str, list[str]] = {}
    if _model(before):
        for k, p in before.calls():
            if (cid := call_id(first - 1, k, p)) not in given:
                named.setdefault(p.name(), []).append(cid)
    taken: Counter[str] = Counter()
    out = []
    for j in run:
        for k, r in items[j].responses():
            if (rid := r.result_id()) is not None:
                aid = rid
            else:
                choices = named.get(r.name(), [])
                n = taken[r.name()]
                taken[r.name()] += 1
                aid = choices[n] if n < len(choices) else ""
            if j == i:
                out.append((k, aid))
    return out


def answers(items: list[Any]) -> list[Answer]:
    return [Answer(aid, i, k) for i, m in enumerate(items) if _user(m) and m.responses()
            for k, aid in answer_ids(items, i)]


def is_call_item(item: Any) -> bool:
    return False


def is_answer_item(item: Any) -> bool:
    return False


def location(index: int, sub: int | None) -> str:
    return f"contents[{index}]" if sub is None else f"contents[{index}].parts[{sub}]"


def _with_id(part: Any, field: str, new: str) -> Any:
    held = gw.member(part, field)
    key = gw.key_of(part, field)
    if isinstance(held, gw.Wire):
        return evolve(part, **{key: evolve(held, id=new)})
    return evolve(part, **{key: {**(held or {}), "id": new}})


def rename(items: list[Any], call_ids: Mapping[Key, str], answer_ids_: Mapping[Key, str]) -> list[Any]:
    out = list(items)
    for i in sorted({i for i, _ in call_ids} | {i for i, _ in answer_ids_}):
        parts = list(items[i].parts or ())
        for k, p in enumerate(parts):
            if (i, k) in call_ids:
                parts[k] = _with_id(p, "functionCall", call_ids[(i, k)])
            elif (i, k) in answer_ids_:
                parts[k] = _with_id(p, "functionResponse", answer_ids_[(i, k)])
        out[i] = evolve(items[i], parts=parts)
    return out


def missing_result(call: Call, text: str) -> Any:
    if call.call_id.startswith(PLACE):  # a call without an id: the text names its tool, not llmfix's key
        text = text.replace(f" {call.call_id}", "", 1)
    response: dict[str, Any] = {"name": call.name, "response": {"error": text}}
    if not call.call_id.startswith(PLACE):
        response = {"id": call.call_id, **response}
    return gw.ResponsePart.model_validate({"functionResponse": response})


def result_as_user(result: Any, label: str) -> Any:
    raise TypeError("a functionResponse is a part of a user content, not a content of its own")


def refers_upstream(items: list[Any]) -> bool:
    return False


def declaration(remembered: Any, output_type: str | None = None) -> Any:
    try:
        args = json.loads(remembered.arguments) if remembered.arguments else {}
    except ValueError:
        args = {"input": remembered.arguments}
    return gw.CallPart.model_validate({"functionCall": {"id": remembered.call_id, "name": remembered.name,
                                                        "args": args if isinstance(args, dict) else {"input": args}}})


def settled(items: list[Any], start: int, declared: Any, answered: Any) -> tuple[set[str], set[str]] | None:
    """Nothing to pair: each call turn answered, in the one user content right after it, by exactly one response
    per call and before any text there; no response anywhere else; every id once. A paired prefix never ends in a
    call turn (its responses come next), so a user content with responses at ``start`` is looked at closer."""
    n = len(items)
    if n > start and _model(items[n - 1]) and items[n - 1].calls():
        return None
    nd: set[str] = set()
    na: set[str] = set()
    for i in range(start, n):
        m = items[i]
        if _model(m) and (made := m.calls()):
            nxt = items[i + 1] if i + 1 < n else None
            if not _user(nxt):
                return None
            ids = [call_id(i, k, p) for k, p in made]
            got = answer_ids(items, i + 1)
            if sorted(a for _, a in got) != sorted(ids) or not _leads(nxt):
                return None
            for x in ids:
                if x in nd or x in declared or x in answered:
                    return None
                nd.add(x)
                na.add(x)
        elif _user(m) and m.responses() and not (i > start and _model(items[i - 1]) and items[i - 1].calls()):
            return None
    return nd, na


def _leads(content: gw.Content) -> bool:
    """Whether the responses of ``content`` come before any text in it."""
    seen_text = False
    for p in content.parts or ():
        if isinstance(p, gw.TextPart):
            seen_text = True
        elif isinstance(p, gw.ResponsePart) and seen_text:
            return False
    return True


SCHEMA_ESCAPE = "parametersJsonSchema"
"""Where a declaration's full JSON Schema may go instead of ``parameters`` (https://ai.google.dev/api/caching#
FunctionDeclaration: mutually exclusive with it; what Gemini CLI sends)."""


def schemas(body: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(location, declaration, key) of each function declaration's ``parameters`` (either spelling of the
    declarations' list; inside Code Assist's envelope too)."""
    holder = body.get("request") if "contents" not in body and isinstance(body.get("request"), dict) else body
    out = []
    for i, tool in enumerate(holder.get("tools") or () if isinstance(holder.get("tools"), list) else ()):
        decls = gw.member(tool, "functionDeclarations") if isinstance(tool, dict) else None
        for j, decl in enumerate(decls if isinstance(decls, list) else ()):
            if isinstance(decl, dict) and isinstance(decl.get("parameters"), dict):
                out.append((f"tools[{i}].function_declarations[{j}]", decl, "parameters"))
    return out
